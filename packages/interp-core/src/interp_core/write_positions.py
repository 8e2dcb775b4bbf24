"""Which token positions may a write list, and does the call it rides on reach them?

A write's `positions` are absolute token positions of the sequence the forward pass sees (prompt
first, then generated tokens). `check_positions` checks them when a spec is built (distinct ints
in [0, 2**63): backends index positions with int64 tensors); `check_positions_within` checks them
against a call when it is admitted (`interp_core.writes.admit_writes`): a position no forward
pass of the call runs would steer nothing, silently, so it is refused. Kept beside
`interp_core.steering`, which re-exports both.
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError
from interp_core.repeats import repeated

__all__ = ["POSITION_LIMIT", "check_positions", "check_positions_within", "deepest_cover"]

# Positions travel to the backends as int64 index tensors; anything at or past this is refused
# when a spec is built, before any backend sees it.
POSITION_LIMIT = 2**63

SteeringSpec = Any  # `interp_core.steering` builds on this module


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


def check_positions(positions: object) -> tuple[int, ...] | None:
    if positions is None:
        return None
    if isinstance(positions, str | bytes) or not isinstance(positions, Sequence):
        error = _fail(
            f"steering positions {positions!r} are not a sequence of ints",
            f"got a {type(positions).__name__}",
            "pass a list such as [0, 1, 2], or None to steer every position",
        )
        raise error
    if len(positions) == 0:
        error = _fail(
            "steering positions are empty",
            "an empty list would steer nothing, silently",
            "pass None to steer every position, or list the positions",
        )
        raise error
    checked: list[int] = []
    for position in positions:
        if isinstance(position, bool) or not isinstance(position, numbers.Integral):
            error = _fail(
                f"steering position {position!r} is not an int",
                f"got a {type(position).__name__}",
                "pass token positions as ints",
            )
            raise error
        if position < 0:
            error = _fail(
                f"steering position {position} is negative",
                "positions are absolute indices from the first token",
                "resolve negative indices against the sequence length yourself",
            )
            raise error
        if position >= POSITION_LIMIT:
            error = _fail(
                f"steering position {position} does not fit a 64-bit index",
                "backends index token positions with int64 tensors, and no sequence is that long",
                "pass positions inside the sequence the call runs",
            )
            raise error
        checked.append(int(position))
    doubled = repeated(checked)
    if doubled:
        error = _fail(
            f"steering positions repeat {doubled}",
            "a position is either steered or not; a repeat suggests a bug in the caller",
            "list each position once",
        )
        raise error
    return tuple(checked)


def check_positions_within(spec: SteeringSpec, length: int, call: str) -> None:
    """Refuse (SteeringSpecError) a spec listing a position no forward pass of the call sees.

    `length` is how many positions the call's forward passes run: a capture's (or the lens's)
    prompt length; a generation's prompt length plus `max_new_tokens - 1` (the last sampled
    token is never fed back, so nothing at its position can be steered). `call` names the call
    for the message (e.g. "this capture's 8-token prompt"). A position past them would steer
    nothing, silently, so it is refused exactly as an empty `positions` list is. A generation
    that stops early (an end-of-sequence token) leaves its later listed positions unsteered:
    that is known only once it runs.
    """
    if spec.positions is None:
        return
    beyond = sorted(p for p in spec.positions if p >= length)
    if beyond:
        shown = ", ".join(str(p) for p in beyond[:5]) + (", ..." if len(beyond) > 5 else "")
        error = _fail(
            f"steering positions [{shown}] at {spec.address} lie beyond {call}, whose forward "
            f"passes run positions 0..{length - 1}",
            "a position past the sequence would steer nothing, silently",
            f"list positions below {length}, or pass None to steer every position",
        )
        raise error


def deepest_cover(specs: Sequence[SteeringSpec]) -> int:
    """The most of `specs` that cover one position of one row: the depth a backend applying
    them level by level needs (vllm-static's write slots). A spec covers its `positions` (every
    position when None) in its `batch_rows` (every row when None), so writes at disjoint
    positions — a patch's, one spec per position — count once."""
    # Depth at (row r, position p) = everywhere + by_row[r] + by_position[p] + both[r, p].
    everywhere = 0
    by_row: Counter[int] = Counter()
    by_position: Counter[int] = Counter()
    both: Counter[tuple[int, int]] = Counter()
    for spec in specs:
        rows, positions = spec.batch_rows, spec.positions
        if rows is None and positions is None:
            everywhere += 1
        elif positions is None:
            by_row.update(rows)
        elif rows is None:
            by_position.update(positions)
        else:
            both.update((r, p) for r in rows for p in positions)
    # Off the pairs `both` lists, the best is the deepest row with the deepest position.
    best = max(by_row.values(), default=0) + max(by_position.values(), default=0)
    for (row, position), count in both.items():
        best = max(best, by_row[row] + by_position[position] + count)
    return everywhere + best
