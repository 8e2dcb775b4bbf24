"""Are the sampling arguments of a generation sound, whichever backend runs it?

Every backend checks `generate`'s arguments here before any work, so the same bad value gets the
same error (`InvalidArgument`: it is malformed whatever the backend) with the same message on the
eager backend, on vLLM and on any third-party backend. One sentence per argument: it names the
value given and the values accepted.

    max_new_tokens  a positive int
    temperature     a finite number >= 0; 0 is greedy
    top_k           a positive int, or None to keep every token
    top_p           a number in (0, 1], or None to keep every token
    seed            an int in [0, 2**63), or None for fresh randomness
    min_p           a number in [0, 1], or None (0) to keep every token
    presence_penalty, frequency_penalty   finite numbers in [-2, 2]; 0 is none
    repetition_penalty                    a finite number > 0; 1 is none
    n_logprobs      an int in [0, 20]: alternatives reported per generated token
    prompt_logprobs an int in [0, 20], or None: alternatives per prompt token (None: none)

`resolve_sampling` decides every knob before the check: the caller's value, else the checkpoint's
recommendation (`interp_core.generation_config`), else the library default, and records where
each came from in `Sampling.sources`.

`check_lens_top_k`, `check_lens_layers` and `check_lens_point` do the same for the logit lens's
`top_k`, `layers` (None for all, else a non-empty list of distinct layer ints; whether each layer
exists on the model is the backend's refusal) and `point` (one of the residual-stream points,
`LENS_POINTS`: the lens decodes the residual stream, and anything else is not in its basis).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from interp_core.errors import InvalidArgument
from interp_core.repeats import repeated

__all__ = [
    "LENS_POINTS",
    "LIBRARY_DEFAULTS",
    "MAX_LOGPROBS",
    "Sampling",
    "check_lens_layers",
    "check_lens_point",
    "check_lens_top_k",
    "check_sampling",
    "resolve_sampling",
]

# The points the logit lens decodes: the residual stream (resid_streams is the whole stack of a
# multi-stream trunk, which a backend collapses with the model's own head).
LENS_POINTS = ("resid_pre", "resid_mid", "resid_post", "resid_streams")

# torch's generators take 64-bit seeds and vLLM's take any int; every backend takes this range.
SEED_LIMIT = 2**63


@dataclass(frozen=True)
class Sampling:
    """Checked sampling arguments, normalised to plain ints and floats."""

    max_new_tokens: int
    temperature: float
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    min_p: float | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    n_logprobs: int = 0
    prompt_logprobs: int | None = None
    # knob -> "caller" | "generation_config" | "default": who decided it (resolve_sampling).
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The knobs a generation ran with, and where each came from, as plain JSON data."""
        knobs = {knob: getattr(self, knob) for knob in LIBRARY_DEFAULTS}
        return {**knobs, "seed": self.seed, "sources": dict(self.sources)}


# What a knob is when neither the caller nor the checkpoint states it: no filtering, no
# penalty, temperature 1 (the model's own distribution), as transformers and vLLM have it.
LIBRARY_DEFAULTS: dict[str, Any] = {
    "temperature": 1.0,
    "top_k": None,
    "top_p": None,
    "min_p": None,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
}

# vLLM's engine reports at most 20 alternatives per token unless started otherwise; every
# backend takes the same bound so a request means the same everywhere.
MAX_LOGPROBS = 20


