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


def main(argv: list[str]) -> int:
    targets = [a for a in argv if not a.startswith("-")]
    options = [a for a in argv if a.startswith("-")]
    if not targets:
        targets = [
            "tests",
            *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "packages").glob("*/tests")),
        ]
    command = [sys.executable, "-m", "pytest", *options, *targets]
    print("+", " ".join(command), flush=True)
    code = subprocess.call(command, cwd=ROOT)
    if code == NO_TESTS_COLLECTED:
        print("pytest collected no tests in", ", ".join(targets), "- nothing to run yet")
        return 0
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
