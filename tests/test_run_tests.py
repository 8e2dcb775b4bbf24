"""tools/run_tests.py hands pytest the arguments it was given, in order."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("run_tests", ROOT / "tools" / "run_tests.py")
assert _spec and _spec.loader
run_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_tests)


def test_an_option_keeps_its_value_and_the_default_targets_follow() -> None:
    # The old split by a leading "-" turned `-m gpu` into `pytest -m packages/... gpu`.
    command = run_tests.pytest_command(["-m", "gpu", "-k", "llama"])
    assert command[:7] == [sys.executable, "-m", "pytest", "-m", "gpu", "-k", "llama"]
    assert "tests" in command[7:]
    assert "packages/interp-core/tests" in command[7:]


def test_named_targets_replace_the_defaults() -> None:
    command = run_tests.pytest_command(["packages/interp-core/tests", "-x"])
    assert command[3:] == ["packages/interp-core/tests", "-x"]
    node = "tests/test_run_tests.py::test_named_targets_replace_the_defaults"
    assert run_tests.pytest_command([node])[3:] == [node]
