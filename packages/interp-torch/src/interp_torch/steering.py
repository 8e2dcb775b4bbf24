"""How does a torch backend apply a steering operation to a block of activations?

Written once for every torch backend: the eager backend calls it from its forward hooks, the vLLM
backend from the hooks inside its worker processes. The operations are defined in
`interp_core.steering` (whose pure-Python `apply_reference` stays the float64 oracle the
conformance kit compares backends with); for an activation row `h`, the vector `v` and
`v̂ = v / ‖v‖`:

    add             delta = scale·v
    orthogonal      delta = (scale − 1)·(h·v̂)·v̂
    projection_cap  delta = (clamp(h·v̂, min, max) − h·v̂)·v̂
    clamp           delta = (scale − f)·v, f = r·[r > θ], r = max(h·e + b, 0)
                    (an SAE feature set to `scale`, its reconstruction error kept)
    add, normalize  delta = scale·v̂
    norm_add        delta = (c·‖h‖)·v̂, c = clamp(scale, −max_fraction, max_fraction)
    ablate          delta = (−1·(h·v̂))·v̂
    swap            delta = (h·v̂)·(t̂ − v̂), t̂ = target / ‖target‖
    set             delta[c] = v − h[c] at the spec's channels c (all when None), 0 elsewhere
                    (a patch or ablation; not part of the static tier's formula)

(written in the order of products the static tier's per-row formula takes,
`interp_torch.steering_rows`, so the two agree bit for bit).

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

The overflow rule, also the one every backend follows (finite inputs must not produce inf/NaN
silently):

    Before any cast, `check_steering_fits(spec, dtype)` refuses a spec whose result must
    overflow a model running in `dtype` (the arithmetic, in float64: |scale|·max|v| for add, the
    vector's own size for every op, |scale| for orthogonal, the cap bounds for projection_cap).
    After a write, `check_steered_finite(rows, spec)` checks the written rows with
    `torch.isfinite` and refuses naming the point, the scale and the dtype, so a non-finite
    activation never reaches a later layer, a KV cache or another request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from interp_core.errors import SteeringSpecError
from interp_core.steering import (
    ALL_OPS,
    OPS,
    SteeringSpec,
    check_vector_values,
    non_finite_vector,
    zero_direction,
)
from interp_core.steering_lens import norm_add_coefficient

__all__ = [
    "apply_steering",
    "check_scope_resolved",
    "check_steered_finite",
    "check_steering_fits",
    "compute_dtype",
    "position_mask",
    "spec_delta",
    "steering_delta",
    "steering_encoder",
    "steering_target",
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
    return _checked(spec, vector, direction=spec.needs_direction)


def steering_target(spec: SteeringSpec) -> torch.Tensor | None:
    """A swap's target direction as a flat tensor (None for the other ops); values checked."""
    return _optional_field(spec, spec.target, direction=True)


def steering_encoder(spec: SteeringSpec) -> torch.Tensor | None:
    """A clamp spec's encoder row as a flat tensor (None for the other ops); values checked."""
    return _optional_field(spec, spec.encoder, direction=False)


def _optional_field(spec: SteeringSpec, values: Any, *, direction: bool) -> torch.Tensor | None:
    # A list was checked when the spec was built; a tensor is read only now (see steering_vector).
    if values is None:
        return None
    if not isinstance(values, torch.Tensor):
        return torch.tensor(list(values), dtype=torch.float32)
    return _checked(spec, values, direction=direction)


def _checked(spec: SteeringSpec, values: torch.Tensor, *, direction: bool) -> torch.Tensor:
    """`values` (a spec's tensor field) if every element is finite and, for a `direction`, not
    all zero; else the SteeringSpecError `check_vector_values` raises for a list."""
    finite = torch.isfinite(values)
    if not bool(finite.all()):
        index = int((~finite).flatten().nonzero()[0, 0])
        raise non_finite_vector(spec.address, index, float(values.flatten()[index]))
    if direction and not bool(values.any()):
        raise zero_direction(spec.address, spec.op)
    return values


def _overflow(spec: SteeringSpec, dtype: torch.dtype, why: str, instead: str) -> SteeringSpecError:
    what = f"cannot steer at {spec.address} with {_strength(spec)} on a {_dtype_name(dtype)} model"
    error = SteeringSpecError.build(what, why, instead)
    assert isinstance(error, SteeringSpecError)
    return error


