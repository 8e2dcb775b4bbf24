"""One torch thread for a test module: the shared fixture body of the package test suites.

The tiny test models do a few kilobytes of arithmetic per op, so a second thread buys nothing,
and on a busy 2-core machine OpenMP's spinning workers made each forward 40x slower. The
previous setting is restored afterwards, so other packages' tests in the same run are unaffected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["one_torch_thread"]


@contextmanager
def one_torch_thread() -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
