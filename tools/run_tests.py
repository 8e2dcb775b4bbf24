"""Run the test suites of the packages named on the command line (default: all of them).

With no test path named, the suite runs in two passes. The first runs every module that starts
no engine, server, cluster or browser on two pytest-xdist workers (`--dist loadfile`: a module's
tests stay on one worker, so its module fixtures are built once); those modules each use one
torch thread, so two of them fill two cores. The second runs the `SERIAL` modules one at a time
in one process: they start vLLM engines, uvicorn servers, Ray clusters, Chromium or the
validator's reference environments, which share the session's engines and would fight over the
cores and memory if two ran at once. Without pytest-xdist, or with INTERP_TEST_WORKERS=1, both
passes run serially.

pytest exits with 5 when it collects nothing; for a package whose code has not landed yet that is
not a failure, so it is reported and treated as success. Any other non-zero exit fails the run.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_TESTS_COLLECTED = 5

# Folders and modules that start engines, servers, clusters, browsers or pinned environments.
SERIAL: tuple[str, ...] = (
    "packages/interp-vllm/tests",
    "packages/interp-serve/tests",
    "packages/interp-validator/tests",
    "packages/interp-sae/tests/test_vllm_features.py",
    "packages/interp-sae/tests/test_saelens_reference.py",
    "packages/interp-sizer/tests/test_app.py",
    "packages/interp-sizer/tests/test_app_browser.py",
    "packages/interp-sizer/tests/test_vllm_crosscheck.py",
    "packages/interp-engine/tests/test_seed_loading.py",
    "packages/interp-harvest/tests/test_vllm.py",
    "packages/interp-harvest/tests/test_saelens_training.py",
    "packages/interp-harvest/tests/test_dashboards_vllm.py",
    "packages/interp-harvest/tests/test_sae_dashboard_agreement.py",
    "packages/interp-harvest/tests/test_replicas.py",
    "packages/interp-harvest/tests/test_bench.py",
)


def default_targets() -> list[str]:
    """Every suite: the workspace's own tests, then each package's, by name."""
    return ["tests", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "packages").glob("*/tests"))]


def _names_target(argv: list[str]) -> bool:
    return any((ROOT / a.partition("::")[0]).exists() for a in argv)


def workers() -> int:
    """How many xdist workers the first pass uses (0: no split)."""
    wanted = os.environ.get("INTERP_TEST_WORKERS")
    count = int(wanted) if wanted else min(2, os.cpu_count() or 1)
    if count < 2 or importlib.util.find_spec("xdist") is None:
        return 0
    return count


def pytest_command(argv: list[str]) -> list[str]:
    """The single pytest command line for `argv`, with no split.

    The arguments pass to pytest untouched and in order (`-m gpu` keeps its value); only when
    none of them names a test path are the default targets appended.
    """
    command = [sys.executable, "-m", "pytest", *argv]
    if not _names_target(argv):
        command += default_targets()
    return command


def plan(argv: list[str], count: int | None = None) -> list[list[str]]:
    """The pytest command lines `argv` runs as, in order.

    A named test path runs as given, in one command. Otherwise, with `count` >= 2 workers, the
    parallel pass (every default target, the SERIAL ones ignored) comes first, then the serial
    pass of the SERIAL targets; together they cover each test exactly once.
    """
    count = workers() if count is None else count
    if _names_target(argv) or count < 2:
        return [pytest_command(argv)]
    present = [s for s in SERIAL if (ROOT / s).exists()]
    parallel = [sys.executable, "-m", "pytest", "-n", str(count), "--dist", "loadfile", *argv]
    # A folder named on the command line is collected even when --ignore names it too, so the
    # serial folders are left out of the targets and only the serial modules are ignored.
    targets = [t for t in default_targets() if t not in present]
    parallel += [f"--ignore={s}" for s in present if s not in targets and Path(s).suffix]
    parallel += targets
    serial = [sys.executable, "-m", "pytest", *argv, *present]
    return [parallel, serial]


def main(argv: list[str]) -> int:
    failed = 0
    for command in plan(argv):
        print("+", " ".join(command), flush=True)
        code = subprocess.call(command, cwd=ROOT)
        if code == NO_TESTS_COLLECTED:
            print("pytest collected no tests in", " ".join(command[3:]), "- nothing to run yet")
            code = 0
        failed = failed or code
    return failed


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