def _strength(spec: SteeringSpec) -> str:
    if spec.op == "projection_cap":
        return f"projection_cap min={spec.min}, max={spec.max}"
    return f"{spec.op} scale={spec.scale}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _largest(spec: SteeringSpec, vector: torch.Tensor | None) -> float:
    """max|v| in float64 (abs and max are exact in any float dtype, so no cast can overflow)."""
    if vector is None and isinstance(spec.vector, torch.Tensor):
        vector = spec.vector
    if vector is not None:
        return float(vector.detach().abs().max().to(torch.float64))
    return max(abs(x) for x in spec.values())


def check_steering_fits(
    spec: SteeringSpec, dtype: torch.dtype, vector: torch.Tensor | None = None
) -> None:
    """Refuse (SteeringSpecError), before any work, a spec whose result must overflow `dtype`.

    `dtype` is the dtype of the activations the spec writes (the model dtype); `vector` is the
    spec's vector as the backend will use it (`steering_vector(spec)`; read from the spec when
    omitted). Call it after the vector's values were checked (finite, a direction where needed).
    Every size is computed in float64 from the values as given, before any cast, against the
    largest finite value of `dtype` (`torch.finfo(dtype).max`) and of the arithmetic's
    `compute_dtype(dtype)`:

    - every op: max|v| must fit the compute dtype (the vector is cast to it first);
    - add: |scale|·max|v| must fit `dtype` (that delta is added as it is);
    - every op that uses the vector's direction (orthogonal, projection_cap, norm_add, ablate,
      swap and add with normalize; a swap's target too): ‖v‖, taken in the compute dtype
      exactly as the arithmetic takes it, must be finite and non-zero (else the direction is
      inf/NaN or silently zero);
    - add with normalize: |scale| must fit `dtype` (the unit vector's elements are at most 1);
    - orthogonal: |scale| must fit `dtype` (any activation with a component along v overflows);
    - projection_cap: min must not exceed, and max not fall below, ±`dtype` max (the capped
      component would be beyond the dtype), and both must fit the compute dtype.

    Overflow that depends on the activations (a huge activation times a large scale, norm_add's
    |c|·‖h‖) cannot be
    known up front; `check_steered_finite` catches it after the write. The message names the
    point, the scale (or bounds) and the dtype, and says how to fit.
    """
    limit = float(torch.finfo(dtype).max)
    compute = compute_dtype(dtype)
    compute_limit = float(torch.finfo(compute).max)
    largest = _largest(spec, vector)
    name = _dtype_name(dtype)
    if largest > compute_limit:
        raise _overflow(
            spec,
            dtype,
            f"the vector holds {largest:.6g}, beyond the largest finite "
            f"{_dtype_name(compute)} ({compute_limit:.6g}) the arithmetic casts it to",
            "rescale the vector (a unit vector times a scale), or load the model in float64",
        )
    if spec.op == "add" and abs(spec.scale) * (1.0 if spec.normalize else largest) > limit:
        raise _overflow(
            spec,
            dtype,
            f"|scale|·max|v| = {abs(spec.scale) * largest:.6g} exceeds the largest finite "
            f"{name} ({limit:.6g}), so every steered activation would be inf/NaN",
            f"keep |scale|·max|v| below {limit:.6g}",
        )
    if spec.op == "set" and largest > limit:
        raise _overflow(
            spec,
            dtype,
            f"the patch writes {largest:.6g}, beyond the largest finite {name} ({limit:.6g})",
            "patch values the model's dtype holds, or load the model in float64",
        )
    if spec.needs_direction:
        source = vector if vector is not None else steering_vector(spec)
        directions = [("vector", source)]
        if spec.op == "swap":
            directions.append(("target", steering_target(spec)))
        for which, each in directions:
            if each is None:
                continue
            norm = float(torch.linalg.vector_norm(each.detach().to(compute)))
            if not math.isfinite(norm) or norm == 0.0:
                raise _overflow(
                    spec,
                    dtype,
                    f"the {which}'s norm is {norm} in {_dtype_name(compute)} (its largest element "
                    f"is {float(each.detach().abs().max()):.6g}), so its direction would be "
                    f"inf/NaN or zero",
                    "pass the direction as a vector of ordinary size, e.g. a unit vector",
                )
    if spec.op == "orthogonal" and abs(spec.scale) > limit:
        raise _overflow(
            spec,
            dtype,
            f"|scale| exceeds the largest finite {name} ({limit:.6g}), so any activation with "
            f"a component along the vector would become inf/NaN",
            f"keep |scale| below {limit:.6g}",
        )
    if spec.op == "projection_cap":
        bounds = [b for b in (spec.min, spec.max) if b is not None]
        low_too_high = spec.min is not None and spec.min > limit
        high_too_low = spec.max is not None and spec.max < -limit
        if low_too_high or high_too_low or any(abs(b) > compute_limit for b in bounds):
            raise _overflow(
                spec,
                dtype,
                f"a bound lies beyond the largest finite {name} ({limit:.6g}), so the capped "
                f"component could not be represented",
                f"keep the bounds within ±{limit:.6g}, or leave that side open with None",
            )