def _is_int(value: object) -> TypeGuard[numbers.Integral]:
    # True is an int to Python, but max_new_tokens=True is a caller's bug, not 1.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> TypeGuard[numbers.Real]:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_sampling(
    *,
    max_new_tokens: object,
    temperature: object,
    top_k: object = None,
    top_p: object = None,
    seed: object = None,
    min_p: object = None,
    presence_penalty: object = 0.0,
    frequency_penalty: object = 0.0,
    repetition_penalty: object = 1.0,
    n_logprobs: object = 0,
    prompt_logprobs: object = None,
) -> Sampling:
    """Refuse (InvalidArgument) the first unsound argument; return them all normalised."""
    if not _is_int(max_new_tokens) or int(max_new_tokens) < 1:
        message = f"max_new_tokens={max_new_tokens!r} must be a positive int"
        raise InvalidArgument(message)
    if not _is_real(temperature) or not 0.0 <= float(temperature) < math.inf:
        # NaN fails every comparison, so the chained one refuses it too.
        message = f"temperature={temperature!r} must be a finite number >= 0 (0 is greedy)"
        raise InvalidArgument(message)
    if top_k is not None and (not _is_int(top_k) or int(top_k) < 1):
        message = f"top_k={top_k!r} must be a positive int, or None to keep every token"
        raise InvalidArgument(message)
    if top_p is not None and (not _is_real(top_p) or not 0.0 < float(top_p) <= 1.0):
        message = f"top_p={top_p!r} must be a number in (0, 1], or None to keep every token"
        raise InvalidArgument(message)
    if seed is not None and (not _is_int(seed) or not 0 <= int(seed) < SEED_LIMIT):
        message = f"seed={seed!r} must be an int in [0, 2**63), or None for fresh randomness"
        raise InvalidArgument(message)
    _check_extras(min_p, presence_penalty, frequency_penalty, repetition_penalty)
    _check_logprobs(n_logprobs, prompt_logprobs)
    return Sampling(
        max_new_tokens=int(max_new_tokens),
        temperature=float(temperature),
        top_k=None if top_k is None else int(top_k),
        top_p=None if top_p is None else float(top_p),
        seed=None if seed is None else int(seed),
        min_p=None if min_p is None or float(min_p) == 0.0 else float(min_p),  # type: ignore[arg-type]
        presence_penalty=float(presence_penalty),  # type: ignore[arg-type]
        frequency_penalty=float(frequency_penalty),  # type: ignore[arg-type]
        repetition_penalty=float(repetition_penalty),  # type: ignore[arg-type]
        n_logprobs=int(n_logprobs),  # type: ignore[call-overload]
        prompt_logprobs=None if prompt_logprobs is None else int(prompt_logprobs),  # type: ignore[call-overload]
    )


def _check_extras(
    min_p: object, presence_penalty: object, frequency_penalty: object, repetition_penalty: object
) -> None:
    if min_p is not None and (not _is_real(min_p) or not 0.0 <= float(min_p) <= 1.0):
        message = f"min_p={min_p!r} must be a number in [0, 1], or None to keep every token"
        raise InvalidArgument(message)
    for name, value in (
        ("presence_penalty", presence_penalty),
        ("frequency_penalty", frequency_penalty),
    ):
        if not _is_real(value) or not -2.0 <= float(value) <= 2.0:
            message = f"{name}={value!r} must be a number in [-2, 2] (0 is no penalty)"
            raise InvalidArgument(message)
    if not _is_real(repetition_penalty) or not 0.0 < float(repetition_penalty) < math.inf:
        message = (
            f"repetition_penalty={repetition_penalty!r} must be a finite number > 0 (1 is no "
            f"penalty; above 1 discourages repeats)"
        )
        raise InvalidArgument(message)


def _check_logprobs(n_logprobs: object, prompt_logprobs: object) -> None:
    if not _is_int(n_logprobs) or not 0 <= int(n_logprobs) <= MAX_LOGPROBS:
        message = (
            f"n_logprobs={n_logprobs!r} must be an int in [0, {MAX_LOGPROBS}]: the alternatives "
            f"reported per generated token (0: none)"
        )
        raise InvalidArgument(message)
    if prompt_logprobs is not None and (
        not _is_int(prompt_logprobs) or not 0 <= int(prompt_logprobs) <= MAX_LOGPROBS
    ):
        message = (
            f"prompt_logprobs={prompt_logprobs!r} must be an int in [0, {MAX_LOGPROBS}] "
            f"(alternatives per prompt token), or None for no prompt logprobs"
        )
        raise InvalidArgument(message)


def _check_recommended(knob: str, value: Any) -> None:
    # A checkpoint's unsound value is the checkpoint's fault: say so, and how to get past it.
    alone: dict[str, Any] = {"max_new_tokens": 1, "temperature": 1.0, knob: value}
    try:
        check_sampling(**alone)
    except InvalidArgument as error:
        message = (
            f"the checkpoint's generation_config.json recommends {knob}={value!r}, which is not "
            f"sound ({error}); pass {knob}= yourself, or use_generation_config=False"
        )
        raise InvalidArgument(message) from error


