"""Run the test suites of the packages named on the command line (default: all of them).

pytest exits with 5 when it collects nothing; for a package whose code has not landed yet that is
not a failure, so it is reported and treated as success. Any other non-zero exit fails the run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NO_TESTS_COLLECTED = 5


def pytest_command(argv: list[str]) -> list[str]:
    """The pytest command line for `argv`.

    The arguments pass to pytest untouched and in order (`-m gpu` keeps its value); only when
    none of them names a test path are the default targets appended.
    """
    targets = [a for a in argv if (ROOT / a.partition("::")[0]).exists()]
    command = [sys.executable, "-m", "pytest", *argv]
    if not targets:
        targets = [
            "tests",
            *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "packages").glob("*/tests")),
        ]
        command += targets
    return command


def main(argv: list[str]) -> int:
    command = pytest_command(argv)
    print("+", " ".join(command), flush=True)
    code = subprocess.call(command, cwd=ROOT)
    if code == NO_TESTS_COLLECTED:
        print("pytest collected no tests in", " ".join(command[3:]), "- nothing to run yet")
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
