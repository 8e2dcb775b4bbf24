"""How does a write get from a call to the model: checked once, and carried in one form?

Every backend admits its writes with `admit_writes`: the active `steer()` specs, then the call's
own, each checked against the model (`SteeringSpec.validate_for`) and its positions against the
call (`check_positions_within`), then offered to the backend's one per-point verdict, read from
its support table. So a check cannot exist on one backend and not another, and a refusal reads
the same everywhere (`PointNotWritable` for a point the backend cannot write).

Every wire that carries a write (vLLM's client to its workers, serve's JSON both ways) carries
it as `spec_to_wire` writes it and reads it back with `spec_from_wire`: every field of the spec,
under its own name, so a new field or op travels without touching any wire.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from interp_core.errors import SteeringSpecError
from interp_core.steering import (
    SteeringSpec,
    active_steering,
    as_specs,
    check_positions_within,
    check_vector_values,
    non_finite_vector,
)
from interp_core.steering_lens import resolve_scope
from interp_core.write_indices import check_batch_rows_within

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = ["Refusal", "admit_writes", "spec_from_wire", "spec_to_wire"]

# A backend's per-point verdict on one write among the call's: the error to raise, or None.
Refusal = Callable[[SteeringSpec, tuple[SteeringSpec, ...]], Exception | None]


def admit_writes(
    model: object,
    steering: SteeringSpec | Sequence[SteeringSpec] | None,
    facts: ModelFacts | None,
    reach: tuple[int, str] | None = None,
    refuse: Refusal | None = None,
    prompts: Sequence[Sequence[int]] | None = None,
    special: Collection[int] | Callable[[], Collection[int]] = (),
    scope: tuple[int, str] | None = None,
) -> tuple[SteeringSpec, ...]:
    """The writes a call on `model` makes: the active `steer()` specs, then `steering`, checked.

    Each spec's positions are checked against the call, with `reach` = (how many positions the
    call's forward passes run, the call in words; `check_positions_within`), and the spec
    against the model (`validate_for`, when `facts` are known). `refuse(spec, specs)` is the
    backend's own per-point verdict, read from its support table: the error to raise for a
    write it cannot serve (`PointNotWritable` for a point it cannot write), or None. The
    fields were checked when each spec was built; a tensor vector's values are checked where
    they are read (`spec_to_wire`, `interp_torch.steering_vector`).

    A spec's scope (`generated=False`, `skip_special=True`) is resolved here into explicit
    positions against the call (`interp_core.steering_lens.resolve_scope`): `prompts` are the
    call's prompt rows (token ids in position order) and `special` the model's special token
    ids, or a function giving them (read only when a spec has `skip_special=True`: a model
    folder without a tokenizer captures and steers without one); `scope` is the (length, call)
    they are resolved against, `reach` when None (a call that checks no positions still
    resolves scopes). Without either (a client that forwards the
    call, as `remote` does) scopes travel as given, for the serving backend to resolve.
    With `prompts`, a spec's `batch_rows` are checked against their number (a row the call
    does not have is refused); without, they travel as given too.
    """
    specs = as_specs(steering, facts)
    specs = active_steering(model) + specs  # the enclosing steer() blocks' first
    against = scope if scope is not None else reach
    if against is not None:
        if callable(special):
            special = special() if any(s.skip_special for s in specs) else ()
        specs = tuple(resolve_scope(s, *against, prompts, special) for s in specs)
    for spec in specs:
        if reach is not None:
            check_positions_within(spec, *reach)
        if prompts is not None:
            check_batch_rows_within(
                spec, len(prompts), "this call" if against is None else against[1]
            )
        if facts is not None:
            spec.validate_for(facts)
        refused = None if refuse is None else refuse(spec, specs)
        if refused is not None:
            raise refused
    return specs


_FIELDS = tuple(f.name for f in fields(SteeringSpec))


def spec_to_wire(spec: SteeringSpec) -> dict[str, Any]:
    """One write as plain JSON values: every field of the spec, under the field's own name.

    The vectors travel as lists of floats, their values checked here with the core's own words
    (no NaN travels); `spec_from_wire` reads it back into an equal spec.
    """
    wire: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(spec, name)
        if name == "address":
            value = str(value)
        elif name == "vector":
            value = check_vector_values(spec)
        elif hasattr(value, "tolist"):
            # A tensor vector field (clamp's encoder, swap's target, any to come): its values,
            # read now and checked (a list's were checked when the spec was built).
            value = [float(x) for x in value.tolist()]
            for index, each in enumerate(value):
                if not math.isfinite(each):
                    raise non_finite_vector(spec.address, index, each)
        elif isinstance(value, tuple):
            value = list(value)
        wire[name] = value
    return wire


def spec_from_wire(data: object) -> SteeringSpec:
    """A spec from its wire form; unknown fields and SteeringSpec's own checks refuse the rest."""
    if not isinstance(data, Mapping):
        error = SteeringSpecError.build(
            f"a steering spec must be a JSON object, got {type(data).__name__}",
            None,
            f"send an object with the fields {', '.join(_FIELDS)}",
        )
        raise error
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        error = SteeringSpecError.build(
            f"a steering spec has unknown fields {unknown}",
            f"it takes {', '.join(_FIELDS)}",
            "drop the others",
        )
        raise error
    if "address" not in data or "vector" not in data:
        error = SteeringSpecError.build(
            "a steering spec needs an address and a vector (a list of numbers)",
            None,
            "send both",
        )
        raise error
    return SteeringSpec(**data)
