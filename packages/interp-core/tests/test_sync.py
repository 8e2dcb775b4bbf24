"""The sync free functions: parity with the protocol, loops, steering, nested-loop refusal."""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import warnings

import pytest
from fake_backend import FakeModel, FakeTensor, LoopBoundFakeModel

from interp_core import sync
from interp_core.address import Address
from interp_core.cache import ActivationCache
from interp_core.errors import NestedEventLoop, PointUnsupported
from interp_core.protocol import InterpModel
from interp_core.results import Generation, GenerationStep, LensResult
from interp_core.steering import SteeringSpec, active_steering, steer
from interp_core.testing import to_nested

POINTS = ["resid_post.1", "lm_head"]

# Protocol method -> its sync twins.
TWINS = {
    "capture": ("capture", "run_with_cache"),
    "capture_generation": ("capture_generation",),
    "capture_generation_stream": ("capture_generation_stream",),
    "generate_samples": ("generate_samples",),
    "capture_attention": ("capture_attention",),
    "capture_residuals": ("capture_residuals",),
    "generate": ("generate",),
    "generate_text": ("generate_text",),
    "decode_residuals": ("decode_residuals",),
    "generate_stream": ("generate_stream",),
    "logit_lens": ("logit_lens",),
    "warmup": ("warmup",),
    "shutdown": ("shutdown",),
}


def _tokens(model: FakeModel) -> object:
    return model.to_tokens("alpha beta gamma")


# --- parity -------------------------------------------------------------------------------------
def test_every_async_protocol_method_has_a_sync_twin() -> None:
    work = [
        name
        for name, member in vars(InterpModel).items()
        if inspect.iscoroutinefunction(member)
        or name in ("generate_stream", "capture_generation_stream")
    ]
    assert sorted(work) == sorted(TWINS)
    for method, twins in TWINS.items():
        protocol_params = dict(inspect.signature(getattr(InterpModel, method)).parameters)
        protocol_params.pop("self")
        for twin in twins:
            params = dict(inspect.signature(getattr(sync, twin)).parameters)
            assert next(iter(params)) == "model", twin
            params.pop("model")
            assert set(params) == set(protocol_params), twin
            for name, param in params.items():
                assert param.kind == protocol_params[name].kind, (twin, name)
                assert param.default == protocol_params[name].default, (twin, name)


# --- results ------------------------------------------------------------------------------------
def test_capture_matches_the_async_method() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    via_sync = sync.capture(model, tokens, POINTS)
    via_async = asyncio.run(model.capture(tokens, POINTS))
    assert isinstance(via_sync, ActivationCache)
    for point in POINTS:
        assert via_sync[point].tolist() == via_async[point].tolist()
    assert (
        sync.run_with_cache(model, tokens, POINTS)["lm_head"].tolist()
        == via_sync["lm_head"].tolist()
    )


def test_generation_functions_return_plain_results() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    generation = sync.generate(model, tokens, max_new_tokens=3, temperature=0.0)
    assert isinstance(generation, Generation) and len(generation.token_ids) == 3
    steps = list(sync.generate_stream(model, tokens, max_new_tokens=3, temperature=0.0))
    assert all(isinstance(s, GenerationStep) for s in steps)
    assert "".join(s.text for s in steps) == generation.text
    again, cache = sync.capture_generation(model, tokens, ["resid_post.0"], max_new_tokens=3)
    assert again.token_ids == generation.token_ids
    assert cache["resid_post.0"].shape == (1, 4 + 3 - 1, model.d_model)
    lens = sync.logit_lens(model, tokens, [0, 2], top_k=2)
    assert isinstance(lens, LensResult) and lens.layers == (0, 2)
    sync.warmup(model)
    sync.shutdown(model)
    assert model.warmed and model.shut_down


def test_errors_propagate_unchanged() -> None:
    model = FakeModel()
    with pytest.raises(PointUnsupported, match=r"attn_scores\.0 cannot be captured"):
        sync.capture(model, _tokens(model), ["attn_scores.0"])


