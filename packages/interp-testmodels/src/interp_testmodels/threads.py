"""One torch thread for a test module: the shared fixture of the package test suites.

The tiny test models do a few kilobytes of arithmetic per op, so a second thread buys nothing,
and on a busy 2-core machine OpenMP's spinning workers made each forward 40x slower. The
previous setting is restored afterwards, so other packages' tests in the same run are unaffected.
A suite's conftest binds the fixture by name: `_one_torch_thread = one_torch_thread_fixture()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["one_torch_thread", "one_torch_thread_fixture"]


@contextmanager
def one_torch_thread() -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def one_torch_thread_fixture() -> Callable[..., Any]:
    """An autouse, module-scoped pytest fixture that runs each module under `one_torch_thread`
    (pytest is imported here, not at module level, so the models build without it)."""
    import pytest

    @pytest.fixture(autouse=True, scope="module")
    def _one_torch_thread() -> Iterator[None]:
        with one_torch_thread():
            yield

    return _one_torch_thread
