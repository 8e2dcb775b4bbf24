"""Print a package's static version (from src/<module>/__about__.py) for release workflows."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_version(package: str) -> str:
    (about,) = (ROOT / "packages" / package / "src").glob("*/__about__.py")
    match = re.fullmatch(r'__version__ = "([^"]+)"\n', about.read_text())
    if match is None:
        message = f"{about} must hold only a static __version__ line"
        raise SystemExit(message)
    return match.group(1)


if __name__ == "__main__":
    print(package_version(sys.argv[1]))