# --- steering -----------------------------------------------------------------------------------
def test_steer_block_applies_to_sync_calls_exactly_like_explicit_steering() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    spec = SteeringSpec("resid_post.1", [1.0] * model.d_model, scale=0.5)
    plain = sync.capture(model, tokens, POINTS)
    explicit = sync.capture(model, tokens, POINTS, steering=spec)
    with steer(model, spec):
        inside = sync.capture(model, tokens, POINTS)
    for point in POINTS:
        assert inside[point].tolist() == explicit[point].tolist()
        assert explicit[point].tolist() != plain[point].tolist()
    after = sync.capture(model, tokens, POINTS)
    assert after["lm_head"].tolist() == plain["lm_head"].tolist()


def test_steer_block_reaches_a_stream_created_inside_it_even_if_iterated_after() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    spec = SteeringSpec("resid_post.2", [5.0] * model.d_model, scale=3.0)
    explicit = [
        s.token_id
        for s in sync.generate_stream(
            model, tokens, max_new_tokens=4, temperature=0.0, steering=spec
        )
    ]
    with steer(model, spec):
        stream = sync.generate_stream(model, tokens, max_new_tokens=4, temperature=0.0)
    assert [s.token_id for s in stream] == explicit


def test_steer_works_inside_a_running_loop_for_awaited_calls() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    spec = SteeringSpec("resid_post.1", [1.0] * model.d_model)

    async def main() -> tuple[list[object], list[object]]:
        explicit = await model.capture(tokens, ["resid_post.1"], steering=spec)
        with steer(model, spec):
            inside = await model.capture(tokens, ["resid_post.1"])
        return to_nested(explicit["resid_post.1"]), to_nested(inside["resid_post.1"])

    explicit, inside = asyncio.run(main())
    assert explicit == inside


# --- loops --------------------------------------------------------------------------------------
def test_a_loop_bound_model_runs_every_call_on_one_background_loop() -> None:
    model = LoopBoundFakeModel()
    tokens = _tokens(model)
    first = sync.capture(model, tokens, POINTS)
    second = sync.capture(model, tokens, POINTS)
    assert first["lm_head"].tolist() == second["lm_head"].tolist()
    steps = list(sync.generate_stream(model, tokens, max_new_tokens=2, temperature=0.0))
    assert len(steps) == 2
    assert model.loop is not None and model.loop is sync._BACKGROUND.loop
    assert threading.current_thread() is threading.main_thread()


def test_a_loop_bound_model_breaks_on_a_fresh_loop_per_call() -> None:
    # Why the background loop exists: the same model awaited on two loops fails.
    model = LoopBoundFakeModel()
    tokens = _tokens(model)
    asyncio.run(model.capture(tokens, POINTS))
    with pytest.raises(RuntimeError, match="foreign event loop"):
        asyncio.run(model.capture(tokens, POINTS))


def test_the_background_loop_carries_steering_and_errors() -> None:
    model = LoopBoundFakeModel()
    tokens = _tokens(model)
    spec = SteeringSpec("resid_post.1", [1.0] * model.d_model)
    explicit = sync.capture(model, tokens, POINTS, steering=spec)
    with steer(model, spec):
        inside = sync.capture(model, tokens, POINTS)
        assert active_steering(model) == (spec,)
    assert inside["lm_head"].tolist() == explicit["lm_head"].tolist()
    with pytest.raises(PointUnsupported):
        sync.capture(model, tokens, ["attn_probs.0"])


def test_plain_models_run_in_the_calling_thread() -> None:
    seen: list[threading.Thread] = []

    class Recording(FakeModel):
        async def warmup(self) -> None:
            seen.append(threading.current_thread())

    sync.warmup(Recording())
    assert seen == [threading.current_thread()]


