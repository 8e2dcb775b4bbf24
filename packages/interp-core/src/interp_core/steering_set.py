"""What does the `set` op (a patch) ask for, and is it sound?

A patch is a write like every other: a `SteeringSpec` with `op="set"`, admitted by
`interp_core.writes.admit_writes` and carried by every wire as `spec_to_wire` writes it. For an
activation row `h`, the spec's vector `v` and its `channels` `c` (None: every channel):

    set                   delta[c] = v − h[c],  delta elsewhere = 0
                          so the row's channels `c` become exactly `v`

With `channels`, the vector holds one value per listed channel (a head slice, some neurons), so
its width is `len(channels)` and the point's width bounds the channels instead. Unlike the
direction ops, an all-zero vector is meaningful (zero ablation). Kept beside
`interp_core.steering`, which calls it from `SteeringSpec`; the torch arithmetic is in
`interp_torch.steering.steering_delta`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError
from interp_core.index_lists import check_index_list, check_indices_below

# `interp_core.steering` builds on this module, so its SteeringSpec is named here, not imported.
SteeringSpec = Any

__all__ = ["check_channels", "check_set_width", "set_delta_reference"]


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


def check_channels(spec: SteeringSpec, width: int) -> tuple[int, ...] | None:
    """The spec's `channels`, checked against its op and its vector's `width`."""
    channels = spec.channels
    if channels is None:
        return None
    where = f"the {spec.op} at {spec.address}"
    if spec.op != "set":
        error = _fail(
            f"{where} was given channels=",
            "only set (a patch) writes some channels of a row; here they would be ignored",
            "drop channels, or build the write with Patch(..., heads=/neurons=)",
        )
        raise error
    checked = check_index_list(
        channels,
        (
            f"{where} has channels={channels!r}",
            "channels list the row's channels the vector's values go to",
            "pass a non-empty list of ints, or None for the whole row",
        ),
        (
            f"{where} has channel",
            "a channel is a non-negative index into the point's row",
            "pass ints from 0",
        ),
        (
            f"{where} lists a channel twice",
            "two values for one channel contradict each other",
            "list each channel once",
        ),
        one_int=False,
    )
    if len(checked) != width:
        error = _fail(
            f"{where} has {width} values for {len(checked)} channels",
            "each listed channel takes one value",
            "pass one value per channel",
        )
        raise error
    return checked


def check_set_width(spec: SteeringSpec, width: int, model: str) -> bool:
    """Refuse a set whose channels reach past the point's `width`; True when it was checked.

    False for a spec without channels, whose vector the caller checks against `width` as usual.
    """
    if spec.channels is None:
        return False
    check_indices_below(
        spec.channels,
        width,
        f"the patch at {spec.address} writes channels",
        f"{spec.address.name} on this {model} is {width} wide",
        f"pass channels below {width} (heads and neurons are checked by Patch)",
    )
    return True


def set_delta_reference(spec: SteeringSpec, h: Sequence[float], v: Sequence[float]) -> list[float]:
    """What a set adds to one row `h` (pure Python, float64)."""
    channels = range(len(h)) if spec.channels is None else spec.channels
    if spec.channels is None and len(v) != len(h):
        error = _fail(
            f"cannot patch the row at {spec.address}: it has {len(h)} values, the patch {len(v)}",
            None,
            "pass a row of the point's width",
        )
        raise error
    delta = [0.0] * len(h)
    for channel, value in zip(channels, v, strict=True):
        delta[channel] = value - h[channel]
    return delta