def resolve_sampling(
    recommended: Mapping[str, Any] | None,
    *,
    use_generation_config: object = True,
    max_new_tokens: object,
    seed: object = None,
    n_logprobs: object = 0,
    prompt_logprobs: object = None,
    **knobs: object,
) -> Sampling:
    """Decide every knob of `LIBRARY_DEFAULTS`, then check them all (`check_sampling`).

    A knob in `knobs` that is not None is the caller's and always wins; an unset one takes the
    checkpoint's value from `recommended` (`interp_core.generation_config.recommended_sampling`)
    unless `use_generation_config` is False, else the library default. `Sampling.sources`
    records which of the three decided each knob.
    """
    unknown = sorted(set(knobs) - set(LIBRARY_DEFAULTS))
    if unknown:
        message = (
            f"unknown sampling arguments {unknown}; the knobs are {', '.join(LIBRARY_DEFAULTS)}"
        )
        raise InvalidArgument(message)
    if not isinstance(use_generation_config, bool):
        message = (
            f"use_generation_config={use_generation_config!r} must be True (unset knobs follow "
            f"the checkpoint's generation_config.json) or False (the library defaults)"
        )
        raise InvalidArgument(message)
    stated = dict(recommended or {}) if use_generation_config else {}
    chosen: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for knob, default in LIBRARY_DEFAULTS.items():
        given = knobs.get(knob)
        if given is not None:
            chosen[knob], sources[knob] = given, "caller"
        elif knob in stated:
            chosen[knob], sources[knob] = stated[knob], "generation_config"
        else:
            chosen[knob], sources[knob] = default, "default"
    for knob, source in sources.items():
        if source == "generation_config":
            _check_recommended(knob, chosen[knob])
    checked = check_sampling(
        max_new_tokens=max_new_tokens,
        seed=seed,
        n_logprobs=n_logprobs,
        prompt_logprobs=prompt_logprobs,
        **chosen,
    )
    return replace(checked, sources=sources)


def check_lens_top_k(top_k: object) -> int:
    """Refuse (InvalidArgument) a logit-lens `top_k` that is not a positive int."""
    if not _is_int(top_k) or int(top_k) < 1:
        message = f"top_k={top_k!r} must be a positive int"
        raise InvalidArgument(message)
    return int(top_k)


def check_lens_layers(layers: object, n_layers: int) -> list[int]:
    """Refuse (InvalidArgument) malformed logit-lens `layers`; return them as a list of ints.

    None means every layer. Otherwise a non-empty sequence of distinct non-negative ints; a
    layer the model lacks is left to the backend, which refuses it naming the point.
    """
    if layers is None:
        return list(range(n_layers))
    if isinstance(layers, str | bytes) or not isinstance(layers, Sequence):
        message = (
            f"layers={layers!r} is not a list of layer numbers; pass a list such as [0, 3], "
            f"or None for every layer"
        )
        raise InvalidArgument(message)
    if len(layers) == 0:
        message = (
            "layers=[] asks the lens for no layer, so it would return nothing; list the layers, "
            "or pass None for every layer"
        )
        raise InvalidArgument(message)
    chosen: list[int] = []
    for layer in layers:
        if not _is_int(layer) or int(layer) < 0:
            message = (
                f"layers holds {layer!r}, which is not a layer number; layers are ints counted "
                f"from 0 (resolve negative indices against n_layers={n_layers} yourself)"
            )
            raise InvalidArgument(message)
        chosen.append(int(layer))
    doubled = repeated(chosen)
    if doubled:
        message = f"layers repeats {doubled}; the lens decodes each layer once, so list it once"
        raise InvalidArgument(message)
    return chosen


def check_lens_point(point: object) -> str:
    """Refuse (InvalidArgument, or UnknownPoint for a name that is no point) a lens `point`."""
    from interp_core.points import get_point  # points are a registry; keep this module light

    if not isinstance(point, str):
        message = f"point={point!r} is not a point name; pass one of {', '.join(LENS_POINTS)}"
        raise InvalidArgument(message)
    spec = get_point(point)  # an unknown name: UnknownPoint with the nearest names
    if spec.name not in LENS_POINTS:
        message = (
            f"the logit lens cannot decode {spec.name}: it reads the residual stream through the "
            f"final norm and the unembedding, and {spec.name} is not a residual-stream "
            f"activation, so its decoded tokens would mean nothing; use one of "
            f"{', '.join(LENS_POINTS)}"
        )
        raise InvalidArgument(message)
    return spec.name