# --- refusing inside a running loop -------------------------------------------------------------
CALLS = {
    "capture": (lambda m, t: sync.capture(m, t, POINTS), "capture"),
    "run_with_cache": (lambda m, t: sync.run_with_cache(m, t, POINTS), "capture"),
    "capture_generation": (
        lambda m, t: sync.capture_generation(m, t, POINTS),
        "capture_generation",
    ),
    "generate": (lambda m, t: sync.generate(m, t), "generate"),
    "generate_stream": (lambda m, t: sync.generate_stream(m, t), "generate_stream"),
    "logit_lens": (lambda m, t: sync.logit_lens(m, t), "logit_lens"),
    "warmup": (lambda m, t: sync.warmup(m), "warmup"),
    "shutdown": (lambda m, t: sync.shutdown(m), "shutdown"),
}


@pytest.mark.parametrize("function", sorted(CALLS))
def test_every_sync_function_refuses_inside_a_running_loop(function: str) -> None:
    call, method = CALLS[function]
    model = FakeModel()
    tokens = _tokens(model)

    async def main() -> None:
        call(model, tokens)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" left behind
        with pytest.raises(NestedEventLoop) as excinfo:
            asyncio.run(main())
        gc.collect()
    text = str(excinfo.value)
    assert f"interp_core.sync.{function}(...) was called inside a running event loop" in text
    assert "stalling every other task" in text  # why
    assert f"use `await model.{method}(...)` instead" in text  # what instead
    assert isinstance(excinfo.value, RuntimeError)


def test_a_background_loop_thread_is_shared_by_loop_bound_models() -> None:
    one, two = LoopBoundFakeModel(), LoopBoundFakeModel()
    sync.capture(one, _tokens(one), [Address("embeddings")])
    sync.capture(two, _tokens(two), [Address("embeddings")])
    assert one.loop is two.loop is sync._BACKGROUND.loop


# --- the read-out twins and the facade ----------------------------------------------------------
def test_readout_twins_match_the_async_methods() -> None:
    model = FakeModel()
    tokens = _tokens(model)
    residuals = sync.capture_residuals(model, tokens, [1, 0])
    cache = sync.capture(model, tokens, ["resid_post.0", "resid_post.1"])
    assert list(residuals) == [1, 0]  # keyed by layer, in the order asked
    for layer in (0, 1):  # one prompt: [seq, d_model], no batch dimension
        assert residuals[layer].tolist() == cache[f"resid_post.{layer}"].tolist()[0]
    text = sync.generate_text(model, "alpha beta", max_tokens=3, temperature=0.0)
    generation = sync.generate(
        model, model.to_tokens("alpha beta"), max_new_tokens=3, temperature=0.0
    )
    assert text == generation.text and len(text) > 0
    rows = cache["resid_post.1"].tolist()[0]
    logits = sync.decode_residuals(model, FakeTensor(rows))
    assert logits.tolist() == [model._unembed_row(model._norm(row)) for row in rows]


def test_sync_model_is_cached_and_binds_every_twin() -> None:
    model, other = FakeModel(), FakeModel()
    facade = sync.sync_model(model)
    assert sync.sync_model(model) is facade
    assert sync.sync_model(facade) is facade
    assert sync.sync_model(other) is not facade
    assert facade.model is model and facade.n_layers == model.n_layers
    tokens = _tokens(model)
    assert facade.capture(tokens, POINTS)["lm_head"].tolist() == (
        sync.capture(model, tokens, POINTS)["lm_head"].tolist()
    )
    for method, twins in TWINS.items():
        for twin in twins:
            assert getattr(facade, twin).__name__ == twin, method
    facade.shutdown()
    assert model.shut_down


def test_sync_model_refuses_inside_a_loop() -> None:
    facade = sync.sync_model(FakeModel())

    async def inside() -> None:
        facade.generate_text("alpha", max_tokens=1)

    with pytest.raises(NestedEventLoop, match="generate_text"):
        asyncio.run(inside())
