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

import numbers
from collections.abc import Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError

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
    if isinstance(channels, str | bytes) or not isinstance(channels, Sequence) or not channels:
        error = _fail(
            f"{where} has channels={channels!r}",
            "channels list the row's channels the vector's values go to",
            "pass a non-empty list of ints, or None for the whole row",
        )
        raise error
    checked: list[int] = []
    for channel in channels:
        if isinstance(channel, bool) or not isinstance(channel, numbers.Integral) or channel < 0:
            error = _fail(
                f"{where} has channel {channel!r}",
                "a channel is a non-negative index into the point's row",
                "pass ints from 0",
            )
            raise error
        checked.append(int(channel))
    if len(set(checked)) != len(checked):
        error = _fail(
            f"{where} lists a channel twice",
            "two values for one channel contradict each other",
            "list each channel once",
        )
        raise error
    if len(checked) != width:
        error = _fail(
            f"{where} has {width} values for {len(checked)} channels",
            "each listed channel takes one value",
            "pass one value per channel",
        )
        raise error
    return tuple(checked)


def check_set_width(spec: SteeringSpec, width: int, model: str) -> bool:
    """Refuse a set whose channels reach past the point's `width`; True when it was checked.

    False for a spec without channels, whose vector the caller checks against `width` as usual.
    """
    if spec.channels is None:
        return False
    beyond = [c for c in spec.channels if c >= width]
    if beyond:
        error = _fail(
            f"the patch at {spec.address} writes channels {beyond[:5]}",
            f"{spec.address.name} on this {model} is {width} wide",
            f"pass channels below {width} (heads and neurons are checked by Patch)",
        )
        raise error
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
