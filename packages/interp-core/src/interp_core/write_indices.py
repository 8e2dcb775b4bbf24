"""Which rows and channels does a write touch, and are the indices it names sound?

A write names indices in two places, checked the same way (a non-empty list of distinct
non-negative ints, `check_index_list`, then against a count known only later,
`check_indices_below`), each with its own words:

**Batch rows.** A write (steering, a patch, an ablation) applies to every row of its call's
batch, unless it names `batch_rows`: then to those rows alone. So one batched forward can carry a
different patch in each row — different positions, values, heads or neurons — and each row
equals that row run alone with its own writes; a patching sweep uses it to run many patches as
rows of one forward (`interp_torch.patching.patch_sweep`). Rows are the call's prompts in order
(a `[batch, seq]` tensor's first axis). The field is checked when a spec is built
(`check_batch_rows`) and against the call when it is admitted (`check_batch_rows_within`, from
`interp_core.writes.admit_writes`): a row the call does not have would be written nowhere,
silently, so it is refused as a position past the call is. A backend that runs each row as its
own request (vLLM) gives each request its row's writes (`writes_for_row` / `wire_for_row`: the
writes naming the row, or none, with the field cleared), so its workers never see the field;
one that runs the batch as one tensor (eager) masks the write's delta by row
(`interp_torch.steering.spec_delta`'s `row_batch`).

**The channels of a patch.** A patch is a `SteeringSpec` with `op="set"`, admitted like every
other write. For an activation row `h`, the spec's vector `v` and its `channels` `c` (None: every
channel):

    set                   delta[c] = v − h[c],  delta elsewhere = 0
                          so the row's channels `c` become exactly `v`

With `channels`, the vector holds one value per listed channel (a head slice, some neurons), so
its width is `len(channels)` and the point's width bounds the channels instead
(`check_channels`, `check_set_width`). Unlike the direction ops, an all-zero vector is meaningful
(zero ablation). The torch arithmetic is in `interp_torch.steering.steering_delta`.

Standard library only; `interp_core.steering` builds on this module and calls it from
`SteeringSpec`, so the spec is named `Any` here.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError

__all__ = [
    "Refusal",
    "check_batch_rows",
    "check_batch_rows_within",
    "check_channels",
    "check_index_list",
    "check_indices_below",
    "check_set_width",
    "set_delta_reference",
    "wire_for_row",
    "writes_for_row",
]

SteeringSpec = Any
# What, why, instead: the three parts of a `SteeringSpecError`.
Refusal = tuple[str, str | None, str | None]


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


# --- the index lists every check shares -------------------------------------------------------
def check_index_list(
    given: object, not_a_list: Refusal, not_an_index: Refusal, twice: Refusal, *, one_int: bool
) -> tuple[int, ...]:
    """`given` as a tuple of distinct non-negative ints (a bare int is a list of one when
    `one_int`), or the SteeringSpecError the caller words: `not_a_list` for anything but a
    non-empty sequence, `not_an_index` (its first part followed by the element's repr) for an
    element that is no non-negative int, `twice` for an index listed twice."""
    items = [given] if one_int and isinstance(given, numbers.Integral) else given
    if isinstance(items, str | bytes) or not isinstance(items, Sequence) or not items:
        error = _fail(*not_a_list)
        raise error
    checked: list[int] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral) or item < 0:
            what, why, instead = not_an_index
            error = _fail(f"{what} {item!r}", why, instead)
            raise error
        checked.append(int(item))
    if len(set(checked)) != len(checked):
        error = _fail(*twice)
        raise error
    return tuple(checked)


def check_indices_below(
    indices: Sequence[int], bound: int, what: str, why: str, instead: str
) -> None:
    """Refuse checked indices at or past `bound`, a count known only against a model or a call:
    the message is `what` followed by the first five that reach it."""
    beyond = [index for index in indices if index >= bound]
    if beyond:
        error = _fail(f"{what} {beyond[:5]}", why, instead)
        raise error


# --- batch rows ------------------------------------------------------------------------------
def check_batch_rows(given: object, where: str) -> tuple[int, ...] | None:
    """`batch_rows` as a tuple of distinct non-negative ints (an int is one row; None: all)."""
    if given is None:
        return None
    return check_index_list(
        given,
        (
            f"{where} has batch_rows={given!r}",
            "batch_rows lists the rows of the call's batch the write applies to",
            "pass an int or a non-empty list of ints, or None for every row",
        ),
        (
            f"{where} has batch row",
            "a batch row is a non-negative index into the call's prompts",
            "pass ints from 0",
        ),
        (
            f"{where} lists a batch row twice",
            "the write would apply twice to one row",
            "list each row once",
        ),
        one_int=True,
    )


def check_batch_rows_within(spec: SteeringSpec, batch: int, call: str) -> None:
    """Refuse a spec naming a row past the call's `batch` rows (it would write nowhere)."""
    rows = spec.batch_rows
    if rows is None:
        return
    check_indices_below(
        rows,
        batch,
        f"the write at {spec.address} names batch rows",
        f"the call runs {batch} row(s) ({call}), so it would apply to none of them",
        f"pass batch_rows below {batch}",
    )


def writes_for_row(specs: Sequence[SteeringSpec], row: int) -> tuple[SteeringSpec, ...]:
    """The writes that apply to batch row `row`, as that row's own request carries them."""
    return tuple(
        s if s.batch_rows is None else dataclasses.replace(s, batch_rows=None)
        for s in specs
        if s.batch_rows is None or row in s.batch_rows
    )


def wire_for_row(wire: Sequence[Mapping[str, Any]], row: int) -> list[dict[str, Any]]:
    """`writes_for_row` on writes in their wire form (`interp_core.writes.spec_to_wire`)."""
    out = []
    for item in wire:
        rows = item.get("batch_rows")
        if rows is None or row in rows:
            out.append({**item, "batch_rows": None})
    return out


# --- the channels of a patch -------------------------------------------------------------------
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
