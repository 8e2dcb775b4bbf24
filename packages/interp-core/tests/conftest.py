"""Shared test plumbing for interp-core.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the fake
backend (`fake_backend.py`) is imported by several test modules and, by name, by the entry-point
tests' generated plugin modules, so the folder is added here once.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
