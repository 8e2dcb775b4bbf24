"""The steering operations as per-row parameters: the form a compiled graph can apply.

`interp_torch.steering` applies one operation to a block of rows with Python choosing the op.
A graph that is traced once and replayed (vLLM's torch.compile'd forward, CUDA graphs) cannot
branch on which op a row wants, so every operation is rewritten here as one formula whose
parameters vary per row: two vectors `a`, `u` and nine scalars `k, g, q, c, lo, hi, b, θ, r`:

    p     = h·u                                     (per row)
    f     = ρ·[ρ > θ],  ρ = max(p + b, 0)           (a clamp's feature; 0 when θ = +inf)
    n     = ‖h‖ where g ≠ 0, else 0
    s     = (a − h) where r ≠ 0 and u ≠ 0, else 0   (per channel: a patch's written channels)
    delta = (((k − f) + g·n) + q·p)·a + (c·p + (clamp(p, lo, hi) − p))·u + s

    op                  a          u    k      g   q   c          lo, hi     b   θ     r
    add                 v          0    scale  0   0   0          ∓inf       0   +inf  0
    add, normalize      v̂          0    scale  0   0   0          ∓inf       0   +inf  0
    orthogonal          0          v̂    0      0   0   scale − 1  ∓inf       0   +inf  0
    projection_cap      0          v̂    0      0   0   0          min, max   0   +inf  0
    clamp               v          e    scale  0   0   0          ∓inf       b   θ     0
    norm_add            v̂          0    0      c*  0   0          ∓inf       0   +inf  0
    ablate              0          v̂    0      0   0   −1         ∓inf       0   +inf  0
    swap                t̂ − v̂      v̂    0      0   1   0          ∓inf       0   +inf  0
    set (a patch)       v†         m†   0      0   0   0          ∓inf       0   +inf  1
    no steering         0          0    0      0   0   0          ∓inf       0   +inf  0

    (* c = clamp(scale, −max_fraction, max_fraction); an open bound is ∓inf;
     † the patch's values and a 0/1 mask scattered to its channels, every channel when it
       names none: p = h·m is finite, so its first two terms are exact zeros)

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

# The scalar parameters, in the order `RowParameters` holds them after the two vectors (as many
# as `interp_core.steering.STATIC_OP_SCALARS`, which the sizer prices).
SCALARS = ("base", "norm", "along", "coef", "low", "high", "bias", "threshold", "replace")


class RowParameters(NamedTuple):
    """One operation's parameters (vectors `[width]` or `[rows, width]`, scalars as floats or
    `[rows, 1]` tensors), named as in the module docstring: a, u, k, g, q, c, lo, hi, b, θ, r."""

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
    replace: float | torch.Tensor = 0.0


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)


def row_parameters(
    spec: SteeringSpec,
    vector: torch.Tensor,
    dtype: torch.dtype,
    *,
    encoder: torch.Tensor | None = None,
    target: torch.Tensor | None = None,
    width: int | None = None,
) -> RowParameters:
    """The parameters of `spec` (its vector as the caller holds it, e.g. a rank's slice; a
    clamp's `encoder` and a swap's `target` as tensors, read from the spec when omitted), the
    vectors in `dtype` (the compute dtype). Every coefficient is read from the spec, as
    `spec_delta` reads it. `width` is the row's (a patch of some channels carries fewer values;
    the vector's own width when omitted)."""
    encoder = steering_encoder(spec) if encoder is None else encoder
    target = steering_target(spec) if target is None else target
    op = spec.op
    if op not in STATIC_OPS:
        message = f"unknown steering op {op!r}; the ops are {', '.join(STATIC_OPS)}"
        raise ValueError(message)
    v = vector.to(dtype)
    zero = torch.zeros_like(v)
    inf = math.inf
    if op == "set":
        return _set_parameters(v, spec.channels, v.shape[-1] if width is None else width)
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


def _set_parameters(v: torch.Tensor, channels: tuple[int, ...] | None, width: int) -> RowParameters:
    """A patch: its values and a 0/1 mask in the written channels, the gate r open."""
    inf = math.inf
    if channels is None:
        if v.shape[-1] != width:
            message = f"a {v.shape[-1]}-wide patch cannot write a {width}-wide row"
            raise ValueError(message)
        values, mask = v, torch.ones_like(v)
    else:
        index = torch.as_tensor(channels, dtype=torch.long, device=v.device)
        values = torch.zeros(width, dtype=v.dtype, device=v.device).index_copy(0, index, v)
        mask = torch.zeros(width, dtype=v.dtype, device=v.device).index_fill(0, index, 1.0)
    return RowParameters(values, mask, 0.0, 0.0, 0.0, 0.0, -inf, inf, 0.0, inf, 1.0)


def neutral_parameters(width: int, dtype: torch.dtype) -> RowParameters:
    """The parameters of a row nobody steers (its delta is exactly 0)."""
    zero = torch.zeros(width, dtype=dtype)
    inf = math.inf
    return RowParameters(zero, zero, 0.0, 0.0, 0.0, 0.0, -inf, inf, 0.0, inf, 0.0)


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
    delta = scalar * p.add + (p.coef * projection + (clamped - projection)) * p.unit
    # A patch's channels become its values: `a − h` there, an exact 0 on every other row and
    # channel (a `where`, not a product: 0·(a − h) of an overflowed row would be NaN).
    written = (p.replace != 0) & (p.unit != 0)
    return delta + torch.where(written, p.add - h, torch.zeros_like(h))
