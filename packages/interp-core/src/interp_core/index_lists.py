"""Is a write's list of indices (batch rows, channels, heads, neurons) well formed?

Each such list is a non-empty sequence of distinct non-negative ints; the checks differ only in
how they word a refusal, so every caller passes its own messages to `check_index_list`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import cast

from interp_core.errors import SteeringSpecError

__all__ = ["Refusal", "check_index_list", "check_indices_below"]

# What, why, instead: the three parts of a `SteeringSpecError`.
Refusal = tuple[str, str | None, str | None]


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


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
