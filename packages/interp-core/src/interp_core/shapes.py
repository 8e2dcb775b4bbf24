"""What shape does a point have on a given model, for a given batch and sequence length?

Shapes follow from the registry's width rules and the model's facts, so the sizer can price
capture buffers and a backend can check what it returns without running anything. A point the
model lacks at that layer has no shape: asking refuses with the registry's reason.

Layouts: token-indexed points are [batch, seq, ...]; attention matrices are
[batch, heads, query, key]. Per-head tensors are flattened over heads (there is no head axis).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from interp_core.errors import AddressError, PointUnsupported
from interp_core.points import PointSpec, Width, get_point, require_point

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = ["AddressLike", "point_shape", "point_width"]


class AddressLike(Protocol):
    """Anything with a point name and a layer (an `interp_core.address.Address`, for one).

    Duck-typed on purpose: shapes must not depend on the address module's import.
    """

    name: str
    layer: int | None


def _resolve(
    target: str | AddressLike, layer: int | None
) -> tuple[PointSpec, int | None, int | None]:
    if isinstance(target, str):
        name, stream = target, None
    elif hasattr(target, "name") and hasattr(target, "layer"):
        name = target.name
        stream = getattr(target, "stream", None)
        own_layer = target.layer
        if layer is not None and own_layer is not None and layer != own_layer:
            message = (
                f"layer given twice and differently: the address says {own_layer}, layer= says "
                f"{layer}; pass one"
            )
            raise AddressError(message)
        layer = own_layer if own_layer is not None else layer
    else:
        message = f"expected a point name or an address, got {type(target).__name__}"
        raise AddressError(message)
    if isinstance(name, str) and name.startswith("path."):
        message = f"{name} has no registry shape"
        raise PointUnsupported.build(
            message,
            "a module-path address returns whatever that module outputs",
            "Use a standardized point to get a shape ahead of time",
        )
    return get_point(name), layer, stream


def _check_sizes(batch: int, seq: int) -> None:
    for label, value in (("batch", batch), ("seq", seq)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            message = f"{label} must be a positive int, got {value!r}"
            raise ValueError(message)


def point_shape(
    name_or_address: str | AddressLike,
    facts: ModelFacts,
    batch: int,
    seq: int,
    layer: int | None = None,
) -> tuple[int, ...]:
    """The shape of the point on this model.

    Vector points are [batch, seq, width]; attention matrices [batch, n_heads, seq, seq]; the
    stream stack [batch, seq, n_streams, d_model]; stream mixes [batch, seq, n_streams,
    n_streams]; a resid point with a stream coordinate is one stream, [batch, seq, d_model].
    With layer=None a layer point is sized as if at a layer that has it, which needs widths that
    do not vary by layer (Gemma-4's do: pass the layer); a point absent everywhere refuses with
    PointUnsupported.
    """
    _check_sizes(batch, seq)
    spec, layer, stream = _resolve(name_or_address, layer)
    # A bare resid point on a multi-stream trunk is refused here too: no silent pick of a stream.
    require_point(spec.name, facts, layer, stream)
    return (batch, *spec.width.dims(facts, seq, layer))


def point_width(
    name_or_address: str | AddressLike,
    facts: ModelFacts,
    layer: int | None = None,
    *,
    seq: int | None = None,
) -> int:
    """Elements per (batch row, query token): the product of the dims after [batch, seq].

    For attention matrices that is n_heads * key length, so `seq` is required there.
    """
    spec, layer, stream = _resolve(name_or_address, layer)
    require_point(spec.name, facts, layer, stream)
    if spec.width is Width.SCORES and seq is not None:
        _check_sizes(1, seq)
    return math.prod(spec.width.per_token_dims(facts, seq, layer))
