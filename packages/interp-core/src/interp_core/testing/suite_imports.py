"""Where a package's test suite finds its own helper modules.

The suites run in pytest's importlib mode (the root pyproject), which does not put a test folder
on `sys.path`, so a test's `from vllm_helpers import ...` would fail. Each suite's conftest calls
`helpers_importable(__file__)` once, which puts that conftest's folder first on `sys.path`.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["helpers_importable"]


def helpers_importable(conftest: str) -> None:
    """Put the folder of `conftest` (a conftest's `__file__`) first on `sys.path`, once."""
    folder = str(Path(conftest).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
