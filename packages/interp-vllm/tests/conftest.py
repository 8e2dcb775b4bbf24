"""Shared plumbing of the vLLM suite: one torch thread in this process.

The engine runs in its own processes (vLLM sets their threads); this process only builds tiny
models and runs the eager reference, where a second OpenMP thread on a busy 2-core machine costs
far more than it gives. The previous setting is restored after each module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
