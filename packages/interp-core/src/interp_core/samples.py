"""How are n samples of one prompt drawn, so that they differ and stay repeatable?

`generate_samples(model, tokens, n=..., seed=..., **knobs)` runs `model.generate` n times with
the same knobs; sample i runs with `seed + i` when a seed is given (the HTTP routes' rule for
`n`), so sample 0 equals `generate(seed=seed)`, the n differ under sampling and the whole call
repeats exactly. Without a seed each sample draws fresh randomness. The samples are awaited
together, so a backend that batches concurrent requests (vLLM) runs them as one batch.

Every knob goes to `generate` unchanged: the checkpoint's recommendation, penalties and
logprobs apply to each sample exactly as to a single generation, and every sample reports its
own settings (`.sampling`, with its own seed).
"""

from __future__ import annotations

import asyncio
from typing import Any

from interp_core.errors import InvalidArgument
from interp_core.sampling import SEED_LIMIT

__all__ = ["MAX_SAMPLES", "generate_samples", "sample_seeds"]

# More samples than this per call is a dataset job, not one call's worth of concurrent requests.
MAX_SAMPLES = 1024


def sample_seeds(seed: int | None, n: int) -> list[int | None]:
    """The seed of each of `n` samples: `seed + i` (mod the seed range), or None each."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES:
        message = f"n={n!r} must be an int in [1, {MAX_SAMPLES}]: samples of the prompt"
        raise InvalidArgument(message)
    if seed is None:
        return [None] * n
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        message = f"seed={seed!r} must be an int in [0, 2**63) or None"
        raise InvalidArgument(message)
    return [(seed + i) % SEED_LIMIT for i in range(n)]


async def generate_samples(
    model: Any, tokens: Any, *, n: int, seed: int | None = None, **knobs: Any
) -> tuple[Any, ...]:
    """`n` `Generation`s of one prompt (see the module docstring), in seed order."""
    seeds = sample_seeds(seed, n)
    return tuple(await asyncio.gather(*(model.generate(tokens, seed=s, **knobs) for s in seeds)))
