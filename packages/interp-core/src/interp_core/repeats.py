"""Which entries of a list of indices appear more than once.

Layers for the lens and positions for steering are both refused when one repeats; both ask
this one function so the check stays O(n) on a long list (sets, not `list.count`).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["repeated"]


def repeated(values: Iterable[int]) -> list[int]:
    """The values that occur more than once, each once, in ascending order."""
    seen: set[int] = set()
    doubled: set[int] = set()
    for value in values:
        (doubled if value in seen else seen).add(value)
    return sorted(doubled)
