"""Pipeline parallelism: two vLLM workers in two stages, every point still served exactly.

`load_model(..., num_gpus=2, pipeline_parallel=2)` on vLLM's CPU build (one CPU per worker): the
first stage holds the embeddings and the first half of the layers, the second the rest, the final
norm and the unembedding. On four families with different module trees — a Llama, Gemma-2
(sliding windows, sandwich norms, softcaps), Mixtral (experts) and GPT-2 (its own block) — every
point the backend serves equals the eager backend within 1e-5 of scale, steering at a layer of
each stage equals eager's, greedy generation and the logit lens equal eager's (which the single
worker equals in test_vllm_backend.py), and 8 concurrent requests with their own steering each
equal their solo run. `vllm-static` runs under pipeline parallelism compiled, which is the only
way vLLM's CPU build runs it at all (test below); the hooked backend's later stage is given the
buffers vLLM's eager mode forgets (`interp_vllm.worker._pipeline_buffers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from vllm_helpers import TINY_ENGINE, mismatches, relative_diff, seeded_vector

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import InvalidArgument
from interp_core.steering import SteeringSpec
from interp_testmodels.families import build_family

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_vllm")]

ATOL = 1e-5
FAMILIES = ("llama", "gemma2", "mixtral", "gpt2")
PROMPT = "The quick brown fox jumps over the lazy dog"


class Pair:
    def __init__(self, family: str) -> None:
        path = str(build_family(family))
        self.family = family
        self.eager = load_model(path, backend="eager", dtype="float32")
        self.model = load_model(
            path,
            backend="vllm",
            **TINY_ENGINE,
            num_gpus=2,
            pipeline_parallel=2,
        )
        sync.warmup(self.model)
        self.tokens = self.eager.to_tokens(PROMPT)

    def served(self) -> list[str]:
        out = []
        for spec in self.model.points():
            layers = range(self.model.n_layers) if spec.is_layer_point else [None]
            out.extend(spec.name if layer is None else f"{spec.name}.{layer}" for layer in layers)
        return out


@pytest.fixture(scope="module", params=FAMILIES)
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    built = Pair(request.param)
    yield built
    sync.shutdown(built.model)


def test_every_served_point_matches_eager(pair: Pair) -> None:
    points = pair.served()
    assert set(points) >= {"embeddings", "final_norm", f"resid_post.{pair.model.n_layers - 1}"}
    got = sync.capture(pair.model, pair.tokens, points)
    want = sync.capture(pair.eager, pair.tokens, points)
    bad = mismatches(got, want, points, ATOL)
    assert not bad, (pair.family, bad)


def test_steering_at_a_layer_of_each_stage_matches_eager(pair: Pair) -> None:
    last = f"resid_post.{pair.model.n_layers - 1}"
    for layer in range(pair.model.n_layers):  # the tiny families have one layer per stage
        spec = SteeringSpec(
            f"resid_post.{layer}", seeded_vector(pair.model.d_model, layer), "add", 3.0
        )
        got = sync.capture(pair.model, pair.tokens, [last], steering=spec)
        want = sync.capture(pair.eager, pair.tokens, [last], steering=spec)
        assert relative_diff(got[last], want[last]) <= ATOL, (pair.family, layer)
        steered = sync.generate(
            pair.model, pair.tokens, max_new_tokens=6, temperature=0.0, steering=spec
        )
        expected = sync.generate(
            pair.eager, pair.tokens, max_new_tokens=6, temperature=0.0, steering=spec
        )
        assert steered.token_ids == expected.token_ids, (pair.family, layer)


def test_greedy_generation_and_the_lens_match_eager(pair: Pair) -> None:
    got = sync.generate(pair.model, pair.tokens, max_new_tokens=10, temperature=0.0)
    want = sync.generate(pair.eager, pair.tokens, max_new_tokens=10, temperature=0.0)
    assert got.token_ids == want.token_ids
    lens = sync.logit_lens(pair.model, pair.tokens, top_k=3)
    reference = sync.logit_lens(pair.eager, pair.tokens, top_k=3)
    for layer in range(pair.model.n_layers):
        for position in range(pair.tokens.shape[1]):
            mine, theirs = lens.top(layer, position), reference.top(layer, position)
            assert [p.token_id for p in mine] == [p.token_id for p in theirs]


def test_eight_concurrent_requests_each_equal_their_solo_run(pair: Pair) -> None:
    model = pair.model
    last = f"resid_post.{model.n_layers - 1}"
    requests = []
    for seed in range(8):
        prompt = torch.randint(3, 400, (6 + seed,), generator=torch.Generator().manual_seed(seed))
        spec = None
        if seed % 2:
            spec = SteeringSpec(
                f"resid_post.{seed % 2}", seeded_vector(model.d_model, seed), "add", 2.0
            )
        requests.append((prompt.tolist(), spec))

    async def together() -> list[Any]:
        return await asyncio.gather(*(model.capture([p], [last], steering=s) for p, s in requests))

    for (prompt, spec), cache in zip(requests, sync.run(model, together), strict=True):
        solo = sync.capture(model, [prompt], [last], steering=spec)
        assert relative_diff(cache[last], solo[last]) <= ATOL, (pair.family, spec)
    assert sync.run(model, model.pending_requests) == []


def test_static_taps_run_compiled_across_two_stages() -> None:
    path = str(build_family("llama"))
    eager = load_model(path, backend="eager", dtype="float32")
    model = load_model(
        path,
        backend="vllm-static",
        **TINY_ENGINE,
        num_gpus=2,
        pipeline_parallel=2,
        static_points="auto",
    )
    try:
        sync.warmup(model)
        assert model.execution == "compiled"
        tokens = eager.to_tokens(PROMPT)
        points = [f"resid_post.{layer}" for layer in range(model.n_layers)]
        spec = SteeringSpec("resid_post.1", seeded_vector(model.d_model, 5), "add", 3.0)
        for steering in (None, spec):
            got = sync.capture(model, tokens, points, steering=steering)
            want = sync.capture(eager, tokens, points, steering=steering)
            for point in points:
                assert relative_diff(got[point], want[point]) <= ATOL, (point, steering)
            mine = sync.generate(
                model, tokens, max_new_tokens=8, temperature=0.0, steering=steering
            )
            theirs = sync.generate(
                eager, tokens, max_new_tokens=8, temperature=0.0, steering=steering
            )
            assert mine.token_ids == theirs.token_ids
    finally:
        sync.shutdown(model)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"num_gpus": 3, "pipeline_parallel": 2}, r"choose pipeline_parallel from \[1, 3\]"),
        ({"num_gpus": 4, "pipeline_parallel": 4}, "at least one layer each"),
        ({"num_gpus": 2, "pipeline_parallel": 0}, "positive int"),
        ({"num_gpus": 2, "pipeline_parallel": 2, "distributed": "slurm"}, "'mp' or 'ray'"),
    ],
)
def test_invalid_splits_are_refused_before_anything_starts(kwargs: dict, words: str) -> None:
    path = str(build_family("llama"))
    with pytest.raises(InvalidArgument, match=words):
        load_model(path, backend="vllm", dtype="float32", **kwargs)
