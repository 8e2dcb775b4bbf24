"""What a hostile client tries on the Neuronpedia mount (issue 28's breaks, on its routes):
each answered at once, in the contract's error shape, before any work it would not pay for."""

from __future__ import annotations

import time
from typing import Any

from neuronpedia_helpers import L0, L1

from interp_testmodels import TEST_PROMPT

SLOW_S = 5.0  # a linear check takes well under 0.5 s; this bound leaves a busy machine room
MANY = list(range(100_000))
HUGE = "word " * 400_000  # 2 MB: under the body cap, over --max-text-chars


def _lens(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "type": ["LOGIT_LENS"], "prompt": TEST_PROMPT, "stream": False, **extra}


def _timed(np: Any, path: str, body: dict[str, Any]) -> tuple[Any, float]:
    started = time.monotonic()
    answer = np.post(path, json=body)
    took = time.monotonic() - started
    health = np.get("/health")  # the server still answers
    assert health.status_code == 200
    return answer, took


def _refused(answer: Any, status: int, words: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert list(body) == ["error"] and words in body["error"], body
    assert "Traceback" not in body["error"]


def test_a_hundred_thousand_indexes_or_layers_are_answered_at_once(np: Any) -> None:
    all_body = {"model": "m", "prompt": TEST_PROMPT, "sourceSet": "res-test",
                "selectedSources": [], "ignoreBos": True, "numResults": 5}  # fmt: skip
    cases = [
        ("/v1/activation/all", {**all_body, "sortByTokenIndexes": MANY}, 400, "outside"),
        ("/v1/activation/raw", {"prompts": [TEST_PROMPT], "layers": MANY}, 400, "layers"),
        ("/v1/lens/prompt", _lens(layers=MANY), 400, "not layers of this model"),
        ("/v1/lens/prompt", _lens(inputTokenIds=[10**9] * 100_000), 400, "vocab"),
        ("/v1/lens/prompt", _lens(topN=10**9), 400, "--max-top-k"),
    ]
    for path, body, status, words in cases:
        answer, took = _timed(np, path, body)
        _refused(answer, status, words)
        assert took < SLOW_S, (path, took)
    # A long cache list the prompt shares nothing with costs a comparison, not a read-out.
    answer, took = _timed(np, "/v1/lens/prompt", _lens(cachedTokenIds=[7] * 100_000, topN=2))
    assert answer.status_code == 200 and answer.json()["meta"]["reuse_len"] == 0
    assert took < SLOW_S


def test_text_over_the_cap_is_refused_before_tokenizing(np: Any) -> None:
    single = {"model": "m", "source": L1, "index": "1"}
    steer = {"model": "m", "steerMethod": "SIMPLE_ADDITIVE", "normalizeSteering": False,
             "types": ["DEFAULT"], "nCompletionTokens": 2, "temperature": 0,
             "strengthMultiplier": 1, "freqPenalty": 0, "seed": 1,
             "features": [{"model": "m", "source": L0, "index": 1, "strength": 1}]}  # fmt: skip
    chat = [{"role": "user", "content": HUGE}]
    cases = [
        ("/v1/tokenize", {"model": "m", "text": HUGE}),
        ("/v1/activation/single", {**single, "prompt": HUGE}),
        ("/v1/activation/single-batch", {**single, "prompts": [TEST_PROMPT, HUGE]}),
        ("/v1/steer/completion", {**steer, "prompt": HUGE}),
        ("/v1/steer/completion-chat", {**steer, "prompt": chat, "steerSpecialTokens": True}),
        ("/v1/apply-chat-template", {"messages": chat}),
        ("/v1/lens/prompt", _lens(prompt=HUGE)),
        ("/v1/lens/prompt", _lens(prompt=None, chat=chat)),
    ]
    for path, body in cases:
        answer, took = _timed(np, path, body)
        assert answer.status_code in (400, 413), (path, answer.text)
        _refused(answer, answer.status_code, "--max-text-chars")
        assert took < SLOW_S, (path, took)


def test_a_huge_generation_stops_at_the_models_context(np: Any, local: Any) -> None:
    body = _lens(numCompletionTokens=10**7, topN=1, temperature=0)
    answer, took = _timed(np, "/v1/lens/prompt", body)
    assert answer.status_code == 200, answer.text
    done = answer.json()["done"]
    assert done["seq_len"] <= local.facts.max_position_embeddings
    assert took < 3 * SLOW_S
