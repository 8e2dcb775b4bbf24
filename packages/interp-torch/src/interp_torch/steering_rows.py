"""The steering operations as per-row parameters: the form a compiled graph can apply.

`interp_torch.steering` applies one operation to a block of rows with Python choosing the op.
A graph that is traced once and replayed (vLLM's torch.compile'd forward, CUDA graphs) cannot
branch on which op a row wants, so every operation is rewritten here as one formula whose
parameters vary per row:

    p     = h·û                                   (per row; û = 0 for an add)
    delta = a + (c·p + clamp(p, lo, hi) − p)·û

    add             a = scale·v,  û = 0,   c = 0,          lo = −inf, hi = +inf
    orthogonal      a = 0,        û = v̂,   c = scale − 1,  lo = −inf, hi = +inf
    projection_cap  a = 0,        û = v̂,   c = 0,          lo = min (−inf when open),
                                                           hi = max (+inf when open)
    no steering     a = 0,        û = 0,   c = 0,          lo = −inf, hi = +inf   (delta = 0)

Each term that a row's op does not use is an exact zero, so the delta is bit for bit the one
`steering_delta` computes for that op (same products in the same order, in the same
`compute_dtype`), and a row nobody steers gets exactly 0. The host fills the parameters before a
step (`row_parameters`), the graph runs `row_delta`.
"""

from __future__ import annotations

import math

import torch

from interp_core.steering import STATIC_OPS

__all__ = ["RowParameters", "neutral_parameters", "row_delta", "row_parameters"]

RowParameters = tuple[torch.Tensor, torch.Tensor, float, float, float]


def row_parameters(
    vector: torch.Tensor,
    op: str,
    dtype: torch.dtype,
    *,
    scale: float = 1.0,
    lower: float | None = None,
    upper: float | None = None,
) -> RowParameters:
    """`(a, û, c, lo, hi)` of one operation, the vectors in `dtype` (the compute dtype)."""
    v = vector.to(dtype)
    zero = torch.zeros_like(v)
    if op == "add":
        return scale * v, zero, 0.0, -math.inf, math.inf
    if op not in STATIC_OPS:
        message = f"unknown steering op {op!r}; the ops are {', '.join(STATIC_OPS)}"
        raise ValueError(message)
    unit = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    if op == "orthogonal":
        return zero, unit, scale - 1.0, -math.inf, math.inf
    low = -math.inf if lower is None else float(lower)
    high = math.inf if upper is None else float(upper)
    return zero, unit, 0.0, low, high


def neutral_parameters(width: int, dtype: torch.dtype) -> RowParameters:
    """The parameters of a row nobody steers (its delta is exactly 0)."""
    zero = torch.zeros(width, dtype=dtype)
    return zero, zero, 0.0, -math.inf, math.inf


def row_delta(
    h: torch.Tensor,
    add: torch.Tensor,
    unit: torch.Tensor,
    coef: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
) -> torch.Tensor:
    """The delta of `h` `[rows, width]` (already in the compute dtype) under per-row parameters.

    `add`, `unit`: `[rows, width]`; `coef`, `low`, `high`: `[rows, 1]`. Pure tensor arithmetic,
    no data-dependent branch, no host sync: traceable into a compiled graph.
    """
    projection = (h * unit).sum(dim=-1, keepdim=True)
    clamped = torch.minimum(torch.maximum(projection, low), high)
    return add + (coef * projection + (clamped - projection)) * unit
