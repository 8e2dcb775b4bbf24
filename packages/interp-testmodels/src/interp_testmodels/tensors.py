"""How do suites turn the plain values a test generates into the tensors a backend receives?

The hostile-input harness (`interp_core.testing.hostile`) describes requests with plain Python
values so that it stays free of torch; each backend's suite turns them into tensors here, the
same way for eager and vLLM.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["tensor_from"]


def tensor_from(values: Any, dtype: str) -> torch.Tensor:
    """`values` (nested lists of numbers) as a tensor of torch dtype `dtype` (e.g. "int64").

    Built in float64 (or int64 when every value is an int) first, so the cast to `dtype` is the
    one a user's own conversion would make: 1e300 becomes inf in float32, 2**70 overflows int64.
    """
    floats = any(isinstance(x, float) for x in _flat(values))
    source = torch.tensor(values, dtype=torch.float64 if floats else torch.int64)
    return source.to(getattr(torch, dtype))


def _flat(values: Any) -> list[Any]:
    if isinstance(values, list | tuple):
        return [x for v in values for x in _flat(v)]
    return [values]
