"""May a test that needs a missing resource skip, or must it fail?

A test that needs something this machine may lack (a GPU, the Hub, vLLM, Chromium, Streamlit)
calls `require(name, module=..., executable=...)`. When the resource is absent the test skips —
unless the environment variable INTERP_REQUIRE names it (a comma-separated list CI sets), and
then the test fails: skipped is not passed, and CI must not let a gate quietly become a skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

__all__ = ["ENV_VAR", "require", "required"]

ENV_VAR = "INTERP_REQUIRE"


def required() -> set[str]:
    """The resource names INTERP_REQUIRE lists (lower case)."""
    raw = os.environ.get(ENV_VAR, "")
    return {part.strip().lower() for part in raw.replace(";", ",").split(",") if part.strip()}


def require(name: str, *, module: str | None = None, executable: str | None = None) -> None:
    """Skip unless the resource is here; fail instead when INTERP_REQUIRE names it."""
    present = True
    if module is not None:
        present = importlib.util.find_spec(module) is not None
    if executable is not None:
        present = present and shutil.which(executable) is not None
    if present:
        return
    message = f"{name} is not available here"
    if name.lower() in required():
        pytest.fail(f"{message}, and {ENV_VAR}={os.environ[ENV_VAR]} needs it")
    pytest.skip(message)
