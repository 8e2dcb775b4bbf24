"""Workload R: probes evaluated in the vLLM workers against capturing the point and projecting
in the client.

`requests` prompts of `tokens` tokens at once; one `DirectionSet` of `k` random directions at
resid_post of the middle layer. In the worker, `project` dots each row with the directions where
the rows are, so `[tokens, k]` float32 values leave the worker per request; in the client, the
point is captured (`[tokens, d_model]` per request) and projected there. The bytes out of the
worker are counted from the tensors each way returns; the time ratio is the median of paired
rounds (the order alternating), with the goal of the lens issue (≥ 1.3×). The two ways' values
are compared once before timing, so a fast wrong answer cannot pass.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from interp_validator.bench.results import Row, paired_ratios, prompt_tokens, spread_note

__all__ = ["PROJECT_GOAL", "bench_project"]

PROJECT_GOAL = 1.3  # project in the workers vs capture-then-project in the client
PAIRS = 10  # at least this many paired rounds


def bench_project(
    model: Any, *, repeats: int, requests: int = 8, tokens: int = 128, k: int = 64
) -> list[Row]:
    """Rows for `model` (the hooked vLLM backend): the client-side baseline and `project`."""
    import torch

    from interp_core import sync
    from interp_core.readouts import DirectionSet

    point = f"resid_post.{model.n_layers // 2}"
    vectors = torch.randn(k, model.d_model, generator=torch.Generator().manual_seed(0))
    sets = [DirectionSet(point, vectors)]
    prompts = [[prompt_tokens(tokens, seed)] for seed in range(requests)]

    async def in_worker() -> list[Any]:
        answers = await asyncio.gather(*(model.project(p, sets) for p in prompts))
        return [values for (values,) in answers]

    async def in_client() -> list[Any]:
        caches = await asyncio.gather(*(model.capture(p, [point]) for p in prompts))
        return [cache[point].float() @ vectors.T for cache in caches]

    ways = {"client": in_client, "worker": in_worker}
    first = {name: sync.run(model, way) for name, way in ways.items()}  # also the warm-up
    for mine, theirs in zip(first["worker"], first["client"], strict=True):
        if not torch.allclose(mine.float(), theirs, rtol=1e-4, atol=1e-4):
            message = "project in the workers disagrees with capture-then-project in the client"
            raise RuntimeError(message)
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for index in range(max(repeats, PAIRS)):
        order = list(ways) if index % 2 == 0 else list(reversed(ways))
        for name in order:
            start = time.perf_counter()
            sync.run(model, ways[name])
            seconds[name].append(time.perf_counter() - start)
    moved = {
        "client": tokens * model.d_model * 4,  # float32 rows of the point, per request
        "worker": tokens * k * 4,  # float32 values, per request
    }
    shape = f"{requests} concurrent × {tokens} tokens, {k} directions at {point}"
    baseline = f"capture {point}, project in the client, {shape}"
    rate = {name: requests * tokens / sorted(s)[len(s) // 2] for name, s in seconds.items()}
    paired = spread_note(paired_ratios(seconds["client"], seconds["worker"]))
    fraction = moved["worker"] / moved["client"]
    return [
        Row(
            "R",
            "vllm (ours)",
            f"{baseline} ({moved['client']:,} bytes out of the worker per request)",
            rate["client"],
            "tok/s",
            baseline,
            1.0,
        ),
        Row(
            "R",
            "vllm (ours)",
            f"project in the workers, {shape} ({moved['worker']:,} bytes out of the worker per "
            f"request, {fraction:.3f} of a capture's)",
            rate["worker"],
            "tok/s",
            baseline,
            goal=PROJECT_GOAL,
            **paired,
        ),
    ]
