"""How does the eager backend sample, one token at a time, with steering live?

A small decoding loop over the HF model with its KV cache, instead of `model.generate`, so that
steering hooks know the absolute position of every token they see (a spec limited to some
positions keeps working across decode steps) and so that streaming needs no threads. Greedy
decoding equals HF `generate(do_sample=False)` token for token; a test holds it to that.

Steering lives only inside each step's own forward pass: every step installs its writes, runs
the model under the caller's guard (the model's lock) and removes them again before it yields,
so a stream suspended between tokens leaves nothing on the model, and a call made meanwhile
runs exactly as it would alone. The KV cache belongs to the loop and is never shared.

Each step's logits pass through the sampling order vLLM's sampler uses (and HF's, for what both
have): the penalties on the raw logits (repetition over prompt and generated tokens, then
frequency and presence over the generated ones), then the temperature, min_p, top_k and top_p.
Greedy decoding is the argmax after the penalties. The alternatives a step reports
(`n_logprobs`) and the prompt's (`prompt_logprobs`) are log_softmax of the raw logits, before
any of that: vLLM's default `logprobs_mode="raw_logprobs"`, so both backends report the model's
own distribution.

Every step says whether it is the last one (end-of-sequence token, token budget spent, or the
context full), so a stream can mark its final token as finished instead of trailing an extra,
token-less step after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple

import torch

from interp_core.results import TokenLogprobs
from interp_core.sampling import Sampling
from interp_eager.hooks import HookSession, Write

__all__ = ["apply_penalties", "best_logprobs", "decode_steps", "prompt_logprobs", "sample_next"]


class Step(NamedTuple):
    """One generated token: `logprob` under the distribution sampled from; `top` the
    `n_logprobs` raw alternatives and `raw_logprob` the token's own raw log-probability
    (None without `n_logprobs`)."""

    token: int
    logprob: float
    last: bool
    top: tuple[tuple[int, float], ...]
    raw_logprob: float | None


def apply_penalties(
    logits: torch.Tensor, sampling: Sampling, prompt: torch.Tensor, generated: list[int]
) -> torch.Tensor:
    """`[vocab]` logits with the penalties of `sampling` applied, as vLLM and HF define them.

    repetition_penalty (HF's and vLLM's): every token seen in the prompt or the generation has
    its logit divided by the penalty when positive, multiplied when negative. frequency_penalty
    (OpenAI's): minus the penalty times the token's count in the generation. presence_penalty:
    minus the penalty once for every token the generation holds. The prompt's tokens count for
    the repetition penalty only, as in vLLM.
    """
    if sampling.repetition_penalty != 1.0:
        seen = torch.cat([prompt.flatten().cpu(), torch.tensor(generated, dtype=torch.long)])
        mask = torch.zeros_like(logits, dtype=torch.bool)
        mask[seen.unique()] = True
        penalised = torch.where(
            logits > 0, logits / sampling.repetition_penalty, logits * sampling.repetition_penalty
        )
        logits = torch.where(mask, penalised, logits)
    if generated and (sampling.frequency_penalty or sampling.presence_penalty):
        counts = torch.bincount(torch.tensor(generated), minlength=logits.shape[-1])
        counts = counts[: logits.shape[-1]].to(logits.dtype)
        logits = logits - sampling.frequency_penalty * counts
        logits = logits - sampling.presence_penalty * (counts > 0).to(logits.dtype)
    return logits


def best_logprobs(logits: torch.Tensor, n: int) -> tuple[tuple[int, float], ...]:
    """The `n` most probable (id, log-probability) pairs of raw `[vocab]` logits, best first:
    log_softmax in float32, before any penalty or temperature."""
    if n <= 0:
        return ()
    values, ids = torch.log_softmax(logits.float(), dim=-1).topk(min(n, logits.shape[-1]))
    return tuple(zip(ids.tolist(), values.tolist(), strict=True))


def prompt_logprobs(logits: torch.Tensor, prompt: list[int], n: int) -> tuple[Any, ...]:
    """Per prompt position: None at 0, else the prompt token's raw log-probability given the
    tokens before it and the `n` best alternatives (`TokenLogprobs`)."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    rows: list[Any] = [None]
    for position in range(1, len(prompt)):
        token = prompt[position]
        row = logprobs[position - 1]
        rows.append(TokenLogprobs(token, float(row[token]), best_logprobs(logits[position - 1], n)))
    return tuple(rows)


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
    min_p: float | None = None,
) -> tuple[int, float]:
    """Pick the next token from `[vocab]` (penalised) logits; return (token id, its
    log-probability under the distribution sampled from)."""
    logits = logits.float()
    if temperature == 0:
        token = int(logits.argmax())
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    scaled = logits / temperature
    if not bool(torch.isfinite(scaled).all()):
        # A temperature so small that logits / temperature overflows (1e-300 is 0 in float32):
        # shifted by the maximum and divided in float64, the top logit stays 0 and the softmax,
        # unchanged by the shift, is the greedy one-hot it tends to.
        scaled = (logits - logits.max()).double() / temperature
    if min_p is not None and min_p > 0:
        # vLLM's and HF's min_p: drop tokens whose probability is below min_p times the top one.
        probs = torch.softmax(scaled, dim=-1)
        scaled = scaled.masked_fill(probs < min_p * probs.max(), float("-inf"))
    if top_k is not None and top_k < scaled.shape[-1]:
        threshold = scaled.topk(top_k).values[-1]
        scaled = scaled.masked_fill(scaled < threshold, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = scaled.sort(descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        drop = cumulative - torch.softmax(sorted_logits, dim=-1) >= top_p
        scaled = scaled.masked_fill(drop.scatter(0, order, drop), float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(torch.log(probs[token]))


def decode_steps(
    hf: Any,
    ids: torch.Tensor,
    writes: list[Write],
    sampling: Sampling,
    *,
    eos: set[int],
    context: int | None,
    guard: Callable[[], AbstractContextManager[Any]] = nullcontext,
    on_prompt: Callable[[torch.Tensor], None] | None = None,
    reads: tuple[Sequence[Any], Callable[[HookSession, torch.Tensor, bool], None]] | None = None,
) -> Iterator[Step]:
    """Yield a `Step` per generated token of the HF model `hf` (token id, log-probability,
    is_last, the `sampling.n_logprobs` raw alternatives and the token's raw log-probability).

    `on_prompt`, when given, receives the raw logits `[seq, vocab]` of the prompt's forward (the
    first step), from which prompt logprobs are read without a second pass.
    `sampling` holds the checked arguments (`interp_core.sampling`), `eos` the ids that end the
    sequence and `context` the number of positions the model has (None: unbounded). The caller
    guarantees the prompt leaves room in the context for at least one token, so every call
    yields at least one step and exactly one step has is_last set. `reads`, when given, is
    `(taps, on_reads)`: the taps are captured in every forward and handed, still inside the
    guard, to `on_reads(session, positions, is_prompt)` (the lens over a generation decodes
    them there). Each step's forward pass runs
    inside `guard()` (the model's lock, which also refuses a model shut down meanwhile) with the
    steering hooks installed; neither is held while the step is yielded.

    `reads` are taps captured in every step's forward (the prompt's positions in the first,
    one fed-back token's in each later one); `on_rows` receives them, copied out of the step,
    before the step is yielded.
    """
    max_new_tokens = sampling.max_new_tokens
    taps, on_reads = reads if reads is not None else ((), None)
    generator = None
    if sampling.seed is not None:
        generator = torch.Generator(device="cpu").manual_seed(sampling.seed)
    past: Any = None
    generated: list[int] = []
    current = ids
    length = ids.shape[1]
    for step in range(max_new_tokens):
        positions = torch.arange(length - current.shape[1], length, device=ids.device)
        positions = positions.unsqueeze(0)
        with guard():
            # Reads are copied: this loop cannot rerun a forward the model mutated in place.
            with HookSession(taps, writes, copy=bool(taps)) as session, torch.no_grad():
                session.start_forward(positions)
                output = hf(
                    input_ids=current,
                    position_ids=positions,
                    past_key_values=past,
                    use_cache=True,
                )
                session.check_writes_applied()
                if taps:
                    session.check_fired_once()
            if on_reads is not None:
                # After the hooks are gone: decoding the reads runs the final norm and head,
                # which a steering write or read of this step must not touch.
                with torch.no_grad():
                    on_reads(session, positions[0], step == 0)
        past = output.past_key_values
        with torch.no_grad():
            if step == 0 and on_prompt is not None:
                on_prompt(output.logits[0].float().cpu())
            raw = output.logits[0, -1].float().cpu()
            token, logprob = sample_next(
                apply_penalties(raw, sampling, ids, generated),
                temperature=sampling.temperature,
                top_k=sampling.top_k,
                top_p=sampling.top_p,
                generator=generator,
                min_p=sampling.min_p,
            )
            top = best_logprobs(raw, sampling.n_logprobs)
            raw_logprob = None
            if sampling.n_logprobs:
                raw_logprob = float(torch.log_softmax(raw, dim=-1)[token])
        generated.append(token)
        # The next forward would place the new token at position `length`; past the context
        # there is no such position.
        context_full = context is not None and length + 1 >= context
        last = token in eos or step == max_new_tokens - 1 or context_full
        yield Step(token, logprob, last, top, raw_logprob)
        if last:
            return
        current = torch.tensor([[token]], device=ids.device)
        length += 1
