"""Does vLLM generation sample as the checkpoint means it, with penalties and alternatives?

One engine on a tiny Llama whose generation_config.json recommends temperature 0.7, top_k 5 and
repetition_penalty 1.3: unset knobs follow it (`.sampling` says so), set knobs win, the flag off
gives the library defaults. Greedy decoding with a repetition penalty, and with presence and
frequency penalties (applied by vLLM's own sampler), equals the eager backend token for token,
and eager's repetition penalty is HF's (test_checkpoint_sampling.py). Top-n logprobs of
generated and prompt tokens equal log_softmax of the eager model's float32 logits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from vllm_helpers import PROMPT, check_penalised_greedy

from interp_core import sync
from interp_core.backends import load_model
from interp_core.testing.engines import warmed
from interp_testmodels.sampling_checkpoint import (
    RECOMMENDED,
    check_follows_recommendation,
    check_logprobs,
    check_recommended,
    recommending_checkpoint,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_vllm")]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(recommending_checkpoint(tmp_path_factory.mktemp("recommending")))


@pytest.fixture(scope="module")
def engine(folder: str) -> Iterator[Any]:
    yield from warmed(folder, backend="vllm", dtype="float32", max_model_len=128)


@pytest.fixture(scope="module")
def eager(folder: str) -> Any:
    return load_model(folder, backend="eager", dtype="float32")


@pytest.fixture(scope="module")
def tokens(eager: Any) -> torch.Tensor:
    return eager.to_tokens(PROMPT)


def test_unset_knobs_follow_the_checkpoint(engine: Any, tokens: Any) -> None:
    used = sync.generate(engine, tokens, max_new_tokens=3, seed=2).sampling
    check_recommended(used)
    # What vLLM's sampler ran with is the recommendation: the same seed with those knobs passed
    # gives the same tokens, and the library defaults give others.
    check_follows_recommendation(engine, tokens)


@pytest.mark.parametrize(
    "penalties",
    [
        {"repetition_penalty": 1.3},
        {"repetition_penalty": 1.0, "presence_penalty": 1.5},
        {"repetition_penalty": 1.0, "frequency_penalty": 1.0},
        {"repetition_penalty": 1.0, "presence_penalty": 0.5, "frequency_penalty": 0.7},
    ],
)
def test_penalised_greedy_generation_equals_eager(
    engine: Any, eager: Any, tokens: Any, penalties: dict[str, float]
) -> None:
    # Each penalty changes this generation from the library defaults' (the checkpoint's own
    # recommendation holds a repetition penalty).
    check_penalised_greedy(engine, eager, tokens, penalties, use_generation_config=False)


def test_logprobs_equal_log_softmax_of_eager_logits(engine: Any, eager: Any, tokens: Any) -> None:
    streamed = check_logprobs(engine, eager.hf_model, tokens)
    assert streamed[0].sampling is not None and streamed[0].sampling.n_logprobs == 5


def test_capture_generation_samples_as_generate(engine: Any, eager: Any, tokens: Any) -> None:
    # The checkpoint's repetition penalty applies to a captured generation on both backends.
    got, _ = sync.capture_generation(engine, tokens, ["resid_post.0"], max_new_tokens=16)
    want, _ = sync.capture_generation(eager, tokens, ["resid_post.0"], max_new_tokens=16)
    assert got.sampling.repetition_penalty == RECOMMENDED["repetition_penalty"]
    assert got.sampling.sources["temperature"] == "caller"  # capture_generation's greedy default
    assert got.token_ids == want.token_ids


# --- streamed capture, rows=, n samples (issue 31) ------------------------------------------------
_STREAM_POINTS = ["resid_post.0", "mlp_out.1", "z.0"]


def test_streamed_capture_joins_to_capture_generation(engine: Any, eager: Any, tokens: Any) -> None:
    from interp_core.capture_stream import join_chunks

    options = {"max_new_tokens": 12, "temperature": 0.0}
    chunks = list(sync.capture_generation_stream(engine, tokens, _STREAM_POINTS, **options))
    generation, cache = sync.capture_generation(engine, tokens, _STREAM_POINTS, **options)
    # The rows of the prompt arrive with the first token, long before the generation ends.
    assert not chunks[0].finished and chunks[0].stop >= tokens.shape[1]
    assert [c.finished for c in chunks].count(True) == 1 and chunks[-1].finished
    assert [t for c in chunks for t in c.token_ids] == list(generation.token_ids)
    assert chunks[-1].generation.token_ids == generation.token_ids
    joined = join_chunks(chunks, torch.cat)
    streamed_eager = join_chunks(
        list(sync.capture_generation_stream(eager, tokens, _STREAM_POINTS, **options)), torch.cat
    )
    for point in _STREAM_POINTS:
        assert torch.equal(joined[point], cache[point])  # the same rows, drained or collected
        torch.testing.assert_close(joined[point], streamed_eager[point], atol=1e-5, rtol=1e-5)
    assert sync.generate(engine, tokens, **options).token_ids == generation.token_ids
    assert sync.run(engine, engine.pending_requests) == []  # nothing left in the workers


def test_rows_leave_the_worker_alone(engine: Any, tokens: Any, monkeypatch: Any) -> None:
    from interp_core.errors import CapabilityUnsupported

    full = sync.capture(engine, tokens, _STREAM_POINTS)
    answers: list[Any] = []
    vllm_engine = engine._engine
    original = vllm_engine.collective_rpc

    async def recording(method: str, *args: Any, **kwargs: Any) -> Any:
        answer = await original(method, *args, **kwargs)
        if method == "interp_collect":
            answers.extend(answer)
        return answer

    monkeypatch.setattr(vllm_engine, "collective_rpc", recording)
    rows = [5, 0, -1]
    part = sync.capture(engine, tokens, _STREAM_POINTS, rows=rows)
    index = torch.tensor([5, 0, tokens.shape[1] - 1])
    for point in _STREAM_POINTS:
        assert torch.equal(part[point], full[point].index_select(1, index))
    # Only the chosen positions came back from the worker.
    assert answers and all(
        where == [0, 5, tokens.shape[1] - 1] for a in answers for where in a["positions"].values()
    )
    with pytest.raises(CapabilityUnsupported, match="rebuilt"):
        sync.capture(engine, tokens, ["attn_probs.0"], rows=[1])


def test_samples_on_vllm_are_successive_seeds(engine: Any, tokens: Any) -> None:
    samples = sync.generate_samples(engine, tokens, n=3, seed=9, max_new_tokens=6)
    for i, sample in enumerate(samples):
        assert (
            sample.token_ids
            == sync.generate(engine, tokens, seed=9 + i, max_new_tokens=6).token_ids
        )
        assert sample.sampling.seed == 9 + i
    assert len({s.token_ids for s in samples}) > 1
