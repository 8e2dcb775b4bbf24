"""Shared test plumbing for interp-core.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the fake
backend (`fake_backend.py`) is imported by several test modules and, by name, by the entry-point
tests' generated plugin modules, so the folder is added here once.
"""

from __future__ import annotations

from interp_core.testing.suite_imports import helpers_importable

helpers_importable(__file__)
