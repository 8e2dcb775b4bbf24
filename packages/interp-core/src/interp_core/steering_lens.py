"""What do the lens-space steering ops and the steering scopes ask for, and are they sound?

The field checks and float64 arithmetic of the ops the lens works in (`norm_add`, `ablate`,
`swap`, and `add` with `normalize=True`), kept beside `interp_core.steering`, which calls them
from `SteeringSpec`. For an activation row `h`, the spec's vector `v` (`d̂ = v / ‖v‖`) and a
swap's `target` `t` (`t̂ = t / ‖t‖`, `ŝ = d̂`):

    add, normalize=True   delta = scale·d̂
    norm_add              delta = c·‖h‖·d̂,  c = clamp(scale, −max_fraction, max_fraction)
                          i.e. `scale·‖h‖·d̂` with its norm clamped to `max_fraction·‖h‖`
                          (no clamp when max_fraction is None); ‖delta‖ = |c|·‖h‖
    ablate                delta = −(h·d̂)·d̂
    swap                  delta = (h·ŝ)·(t̂ − ŝ)

The scopes (`generated=False`: prompt positions only; `skip_special=True`: not the prompt's
special tokens) are resolved into explicit `positions` by the core's admission step against the
call (`resolve_scope`, called from `interp_core.writes.admit_writes`), so every backend gets
them without a line of its own; a spec still carrying a scope is refused by the arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Sequence
from typing import Any, cast

from interp_core.errors import SteeringSpecError

# `interp_core.steering` builds on this module, so its SteeringSpec is named here, not imported.
SteeringSpec = Any

__all__ = [
    "check_lens_fields",
    "check_row_width",
    "check_target",
    "lens_delta_reference",
    "norm_add_coefficient",
    "resolve_scope",
    "special_token_ids",
    "uses_direction",
]

# The ops whose vector must not be all zeros: those that use only its direction, and clamp,
# whose decoder row a zero would make a no-op.
_DIRECTION_OPS = ("orthogonal", "projection_cap", "clamp", "norm_add", "ablate", "swap")


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


def uses_direction(op: str, normalize: bool = False) -> bool:
    """Whether `op` reads only its vector's direction (so a zero vector has nothing to give)."""
    return op in _DIRECTION_OPS or (op == "add" and normalize)


def norm_add_coefficient(scale: float, max_fraction: float | None) -> float:
    """`c` of norm_add: `scale` clamped into [−max_fraction, max_fraction] (as given when None)."""
    if max_fraction is None:
        return float(scale)
    return min(max(float(scale), -max_fraction), max_fraction)


def check_lens_fields(spec: SteeringSpec) -> tuple[bool, float | None, bool, bool]:
    """`normalize`, `max_fraction`, `generated`, `skip_special` of `spec`, checked.

    The target of a swap is checked with the vectors (`interp_core.steering`).
    """
    where = f"the {spec.op} at {spec.address}"
    for name in ("normalize", "generated", "skip_special"):
        if not isinstance(getattr(spec, name), bool):
            error = _fail(
                f"{where} has {name}={getattr(spec, name)!r}",
                f"{name} is a switch",
                "pass True or False",
            )
            raise error
    if spec.normalize and spec.op != "add":
        error = _fail(
            f"op={spec.op!r} was given normalize=True",
            "only add takes its vector as given; the other ops already use its direction",
            "drop normalize, or use op='add'",
        )
        raise error
    fraction = spec.max_fraction
    if fraction is not None and spec.op != "norm_add":
        error = _fail(
            f"op={spec.op!r} was given max_fraction={fraction!r}",
            "only norm_add scales by the activation's norm; here it would be ignored",
            "drop max_fraction, or use op='norm_add'",
        )
        raise error
    if fraction is not None:
        real = isinstance(fraction, numbers.Real) and not isinstance(fraction, bool)
        if not real or not math.isfinite(float(fraction)) or float(fraction) <= 0:
            error = _fail(
                f"{where} has max_fraction={fraction!r}",
                "it bounds the added vector's norm by max_fraction·‖h‖, a finite fraction > 0",
                "pass a positive float such as 1.0, or None for no bound",
            )
            raise error
        fraction = float(fraction)
    return spec.normalize, fraction, spec.generated, spec.skip_special


def check_target(spec: SteeringSpec, check_vector: Callable[..., Any]) -> Any:
    """A swap's target direction, checked as the spec's vectors are (`check_vector`, the core's
    own check, passed in); the other ops must leave it unset."""
    if spec.op != "swap":
        if spec.target is not None:
            error = _fail(
                f"op={spec.op!r} was given a target",
                "only swap moves a component onto a second direction; here it would be ignored",
                "drop target, or use op='swap'",
            )
            raise error
        return None
    if spec.target is None:
        error = _fail(
            f"the swap at {spec.address} has no target",
            "swap moves the component along the vector onto the target direction",
            "pass target= (a vector as wide as the point)",
        )
        raise error
    target = check_vector(spec.target, "swap", spec.address, True, "swap's target")
    check_row_width(
        spec,
        target,
        "a target",
        "a vector",
        "both are directions in the same activation row",
        f"pass a target of length {spec.width}",
    )
    return target


