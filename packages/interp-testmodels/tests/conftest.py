"""Shared plumbing of the test-model suite: every test here runs torch on one thread.

The tiny models do a few kilobytes of arithmetic per op, so a second thread buys nothing, and on a
busy 2-core machine OpenMP's spinning workers made each forward many times slower. The previous
setting is restored after each module, so other packages' tests in the same run are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from interp_testmodels.threads import one_torch_thread


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    with one_torch_thread():
        yield