def check_steered_finite(
    written: torch.Tensor, spec: SteeringSpec, before: torch.Tensor | None = None
) -> None:
    """Refuse (SteeringSpecError) when a write by `spec` left inf or NaN in `written`.

    `written` is the tensor the write produced (the steered rows, or the whole activation);
    `before` is the same tensor before the write, when at hand: a value that was already
    non-finite there is the model's own, not the write's, and is not blamed on it. Call it after
    each write, before the activation flows on, so a non-finite value never reaches a later
    layer, a KV cache or another request; it costs one `isfinite` over the tensor (two with
    `before`). The message names the point, the scale and the dtype of `written`.
    """
    broken = ~torch.isfinite(written)
    if before is not None:
        broken &= torch.isfinite(before)
    if not bool(broken.any()):
        return
    bad = int(broken.sum())
    raise _overflow(
        spec,
        written.dtype,
        f"the steered activations hold {bad} non-finite value(s) of {written.numel()}; the "
        f"result overflowed the largest finite {_dtype_name(written.dtype)} "
        f"({float(torch.finfo(written.dtype).max):.6g})",
        "lower the scale (or the vector's size), or load the model in a wider dtype",
    )


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
    encoder: torch.Tensor | None = None,
    bias: float = 0.0,
    threshold: float = 0.0,
    normalize: bool = False,
    max_fraction: float | None = None,
    target: torch.Tensor | None = None,
    channels: Sequence[int] | None = None,
) -> torch.Tensor:
    """What one operation adds to activations `h` `[..., width]`, in `compute_dtype(h.dtype)`.

    `vector` is `[width]` or broadcasts against `h` (one vector per row). `lower`/`upper` are the
    projection_cap bounds (a spec's `min`/`max`); `encoder`, `bias` and `threshold` read the
    feature a clamp sets (a spec's fields of the same names); `normalize` (add), `max_fraction`
    (norm_add) and `target` (swap) are the lens-space ops' fields. With `positions`, rows whose
    absolute position (`row_positions`, shaped `h.shape[:-1]`) is not listed get a zero delta.
    `h` is never modified, so a graph through it stays usable for gradients.
    """
    dtype = compute_dtype(h.dtype)
    h = h.to(dtype)
    v = vector.to(device=h.device, dtype=dtype)
    if op == "set":
        delta = _set_delta(h, v, channels)
    elif op in ("norm_add", "ablate", "swap") or (op == "add" and normalize):
        delta = _lens_delta(h, v, op, scale, max_fraction, target)
    elif op == "add":
        delta = (scale * v).expand_as(h)
    elif op == "clamp":
        if encoder is None:
            message = "steering_delta got op='clamp' without the feature's encoder row"
            raise ValueError(message)
        e = encoder.to(device=h.device, dtype=dtype)
        rectified = torch.relu((h * e).sum(dim=-1, keepdim=True) + bias)
        feature = torch.where(rectified > threshold, rectified, torch.zeros_like(rectified))
        delta = (scale - feature) * v
    elif op in OPS:
        unit = _unit(v)
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
        message = f"unknown steering op {op!r}; the ops are {', '.join(ALL_OPS)}"
        raise ValueError(message)
    if positions is None:
        return delta
    if row_positions is None:
        message = "steering_delta got positions but not row_positions (each row's position)"
        raise ValueError(message)
    mask = position_mask(row_positions, positions).to(device=delta.device, dtype=dtype)
    return delta * mask.unsqueeze(-1)


def _set_delta(h: torch.Tensor, v: torch.Tensor, channels: Sequence[int] | None) -> torch.Tensor:
    """`v − h` at `channels` (every channel when None), zero elsewhere; `h` is not modified."""
    if channels is None:
        return v.expand_as(h) - h
    index = torch.as_tensor(channels, device=h.device, dtype=torch.long)
    written = v.expand(*h.shape[:-1], index.numel()) - h.index_select(-1, index)
    return torch.zeros_like(h).index_copy(-1, index, written)


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)