def check_row_width(
    spec: SteeringSpec, row: Any, row_is: str, vector_is: str, why: str, instead: str
) -> None:
    """Refuse a second row the op reads beside the spec's vector (a swap's target, a clamp's
    encoder), already checked as a vector, unless it is as wide as the vector."""
    width = len(row) if isinstance(row, tuple) else int(next(iter(row.shape)))
    if width != spec.width:
        error = _fail(
            f"the {spec.op} at {spec.address} has {row_is} of {width} values and {vector_is} of "
            f"{spec.width}",
            why,
            instead,
        )
        raise error


def lens_delta_reference(
    spec: SteeringSpec, h: Sequence[float], v: Sequence[float]
) -> list[float] | None:
    """The float64 delta of a lens-space op (None for the ops `interp_core.steering` computes)."""
    if not (spec.op in ("norm_add", "ablate", "swap") or (spec.op == "add" and spec.normalize)):
        return None
    unit = _unit(v)
    if spec.op == "add":
        return [spec.scale * u for u in unit]
    if spec.op == "norm_add":
        size = math.sqrt(math.fsum(x * x for x in h))
        coefficient = norm_add_coefficient(spec.scale, spec.max_fraction)
        return [coefficient * size * u for u in unit]
    projection = math.fsum(a * b for a, b in zip(h, unit, strict=True))
    if spec.op == "ablate":
        return [-projection * u for u in unit]
    target = _unit(spec.target_values())
    return [projection * (t - s) for t, s in zip(target, unit, strict=True)]


def _unit(v: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in v))
    return [x / norm for x in v]


def resolve_scope(
    spec: SteeringSpec,
    length: int,
    call: str,
    prompts: Sequence[Sequence[int]] | None,
    special: Collection[int],
) -> SteeringSpec:
    """`spec` with its scope turned into explicit positions for this call (as given if none).

    `length` is how many positions the call's forward passes run (`check_positions_within`);
    `prompts` the call's prompt rows (token ids in position order) and `special` the model's
    special token ids. `generated=False` keeps the positions below the prompt's length;
    `skip_special=True` drops the prompt positions holding a special token (generated tokens
    are not known when the call is admitted and stay steered unless `generated=False`). Every
    row of a batch must resolve alike, since one spec holds one positions list.
    """
    if spec.generated and not spec.skip_special:
        return spec
    if prompts is None or not prompts:
        error = _fail(
            f"the steering at {spec.address} has a scope (generated=False or skip_special) "
            f"that {call} cannot resolve",
            "scopes are resolved against the call's prompt, which this call did not pass on",
            "list the positions explicitly",
        )
        raise error
    resolved = [_row_positions(spec, length, row, special) for row in prompts]
    first = resolved[0]
    if any(other != first for other in resolved[1:]):
        error = _fail(
            f"the steering scope at {spec.address} picks different positions in different rows "
            f"of {call}",
            "one spec holds one positions list for the whole batch",
            "steer each row in a call of its own, or list the positions explicitly",
        )
        raise error
    if not first:
        error = _fail(
            f"the steering scope at {spec.address} leaves no position of {call} to steer",
            "an empty scope would steer nothing, silently",
            "widen the scope (generated=True, skip_special=False) or drop the spec",
        )
        raise error
    return _with_scope_resolved(spec, first)


def _row_positions(
    spec: SteeringSpec, length: int, prompt: Sequence[int], special: Collection[int]
) -> tuple[int, ...]:
    stop = min(len(prompt), length) if not spec.generated else length
    wanted = range(stop) if spec.positions is None else [p for p in spec.positions if p < stop]
    if not spec.skip_special:
        return tuple(wanted)
    marked = {i for i, token in enumerate(prompt) if int(token) in special}
    return tuple(p for p in wanted if p not in marked)


def _with_scope_resolved(spec: SteeringSpec, positions: tuple[int, ...]) -> SteeringSpec:
    import dataclasses

    changed: dict[str, Any] = {"positions": positions, "generated": True, "skip_special": False}
    return dataclasses.replace(spec, **changed)


def special_token_ids(tokenizer: Any) -> frozenset[int]:
    """The ids `skip_special=True` leaves alone: a HF-style tokenizer's special tokens (BOS,
    EOS, padding, ...) and its added tokens marked special (chat markers such as
    `<|im_start|>`). Duck-typed; a tokenizer without them has none."""
    if tokenizer is None:
        return frozenset()
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", None) or ()}
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i, token in added.items() if getattr(token, "special", False))
    return frozenset(ids)
