"""Shared plumbing of the interp-sae suite.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the SAE
writers (`sae_files.py`) are shared by several test modules, so the folder is added here. Torch
runs on one thread: the tiny SAEs and model gain nothing from a second one on a busy machine.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interp_testmodels.threads import one_torch_thread

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    with one_torch_thread():
        yield
