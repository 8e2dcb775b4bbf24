"""Which rows of a call's batch does a write apply to?

A write (steering, a patch, an ablation) applies to every row of its call's batch, unless it
names `batch_rows`: then to those rows alone. So one batched forward can carry a different
patch in each row — different positions, values, heads or neurons — and each row equals that
row run alone with its own writes; a patching sweep uses it to run many patches as rows of one
forward (`interp_torch.patching.patch_sweep`).

Rows are the call's prompts in order (a `[batch, seq]` tensor's first axis). The field is
checked when a spec is built (`check_batch_rows`: distinct non-negative ints) and against the
call when it is admitted (`check_batch_rows_within`, from `interp_core.writes.admit_writes`):
a row the call does not have would be written nowhere, silently, so it is refused as a
position past the call is.

A backend that runs each row as its own request (vLLM) gives each request its row's writes
(`writes_for_row` / `wire_for_row`: the writes naming the row, or none, with the field
cleared), so its workers never see the field; one that runs the batch as one tensor (eager)
masks the write's delta by row (`interp_torch.steering.spec_delta`'s `row_batch`). Standard
library only; `interp_core.steering` builds on this module, so the spec is named `Any` here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError
from interp_core.index_lists import check_index_list, check_indices_below

__all__ = ["check_batch_rows", "check_batch_rows_within", "wire_for_row", "writes_for_row"]

SteeringSpec = Any


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


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
