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


def _collected(command: list[str]) -> set[str]:
    """The test files pytest would collect for `command`'s targets (paths, not node ids)."""
    ignored = {a.removeprefix("--ignore=") for a in command if a.startswith("--ignore=")}
    targets = [a for a in command[3:] if not a.startswith("-") and (ROOT / a).exists()]
    found: set[str] = set()
    for target in targets:
        path = ROOT / target
        files = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
        for file in files:
            name = str(file.relative_to(ROOT))
            # pytest's rule (checked below): --ignore never drops a path named as a target.
            if target in ignored or not any(name == i or name.startswith(i + "/") for i in ignored):
                found.add(name)
    return found


def test_the_two_passes_cover_every_test_file_exactly_once() -> None:
    parallel, serial = run_tests.plan([], count=2)
    assert parallel[3:7] == ["-n", "2", "--dist", "loadfile"]
    everything = _collected(run_tests.pytest_command([]))
    first, second = _collected(parallel), _collected(serial)
    assert not first & second, sorted(first & second)
    assert first | second == everything, sorted(everything - first - second)
    # The modules that start vLLM engines or servers are never in the parallel pass.
    engines = ("packages/interp-vllm/", "packages/interp-serve/")
    assert not {f for f in first if f.startswith(engines)}


def test_every_serial_entry_exists() -> None:
    # A renamed module left in SERIAL would silently move its engine into the parallel pass.
    missing = [s for s in run_tests.SERIAL if not (ROOT / s).exists()]
    assert not missing, missing


def test_options_reach_both_passes_and_a_named_path_is_not_split() -> None:
    parallel, serial = run_tests.plan(["-m", "not gpu"], count=2)
    assert parallel[7:9] == ["-m", "not gpu"]  # after `python -m pytest -n 2 --dist loadfile`
    assert serial[3:5] == ["-m", "not gpu"]
    assert run_tests.plan(["tests/test_run_tests.py"], count=2) == [
        run_tests.pytest_command(["tests/test_run_tests.py"])
    ]
    assert run_tests.plan([], count=1) == [run_tests.pytest_command([])]


def test_pytest_ignores_a_module_under_a_target_but_never_a_target(tmp_path: Path) -> None:
    # The split relies on this rule of pytest's; the first split passed the serial folders as
    # targets and ignored them, and pytest collected them in the parallel pass anyway.
    import subprocess

    for name in ("a/test_one.py", "a/test_two.py", "b/test_three.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("def test_it():\n    pass\n")
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    command += ["--ignore=a/test_two.py", "--ignore=b", "a", "b"]
    listing = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True).stdout
    collected = {line.split("::")[0] for line in listing.splitlines() if "::" in line}
    assert collected == {"a/test_one.py", "b/test_three.py"}, listing
