"""Shared plumbing of the validator suite.

torch runs on one thread: the tiny models do kilobytes of arithmetic per op, and on a busy
2-core machine OpenMP's spinning workers only slow them down. The previous setting is restored
after each module. The folder is put on sys.path for the suite's helper modules (pytest runs in
importlib mode).
"""

from __future__ import annotations

from interp_core.testing.suite_imports import helpers_importable
from interp_testmodels.threads import one_torch_thread_fixture

helpers_importable(__file__)


_one_torch_thread = one_torch_thread_fixture()
