"""How does a torch backend apply a steering operation to a block of activations?

Written once for every torch backend: the eager backend calls it from its forward hooks, the vLLM
backend from the hooks inside its worker processes. The operations are defined in
`interp_core.steering` (whose pure-Python `apply_reference` stays the float64 oracle the
conformance kit compares backends with); for an activation row `h`, the vector `v` and
`v̂ = v / ‖v‖`:

    add             delta = scale·v
    orthogonal      delta = (scale − 1)·(h·v̂)·v̂
    projection_cap  delta = (clamp(h·v̂, min, max) − h·v̂)·v̂

Rows are independent: the projection `h·v̂` is taken per row, never across the batch, and the
vector may differ per row (any shape that broadcasts against `h`, e.g. `[rows, width]`).

The dtype rule, the one every backend follows:

    The arithmetic runs in `compute_dtype(h.dtype)`: float32 for float16, bfloat16 and float32
    activations, float64 for float64 ones. The vector is cast to that dtype, the delta is
    computed in it, and the caller casts the delta to the activation's dtype and adds it there
    (`apply_steering` does exactly that): `h + delta.to(h.dtype)`.

So float32 models steer bit for bit as the arithmetic is written, and half-precision models get
their projections from float32 sums, rounded once, when the delta meets the activation. Several
operations at one site apply in order, each to the activation the previous ones left.

`steering_vector(spec)` turns a spec's vector into a tensor, refusing unusable values with the
same error and words as the core's check of a list (`interp_core.steering.check_vector_values`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from interp_core.steering import (
    OPS,
    SteeringSpec,
    check_vector_values,
    non_finite_vector,
    zero_direction,
)

__all__ = [
    "apply_steering",
    "compute_dtype",
    "position_mask",
    "steering_delta",
    "steering_vector",
]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype steering arithmetic runs in for activations of `dtype` (at least float32)."""
    return torch.promote_types(dtype, torch.float32)


def steering_vector(spec: SteeringSpec) -> torch.Tensor:
    """The spec's vector as a flat tensor whose values were checked.

    A tensor is returned as given (device and dtype are `steering_delta`'s business); anything
    else (a list of floats, another library's array) becomes a float32 tensor, as the wire to the
    vLLM workers carries it. Values are read here, when they are used, since a spec keeps an
    array as given: a non-finite element, or an all-zero vector for an op that needs a
    direction, raises `SteeringSpecError` exactly as `check_vector_values` does.
    """
    vector = spec.vector
    if not isinstance(vector, torch.Tensor):
        return torch.tensor(check_vector_values(spec), dtype=torch.float32)
    finite = torch.isfinite(vector)
    if not bool(finite.all()):
        index = int((~finite).flatten().nonzero()[0, 0])
        raise non_finite_vector(spec.address, index, float(vector.flatten()[index]))
    if spec.op != "add" and not bool(vector.any()):
        raise zero_direction(spec.address, spec.op)
    return vector


def position_mask(
    row_positions: torch.Tensor, positions: Sequence[int] | torch.Tensor
) -> torch.Tensor:
    """True where a row's absolute position is one of `positions` (same shape as the rows)."""
    wanted = torch.as_tensor(positions, device=row_positions.device, dtype=row_positions.dtype)
    return torch.isin(row_positions, wanted)


def steering_delta(
    h: torch.Tensor,
    vector: torch.Tensor,
    op: str,
    *,
    scale: float = 1.0,
    lower: float | None = None,
    upper: float | None = None,
    row_positions: torch.Tensor | None = None,
    positions: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """What one operation adds to activations `h` `[..., width]`, in `compute_dtype(h.dtype)`.

    `vector` is `[width]` or broadcasts against `h` (one vector per row). `lower`/`upper` are the
    projection_cap bounds (a spec's `min`/`max`). With `positions`, rows whose absolute position
    (`row_positions`, shaped `h.shape[:-1]`) is not listed get a zero delta. `h` is never
    modified, so a graph through it stays usable for gradients.
    """
    dtype = compute_dtype(h.dtype)
    h = h.to(dtype)
    v = vector.to(device=h.device, dtype=dtype)
    if op == "add":
        delta = (scale * v).expand_as(h)
    elif op in OPS:
        unit = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        projection = (h * unit).sum(dim=-1, keepdim=True)
        if op == "orthogonal":
            factor = (scale - 1.0) * projection
        else:  # projection_cap
            clamped = projection
            if lower is not None:
                clamped = clamped.clamp(min=lower)
            if upper is not None:
                clamped = clamped.clamp(max=upper)
            factor = clamped - projection
        delta = factor * unit
    else:
        message = f"unknown steering op {op!r}; the ops are {', '.join(OPS)}"
        raise ValueError(message)
    if positions is None:
        return delta
    if row_positions is None:
        message = "steering_delta got positions but not row_positions (each row's position)"
        raise ValueError(message)
    mask = position_mask(row_positions, positions).to(device=delta.device, dtype=dtype)
    return delta * mask.unsqueeze(-1)


def apply_steering(
    h: torch.Tensor,
    vector: torch.Tensor,
    op: str,
    *,
    scale: float = 1.0,
    lower: float | None = None,
    upper: float | None = None,
    row_positions: torch.Tensor | None = None,
    positions: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """`h` after one operation, in `h`'s dtype: `h + steering_delta(...).to(h.dtype)`."""
    delta = steering_delta(
        h,
        vector,
        op,
        scale=scale,
        lower=lower,
        upper=upper,
        row_positions=row_positions,
        positions=positions,
    )
    return h + delta.to(h.dtype)
