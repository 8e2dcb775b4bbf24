"""Streamed capture, `rows=` and n samples on the eager backend.

A streamed capture's chunks tile prompt + generated - 1 positions and, joined, equal
`capture_generation`'s cache (cached decoding vs one full forward: float rounding, ≤ 1e-5); the
first chunk arrives before the generation ends; its tokens and text equal `generate`'s.
`capture(rows=)` equals slicing the full capture. `generate_samples` gives sample i the
generation of seed + i.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from eager_helpers import model, prompt_ids, resid_address

from interp_core import sync
from interp_core.address import Address
from interp_core.capture_stream import join_chunks
from interp_core.errors import CapabilityUnsupported, InvalidArgument

_FAMILIES = ("llama", "gpt2", "qwen3_moe")


def _points(m: object) -> list[Address]:
    return [resid_address(m, 0), Address("mlp_out", 1), Address("z", 0)]


@pytest.mark.parametrize("family", _FAMILIES)
def test_stream_joins_to_capture_generation(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    points = _points(m)
    options = {"max_new_tokens": 6, "temperature": 0.8, "seed": 11}
    chunks = list(sync.capture_generation_stream(m, ids, points, **options))
    generation, cache = sync.capture_generation(m, ids, points, **options)
    # One chunk per generated token; only the last one carries the generation.
    assert len(chunks) == len(generation.token_ids)
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[0].stop == ids.shape[1] and chunks[-1].stop == cache[points[0]].shape[1]
    streamed = [t for c in chunks for t in c.token_ids]
    assert streamed == list(generation.token_ids)
    assert "".join(s.text for c in chunks for s in c.steps) == generation.text
    assert chunks[-1].generation.token_ids == generation.token_ids
    joined = join_chunks(chunks, torch.cat)
    for point in points:
        assert joined[point].shape == cache[point].shape
        torch.testing.assert_close(joined[point], cache[point], atol=1e-5, rtol=1e-5)


def test_first_chunk_arrives_before_the_generation_ends() -> None:
    m = model("llama")
    ids = prompt_ids(m)

    async def first_then_rest() -> tuple[object, int]:
        stream = m.capture_generation_stream(ids, [resid_address(m, 0)], max_new_tokens=5)
        first = await anext(stream)
        rest = [chunk async for chunk in stream]
        return first, len(rest)

    first, rest = asyncio.run(first_then_rest())
    assert not first.finished and first.generation is None
    assert first[resid_address(m, 0)].shape[1] == ids.shape[1]
    assert rest == 4


def test_stream_refuses_attention_patterns_and_prompt_logprobs() -> None:
    m = model("llama")
    with pytest.raises(CapabilityUnsupported, match="capture_generation"):
        list(sync.capture_generation_stream(m, prompt_ids(m), [Address("attn_scores", 0)]))
    with pytest.raises(CapabilityUnsupported, match="prompt_logprobs"):
        list(sync.capture_generation_stream(m, prompt_ids(m), ["z.0"], prompt_logprobs=2))


@pytest.mark.parametrize("rows", [[0, 3, 1], [-1], range(2, 5)])
def test_rows_equal_slicing_the_full_capture(rows: object) -> None:
    m = model("llama")
    ids = torch.cat([prompt_ids(m)] * 2)
    points = [*_points(m), Address("attn_probs", 1)]
    full = sync.capture(m, ids, points)
    part = sync.capture(m, ids, points, rows=rows)
    index = [r % ids.shape[1] for r in rows]
    for point in points:
        axis = 2 if point.name == "attn_probs" else 1
        expected = full[point].index_select(axis, torch.tensor(index))
        assert torch.equal(part[point], expected)


@pytest.mark.parametrize("rows", [[], [0, 0], [99], ["1"], 3])
def test_bad_rows_are_refused(rows: object) -> None:
    m = model("llama")
    with pytest.raises(InvalidArgument, match="rows="):
        sync.capture(m, prompt_ids(m), [resid_address(m, 0)], rows=rows)


def test_samples_are_the_generations_of_successive_seeds() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    options = {"max_new_tokens": 6, "temperature": 1.2, "top_k": 20}
    samples = sync.generate_samples(m, ids, n=3, seed=40, **options)
    assert len(samples) == 3
    for i, sample in enumerate(samples):
        alone = sync.generate(m, ids, seed=40 + i, **options)
        assert sample.token_ids == alone.token_ids
        assert sample.sampling.seed == 40 + i and sample.sampling.top_k == 20
    assert len({s.token_ids for s in samples}) > 1
    with pytest.raises(InvalidArgument, match="n="):
        sync.generate_samples(m, ids, n=0)