def _lens_delta(
    h: torch.Tensor,
    v: torch.Tensor,
    op: str,
    scale: float,
    max_fraction: float | None,
    target: torch.Tensor | None,
) -> torch.Tensor:
    """The lens-space ops' deltas (`h`, `v` already in the compute dtype)."""
    unit = _unit(v)
    if op == "add":
        return (scale * unit).expand_as(h)
    if op == "norm_add":
        size = torch.linalg.vector_norm(h, dim=-1, keepdim=True)
        return (norm_add_coefficient(scale, max_fraction) * size) * unit
    projection = (h * unit).sum(dim=-1, keepdim=True)
    if op == "ablate":
        return (-1.0 * projection) * unit
    if target is None:
        message = "steering_delta got op='swap' without the target direction"
        raise ValueError(message)
    toward = _unit(target.to(device=h.device, dtype=h.dtype)) - unit
    return projection * toward


def check_scope_resolved(spec: SteeringSpec) -> None:
    """Refuse a spec whose scope the core's admission step has not turned into positions."""
    if spec.generated and not spec.skip_special:
        return
    error = SteeringSpecError.build(
        f"the steering at {spec.address} still carries its scope (generated=False or "
        f"skip_special=True)",
        "scopes are resolved into positions by interp_core.writes.admit_writes against the "
        "call; applied as they stand they would steer every position",
        "admit the writes through admit_writes with the call's reach and prompt",
    )
    raise error


def spec_delta(
    h: torch.Tensor,
    spec: SteeringSpec,
    vector: torch.Tensor,
    *,
    row_positions: torch.Tensor | None = None,
    positions: Sequence[int] | torch.Tensor | None = None,
    encoder: torch.Tensor | None = None,
    target: torch.Tensor | None = None,
    row_batch: torch.Tensor | None = None,
) -> torch.Tensor:
    """`steering_delta` of `spec` on `h`: every coefficient its op reads taken from the spec.

    `vector` is the spec's vector as the caller holds it (`steering_vector(spec)`, a rank's
    slice); `positions` and `encoder` default to the spec's own (pass tensors already on hand).
    The one place a backend turns a spec into arithmetic, so a new op's fields reach every
    torch backend through here. A scope the admission step left unresolved is refused.

    A spec limited to some rows of the batch (`batch_rows`, `interp_core.write_indices`) needs
    `row_batch` (each row's index in the call's batch, shaped `h.shape[:-1]`): the other rows
    get a zero delta. Without it the spec is refused, never applied to every row; a backend
    that runs each row as its own request hands it that row's writes with the field cleared.
    """
    check_scope_resolved(spec)
    delta = steering_delta(
        h,
        vector,
        spec.op,
        scale=spec.scale,
        lower=spec.min,
        upper=spec.max,
        row_positions=row_positions,
        positions=spec.positions if positions is None else positions,
        encoder=steering_encoder(spec) if encoder is None else encoder,
        bias=spec.bias,
        threshold=spec.threshold,
        normalize=spec.normalize,
        max_fraction=spec.max_fraction,
        target=steering_target(spec) if target is None else target,
        channels=spec.channels,
    )
    if spec.batch_rows is None:
        return delta
    if row_batch is None:
        error = SteeringSpecError.build(
            f"the {spec.op} at {spec.address} names batch rows {list(spec.batch_rows)[:5]}, "
            "but this backend's hook does not know which row each activation belongs to",
            "applied as it stands it would write every row of the batch",
            "give each row's request its own writes (interp_core.write_indices.writes_for_row)",
        )
        raise error
    wanted = torch.as_tensor(spec.batch_rows, device=row_batch.device, dtype=row_batch.dtype)
    mask = torch.isin(row_batch, wanted).to(device=delta.device, dtype=delta.dtype)
    return delta * mask.unsqueeze(-1)


def apply_steering(h: torch.Tensor, vector: torch.Tensor, op: str, **fields: Any) -> torch.Tensor:
    """`h` after one operation, in `h`'s dtype: `h + steering_delta(h, vector, op, **fields)`.

    `fields` are `steering_delta`'s keywords, forwarded whole: one signature to extend when an
    op gains a field (a copied list here once lacked `channels`).
    """
    return h + steering_delta(h, vector, op, **fields).to(h.dtype)
