"""Does eager generation sample as the checkpoint means it, with penalties and alternatives?

A tiny Llama whose generation_config.json recommends temperature 0.7, top_k 5 and
repetition_penalty 1.3: unset knobs follow it and `.sampling` says so, set knobs win, and
`use_generation_config=False` gives the library defaults. Greedy decoding with a repetition
penalty equals HF transformers' own logits processor (`generate(repetition_penalty=...)`) for 64
tokens; presence and frequency penalties change greedy decoding exactly as vLLM's sampler
defines them (checked against a hand-written loop over full forwards); `n_logprobs` and
`prompt_logprobs` equal log_softmax of the model's raw logits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interp_core import load_model, sync
from interp_core.errors import InvalidArgument
from interp_eager.model import EagerModel
from interp_testmodels.sampling_checkpoint import (
    RECOMMENDED,
    check_follows_recommendation,
    check_logprobs,
    recommending_checkpoint,
)

PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> EagerModel:
    folder = recommending_checkpoint(tmp_path_factory.mktemp("recommending"))
    loaded = load_model(str(folder), backend="eager", dtype="float32")
    assert isinstance(loaded, EagerModel)
    return loaded


@pytest.fixture(scope="module")
def ids(model: EagerModel) -> torch.Tensor:
    return model.to_tokens(PROMPT)


def test_unset_knobs_follow_the_checkpoint(model: EagerModel, ids: torch.Tensor) -> None:
    used = sync.generate(model, ids, max_new_tokens=4, seed=1).sampling
    assert used.temperature == RECOMMENDED["temperature"]
    assert used.top_k == RECOMMENDED["top_k"]
    assert used.repetition_penalty == RECOMMENDED["repetition_penalty"]
    assert used.sources["temperature"] == "generation_config"
    assert used.sources["top_p"] == "default" and used.top_p is None
    # The recommendation is what runs (the same seed with its knobs passed gives the same tokens,
    # the library defaults others); a caller's knob wins; the flag runs the library defaults.
    check_follows_recommendation(model, ids)


def test_a_set_knob_wins_and_the_flag_gives_library_defaults(
    model: EagerModel, ids: torch.Tensor
) -> None:
    used = sync.generate(model, ids, max_new_tokens=2, temperature=0.0, top_k=50).sampling
    assert (used.temperature, used.top_k) == (0.0, 50)
    assert used.sources["temperature"] == used.sources["top_k"] == "caller"
    assert used.repetition_penalty == 1.3  # still the checkpoint's
    # The stream reports the same on its first step.
    first = next(iter(sync.generate_stream(model, ids, max_new_tokens=2, temperature=0.0)))
    assert first.sampling.sources["repetition_penalty"] == "generation_config"


def test_repetition_penalty_equals_hf_for_64_tokens(model: EagerModel, ids: torch.Tensor) -> None:
    for penalty in (1.3, 2.0, 0.8):
        ours = sync.generate(
            model, ids, max_new_tokens=64, temperature=0.0, repetition_penalty=penalty
        )
        with torch.no_grad():
            theirs = model.hf_model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=64,
                min_new_tokens=64,
                repetition_penalty=penalty,
                top_k=None,
                temperature=None,
                pad_token_id=model.tokenizer.pad_token_id,
            )
        assert len(ours.token_ids) == 64  # no end-of-sequence token: all 64 compared
        assert list(ours.token_ids) == theirs[0, ids.shape[1] :].tolist()
    unpenalised = sync.generate(
        model, ids, max_new_tokens=64, temperature=0.0, use_generation_config=False
    )
    assert unpenalised.token_ids != ours.token_ids  # the penalty matters on this model


def _reference_penalised(model: EagerModel, ids: torch.Tensor, presence: float, frequency: float):
    # Full forwards, no KV cache, vLLM's definition written out: logit - f*count - p*[count>0].
    tokens = ids[0].tolist()
    generated: list[int] = []
    for _ in range(24):
        with torch.no_grad():
            logits = model.hf_model(torch.tensor([tokens])).logits[0, -1].float()
        for token in set(generated):
            logits[token] -= frequency * generated.count(token) + presence
        token = int(logits.argmax())
        generated.append(token)
        tokens.append(token)
        if token in model._eos_ids():
            break
    return generated


def test_presence_and_frequency_penalties_as_vllm_defines_them(
    model: EagerModel, ids: torch.Tensor
) -> None:
    for presence, frequency in ((1.5, 0.0), (0.0, 1.0), (0.5, 0.7)):
        ours = sync.generate(
            model,
            ids,
            max_new_tokens=24,
            temperature=0.0,
            repetition_penalty=1.0,
            presence_penalty=presence,
            frequency_penalty=frequency,
        )
        assert list(ours.token_ids) == _reference_penalised(model, ids, presence, frequency)


def test_logprobs_are_log_softmax_of_the_raw_logits(model: EagerModel, ids: torch.Tensor) -> None:
    check_logprobs(model, model.hf_model, ids)


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("presence_penalty", 3.0),
        ("frequency_penalty", float("nan")),
        ("repetition_penalty", 0.0),
        ("min_p", 1.5),
        ("n_logprobs", 21),
        ("prompt_logprobs", -1),
        ("use_generation_config", "no"),
    ],
)
def test_bad_knobs_are_refused(
    model: EagerModel, ids: torch.Tensor, knob: str, value: object
) -> None:
    with pytest.raises(InvalidArgument, match=knob):
        sync.generate(model, ids, max_new_tokens=2, **{knob: value})


def test_a_checkpoint_without_recommendations_uses_the_library_defaults(tmp_path: Path) -> None:
    folder = recommending_checkpoint(tmp_path, {})
    plain = load_model(str(folder), backend="eager", dtype="float32")
    used = sync.generate(plain, plain.to_tokens(PROMPT), max_new_tokens=2).sampling
    assert (used.temperature, used.top_k, used.repetition_penalty) == (1.0, None, 1.0)
    assert set(used.sources.values()) == {"default"}
