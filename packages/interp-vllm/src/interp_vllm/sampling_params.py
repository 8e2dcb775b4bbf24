"""How does a decided `Sampling` become vLLM's `SamplingParams`, and its logprobs ours?

`params` spells every knob of `interp_core.sampling.Sampling` in vLLM's keywords (the penalties
and min_p are vLLM's own, so its sampler applies them in its order: penalties, temperature,
min_p, top_k/top_p). `n_logprobs` and `prompt_logprobs` become vLLM's `logprobs` and
`prompt_logprobs`; the engine runs with its default `logprobs_mode="raw_logprobs"`, so what comes
back is log_softmax of the raw logits, before penalties and temperature, as on eager.

`token_logprobs` and `prompt_logprobs` read vLLM's per-position `{token id: Logprob}` mappings
(the top-n by rank plus the chosen token when it is not among them) as `TokenLogprobs`.
"""

from __future__ import annotations

from typing import Any

from interp_core.results import TokenLogprobs
from interp_core.sampling import Sampling

__all__ = ["params", "prompt_logprobs", "token_logprobs"]


def params(sampling: Sampling, *, stream: bool = False) -> Any:
    """vLLM's `SamplingParams` for one request decided by `sampling`."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    kwargs: dict[str, Any] = {
        "max_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "repetition_penalty": sampling.repetition_penalty,
    }
    if sampling.top_k is not None:
        kwargs["top_k"] = sampling.top_k
    if sampling.top_p is not None:
        kwargs["top_p"] = sampling.top_p
    if sampling.min_p is not None:
        kwargs["min_p"] = sampling.min_p
    if sampling.seed is not None:
        kwargs["seed"] = sampling.seed
    if sampling.n_logprobs:
        kwargs["logprobs"] = sampling.n_logprobs
    if sampling.prompt_logprobs is not None:
        kwargs["prompt_logprobs"] = sampling.prompt_logprobs
    if stream:
        kwargs["output_kind"] = RequestOutputKind.DELTA
    return SamplingParams(**kwargs)


def _entry(position: Any, token: int, n: int) -> TokenLogprobs:
    ranked = sorted(position.items(), key=lambda item: item[1].rank)
    top = [(int(t), float(lp.logprob)) for t, lp in ranked if lp.rank is not None and lp.rank <= n]
    return TokenLogprobs(token, float(position[token].logprob), top[:n])


def token_logprobs(completion: Any, n: int) -> tuple[TokenLogprobs, ...] | None:
    """The generated tokens' `TokenLogprobs` of a vLLM `CompletionOutput` (None for n=0)."""
    if not n or completion.logprobs is None:
        return None
    return tuple(
        _entry(position, int(token), n)
        for position, token in zip(completion.logprobs, completion.token_ids, strict=True)
    )


def prompt_logprobs(
    final: Any, prompt: list[int], n: int | None
) -> tuple[TokenLogprobs | None, ...] | None:
    """The prompt tokens' `TokenLogprobs` of a vLLM `RequestOutput`, None at position 0."""
    if n is None or final.prompt_logprobs is None:
        return None
    rows: list[TokenLogprobs | None] = []
    for position, token in zip(final.prompt_logprobs, prompt, strict=True):
        rows.append(None if position is None else _entry(position, int(token), n))
    return tuple(rows)
