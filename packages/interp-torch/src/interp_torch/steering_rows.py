"""The steering operations as per-row parameters: the form a compiled graph can apply.

`interp_torch.steering` applies one operation to a block of rows with Python choosing the op.
A graph that is traced once and replayed (vLLM's torch.compile'd forward, CUDA graphs) cannot
branch on which op a row wants, so every operation is rewritten here as one formula whose
parameters vary per row: two vectors `a`, `u` and eight scalars `k, g, q, c, lo, hi, b, θ`:

    p     = h·u                                     (per row)
    f     = r·[r > θ],  r = max(p + b, 0)           (a clamp's feature; 0 when θ = +inf)
    n     = ‖h‖ where g ≠ 0, else 0
    delta = (((k − f) + g·n) + q·p)·a + (c·p + (clamp(p, lo, hi) − p))·u

    op                  a          u    k      g   q   c          lo, hi     b   θ
    add                 v          0    scale  0   0   0          ∓inf       0   +inf
    add, normalize      v̂          0    scale  0   0   0          ∓inf       0   +inf
    orthogonal          0          v̂    0      0   0   scale − 1  ∓inf       0   +inf
    projection_cap      0          v̂    0      0   0   0          min, max   0   +inf
    clamp               v          e    scale  0   0   0          ∓inf       b   θ
    norm_add            v̂          0    0      c*  0   0          ∓inf       0   +inf
    ablate              0          v̂    0      0   0   −1         ∓inf       0   +inf
    swap                t̂ − v̂      v̂    0      0   1   0          ∓inf       0   +inf
    no steering         0          0    0      0   0   0          ∓inf       0   +inf

    (* c = clamp(scale, −max_fraction, max_fraction); an open bound is ∓inf)

Each term a row's op does not use is an exact zero, and the terms it uses are the products
`steering_delta` takes, in the same order and `compute_dtype`, so the delta is bit for bit
`steering_delta`'s for that op, and a row nobody steers gets exactly 0. The host fills one
`RowParameters` per operation (`row_parameters`, from the spec as `spec_delta` reads it); the
static tier keeps them in a per-point op table and the graph gathers each row's entry and runs
`row_delta`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from interp_core.steering import STATIC_OPS, SteeringSpec
from interp_core.steering_lens import norm_add_coefficient
from interp_torch.steering import steering_encoder, steering_target

__all__ = ["SCALARS", "RowParameters", "neutral_parameters", "row_delta", "row_parameters"]

# The scalar parameters, in the order `RowParameters` holds them after the two vectors.
SCALARS = ("base", "norm", "along", "coef", "low", "high", "bias", "threshold")


class RowParameters(NamedTuple):
    """One operation's parameters (vectors `[width]` or `[rows, width]`, scalars as floats or
    `[rows, 1]` tensors), named as in the module docstring: a, u, k, g, q, c, lo, hi, b, θ."""

    add: torch.Tensor
    unit: torch.Tensor
    base: float | torch.Tensor
    norm: float | torch.Tensor
    along: float | torch.Tensor
    coef: float | torch.Tensor
    low: float | torch.Tensor
    high: float | torch.Tensor
    bias: float | torch.Tensor
    threshold: float | torch.Tensor


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)


def row_parameters(
    spec: SteeringSpec,
    vector: torch.Tensor,
    dtype: torch.dtype,
    *,
    encoder: torch.Tensor | None = None,
    target: torch.Tensor | None = None,
) -> RowParameters:
    """The parameters of `spec` (its vector as the caller holds it, e.g. a rank's slice; a
    clamp's `encoder` and a swap's `target` as tensors, read from the spec when omitted), the
    vectors in `dtype` (the compute dtype). Every coefficient is read from the spec, as
    `spec_delta` reads it."""
    encoder = steering_encoder(spec) if encoder is None else encoder
    target = steering_target(spec) if target is None else target
    op = spec.op
    if op not in STATIC_OPS:
        message = f"unknown steering op {op!r}; the ops are {', '.join(STATIC_OPS)}"
        raise ValueError(message)
    v = vector.to(dtype)
    zero = torch.zeros_like(v)
    inf = math.inf
    if op == "add":
        direction = _unit(v) if spec.normalize else v
        return RowParameters(direction, zero, spec.scale, 0.0, 0.0, 0.0, -inf, inf, 0.0, inf)
    if op == "clamp":
        if encoder is None:
            message = "row_parameters got op='clamp' without the feature's encoder row"
            raise ValueError(message)
        e = encoder.to(dtype)
        return RowParameters(v, e, spec.scale, 0.0, 0.0, 0.0, -inf, inf, spec.bias, spec.threshold)
    unit = _unit(v)
    if op == "norm_add":
        coefficient = norm_add_coefficient(spec.scale, spec.max_fraction)
        return RowParameters(unit, zero, 0.0, coefficient, 0.0, 0.0, -inf, inf, 0.0, inf)
    if op == "swap":
        if target is None:
            message = "row_parameters got op='swap' without the target direction"
            raise ValueError(message)
        toward = _unit(target.to(dtype)) - unit
        return RowParameters(toward, unit, 0.0, 0.0, 1.0, 0.0, -inf, inf, 0.0, inf)
    if op == "orthogonal":
        return RowParameters(zero, unit, 0.0, 0.0, 0.0, spec.scale - 1.0, -inf, inf, 0.0, inf)
    if op == "ablate":
        return RowParameters(zero, unit, 0.0, 0.0, 0.0, -1.0, -inf, inf, 0.0, inf)
    low = -inf if spec.min is None else float(spec.min)
    high = inf if spec.max is None else float(spec.max)
    return RowParameters(zero, unit, 0.0, 0.0, 0.0, 0.0, low, high, 0.0, inf)


def neutral_parameters(width: int, dtype: torch.dtype) -> RowParameters:
    """The parameters of a row nobody steers (its delta is exactly 0)."""
    zero = torch.zeros(width, dtype=dtype)
    inf = math.inf
    return RowParameters(zero, zero, 0.0, 0.0, 0.0, 0.0, -inf, inf, 0.0, inf)


def row_delta(h: torch.Tensor, p: RowParameters) -> torch.Tensor:
    """The delta of `h` `[rows, width]` (already in the compute dtype) under per-row parameters
    `p` (vectors `[rows, width]`, scalars `[rows, 1]`). Pure tensor arithmetic, no
    data-dependent branch, no host sync: traceable into a compiled graph."""
    projection = (h * p.unit).sum(dim=-1, keepdim=True)
    rectified = torch.relu(projection + p.bias)
    feature = torch.where(rectified > p.threshold, rectified, torch.zeros_like(rectified))
    # ‖h‖ only where an op reads it: 0·‖h‖ of a huge row would be NaN, not the 0 it stands for.
    norm = torch.where(
        p.norm != 0, torch.linalg.vector_norm(h, dim=-1, keepdim=True), torch.zeros_like(feature)
    )
    scalar = ((p.base - feature) + p.norm * norm) + p.along * projection
    clamped = torch.minimum(torch.maximum(projection, p.low), p.high)
    return scalar * p.add + (p.coef * projection + (clamped - projection)) * p.unit
