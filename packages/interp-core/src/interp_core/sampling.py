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

`check_lens_top_k` does the same for the logit lens's `top_k`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TypeGuard

from interp_core.errors import InvalidArgument

__all__ = ["Sampling", "check_lens_top_k", "check_sampling"]

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
