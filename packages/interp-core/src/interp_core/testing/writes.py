"""One example write of every op, built from the op definitions, for tests of every path.

The ops are enumerated from `interp_core.steering.OP_FIELDS`, so a test that loops over
`example_specs` covers an op the day it is defined. Each field an op reads gets the value below
(chosen so every term of every op is non-trivial on a typical activation row: a clamp's
threshold leaves some rows' feature at zero, a cap's bounds bite); an op that reads a field
with no example here fails loudly, naming the field to add.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from interp_core.steering import OP_FIELDS, SteeringSpec

__all__ = ["example_spec", "example_specs", "example_vector"]


def example_vector(width: int, seed: int = 0) -> list[float]:
    """A deterministic, non-zero, non-constant vector of `width` floats."""
    return [math.sin(0.7 * i + seed) / 2 for i in range(width)]


# Each optional field's example, from the vector's width.
_EXAMPLES: dict[str, Callable[[int], Any]] = {
    "scale": lambda width: 2.5,
    "min": lambda width: -0.25,
    "max": lambda width: 0.25,
    "encoder": lambda width: example_vector(width, 3),
    "bias": lambda width: 0.05,
    "threshold": lambda width: 0.1,
    "normalize": lambda width: True,
    # Below norm_add's example scale, so the bound on the added norm bites.
    "max_fraction": lambda width: 0.5,
    "target": lambda width: example_vector(width, 5),
    # A patch naming every channel: the set's channel scatter runs, the whole row is written.
    "channels": lambda width: tuple(range(width)),
}


def example_spec(
    op: str, address: str, width: int, positions: tuple[int, ...] | None = None
) -> SteeringSpec:
    """A spec of `op` at `address` with every field the op reads set to its example."""
    missing = [name for name in OP_FIELDS[op] if name not in _EXAMPLES]
    if missing:
        message = (
            f"op {op!r} reads {missing}, which interp_core.testing.writes has no example of; "
            f"add one to _EXAMPLES"
        )
        raise KeyError(message)
    fields = {name: _EXAMPLES[name](width) for name in OP_FIELDS[op]}
    return SteeringSpec(address, example_vector(width), op, positions=positions, **fields)


def example_specs(address: str, width: int) -> list[SteeringSpec]:
    """One example of every op at `address`, in the order the ops are defined."""
    return [example_spec(op, address, width, positions=(1, 2)) for op in OP_FIELDS]
