"""Does a decided `Sampling` reach vLLM's `SamplingParams` whole, and do its logprobs come back?

No engine: `params` is checked field by field against the `Sampling` it spells (so a knob the
checkpoint recommended cannot be dropped on the way to vLLM's sampler), and `token_logprobs` /
`prompt_logprobs` read vLLM's own `Logprob` mappings, rank order and the chosen token outside
the top-n included.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from interp_core.sampling import resolve_sampling

pytestmark = pytest.mark.usefixtures("needs_vllm")


def test_every_knob_reaches_sampling_params() -> None:
    from interp_vllm.sampling_params import params

    sampling = resolve_sampling(
        {"temperature": 0.7, "top_k": 5, "repetition_penalty": 1.3},
        max_new_tokens=9,
        seed=3,
        top_p=0.9,
        min_p=0.05,
        presence_penalty=0.5,
        frequency_penalty=-0.25,
        n_logprobs=4,
        prompt_logprobs=2,
    )
    got = params(sampling)
    assert (got.max_tokens, got.temperature, got.top_k, got.top_p, got.min_p) == (
        9,
        0.7,
        5,
        0.9,
        0.05,
    )
    assert (got.presence_penalty, got.frequency_penalty, got.repetition_penalty) == (
        0.5,
        -0.25,
        1.3,
    )
    assert (got.seed, got.logprobs, got.prompt_logprobs) == (3, 4, 2)
    plain = params(resolve_sampling({}, max_new_tokens=2, temperature=0.0))
    assert plain.logprobs is None and plain.prompt_logprobs is None
    assert plain.repetition_penalty == 1.0 and plain.presence_penalty == 0.0


def test_logprobs_are_read_in_rank_order() -> None:
    from vllm.logprobs import Logprob

    from interp_vllm.sampling_params import prompt_logprobs, token_logprobs

    # The chosen token 7 is third; token 9 was chosen outside the top-2 (rank 5).
    first = {7: Logprob(-1.5, 3), 4: Logprob(-0.5, 1), 2: Logprob(-1.0, 2)}
    second = {9: Logprob(-4.0, 5), 1: Logprob(-0.1, 1), 3: Logprob(-2.5, 2)}
    completion = SimpleNamespace(token_ids=[7, 9], logprobs=[first, second])
    entries = token_logprobs(completion, 2)
    assert entries[0].token_id == 7 and entries[0].logprob == -1.5
    assert entries[0].top == ((4, -0.5), (2, -1.0))
    assert entries[1].top == ((1, -0.1), (3, -2.5)) and entries[1].logprob == -4.0
    assert token_logprobs(completion, 0) is None
    final = SimpleNamespace(prompt_logprobs=[None, {5: Logprob(-0.2, 1)}])
    rows = prompt_logprobs(final, [0, 5], 1)
    assert rows[0] is None and rows[1].top == ((5, -0.2),)
