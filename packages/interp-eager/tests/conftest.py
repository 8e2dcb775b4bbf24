"""Shared plumbing of the eager suite.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the shared
helpers (`eager_helpers.py`) are imported by several test modules, so the folder is added here.

Every test here runs torch on one thread. The tiny models do a few kilobytes of arithmetic per op,
so a second thread buys nothing, and on a busy 2-core machine OpenMP's spinning workers made each
forward 40x slower (0.14 s instead of 3 ms of CPU for the Llama family). The previous setting is
restored after each module, so other packages' tests in the same run are unaffected.

`interp_model_factory` feeds the interp-core conformance kit. The kit's plugin itself is enabled
in `test_conformance.py`, not here: pytest refuses `pytest_plugins` in a conftest below the
rootdir, and the repository's plain `pytest` run collects from the root.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interp_core.testing.suite_imports import helpers_importable
from interp_testmodels.threads import one_torch_thread_fixture

helpers_importable(__file__)

import eager_helpers  # noqa: E402


@pytest.fixture(scope="session")
def interp_model_factory() -> Callable[[str], Any]:
    # The kit shares the session's models with the other tests: one load per family.
    return eager_helpers.model


_one_torch_thread = one_torch_thread_fixture()
