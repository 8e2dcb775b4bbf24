"""64 concurrent clients mixing capture, steered generation, streaming and lens.

Each request's answer must equal the same request run alone in-process: nothing leaks between
requests (a steering spec, a capture, a sampler's state). The clients run as asyncio tasks on
one remote model (one connection pool), so the server really holds them all at once.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import torch

from interp_core import load_model, sync
from interp_core.steering import SteeringSpec

PROMPTS = [
    "The quick brown fox",
    "jumps over the lazy dog",
    "A B C D E F",
    "hello world, hello again",
    "one two three four five six seven",
    "x",
    "the the the the",
    "Numbers 1 2 3 4 5",
]


def _spec(i: int, width: int) -> SteeringSpec:
    vector = [math.sin(0.1 * (i + 1) * j) for j in range(width)]
    return SteeringSpec(f"resid_post.{i % 2}", vector, scale=0.5 + i)


def _job(i: int, local: Any) -> tuple[str, dict[str, Any]]:
    ids = local.to_tokens(PROMPTS[i % len(PROMPTS)])
    kind = ("capture", "steered", "stream", "lens")[i % 4]
    if kind == "capture":
        points = ["resid_post.1", "attn_probs.0"] if i % 8 else ["mlp_out.0", "lm_head"]
        steering = _spec(i, local.d_model) if i % 3 == 0 else None
        return kind, {"tokens": ids, "points": points, "steering": steering}
    if kind == "steered":
        return kind, {
            "tokens": ids,
            "max_new_tokens": 5,
            "temperature": 0.8,
            "seed": i,
            "steering": _spec(i, local.d_model),
        }
    if kind == "stream":
        return kind, {"tokens": ids, "max_new_tokens": 6, "temperature": 0.0}
    return kind, {"tokens": ids, "top_k": 3, "layers": [0, 1]}


async def _run(model: Any, kind: str, a: dict[str, Any]) -> Any:
    if kind == "capture":
        cache = await model.capture(a["tokens"], a["points"], steering=a["steering"])
        return {str(k): v for k, v in cache.items()}
    if kind == "steered":
        rest = {k: v for k, v in a.items() if k != "tokens"}
        return await model.generate(a["tokens"], **rest)
    if kind == "stream":
        steps = model.generate_stream(
            a["tokens"], max_new_tokens=a["max_new_tokens"], temperature=a["temperature"]
        )
        return [(s.token_id, s.text) async for s in steps]
    lens = await model.logit_lens(a["tokens"], a["layers"], top_k=a["top_k"])
    return {
        layer: [[p.token_id for p in row] for row in lens.predictions[layer]]
        for layer in lens.layers
    }


def _solo(local: Any, kind: str, a: dict[str, Any]) -> Any:
    async def once() -> Any:
        return await _run(local, kind, a)

    return sync.run(local, once)


def test_64_concurrent_mixed_clients_each_equal_their_solo_run(server: Any, local: Any) -> None:
    jobs = [_job(i, local) for i in range(64)]
    expected = [_solo(local, kind, a) for kind, a in jobs]

    async def everyone() -> list[Any]:
        model = load_model(server.url, backend="remote", api_key=server.keys[0])
        try:
            return await asyncio.gather(*(_run(model, kind, a) for kind, a in jobs))
        finally:
            await model.shutdown()

    got = asyncio.run(everyone())
    for i, ((kind, _), mine, theirs) in enumerate(zip(jobs, got, expected, strict=True)):
        if kind == "capture":
            assert mine.keys() == theirs.keys(), i
            for key in theirs:
                assert torch.allclose(mine[key], theirs[key], atol=1e-6, rtol=0), (i, key)
        else:
            assert mine == theirs, (i, kind)
