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

`check_lens_top_k`, `check_lens_layers` and `check_lens_point` do the same for the logit lens's
`top_k`, `layers` (None for all, else a non-empty list of distinct layer ints; whether each layer
exists on the model is the backend's refusal) and `point` (one of the residual-stream points,
`LENS_POINTS`: the lens decodes the residual stream, and anything else is not in its basis).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from interp_core.errors import InvalidArgument

__all__ = [
    "LENS_POINTS",
    "Sampling",
    "check_lens_layers",
    "check_lens_point",
    "check_lens_top_k",
    "check_sampling",
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
    return Sampling(
        max_new_tokens=int(max_new_tokens),
        temperature=float(temperature),
        top_k=None if top_k is None else int(top_k),
        top_p=None if top_p is None else float(top_p),
        seed=None if seed is None else int(seed),
    )


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
    seen: set[int] = set()
    doubled: set[int] = set()
    for layer in chosen:  # sets, not list.count: a long layers list stays O(n)
        (doubled if layer in seen else seen).add(layer)
    repeated = sorted(doubled)
    if repeated:
        message = f"layers repeats {repeated}; the lens decodes each layer once, so list it once"
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
