"""Shared plumbing of the interp-sae suite.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the SAE
writers (`sae_files.py`) are shared by several test modules, so the folder is added here. Torch
runs on one thread: the tiny SAEs and model gain nothing from a second one on a busy machine.
"""

from __future__ import annotations

from interp_core.testing.suite_imports import helpers_importable
from interp_testmodels.threads import one_torch_thread_fixture

helpers_importable(__file__)


_one_torch_thread = one_torch_thread_fixture()
