"""How does the eager backend sample, one token at a time, with steering live?

A small decoding loop over the HF model with its KV cache, instead of `model.generate`, so that
steering hooks know the absolute position of every token they see (a spec limited to some
positions keeps working across decode steps) and so that streaming needs no threads. Greedy
decoding equals HF `generate(do_sample=False)` token for token; a test holds it to that.

Steering lives only inside each step's own forward pass: every step installs its writes, runs
the model under the caller's guard (the model's lock) and removes them again before it yields,
so a stream suspended between tokens leaves nothing on the model, and a call made meanwhile
runs exactly as it would alone. The KV cache belongs to the loop and is never shared.

Every step says whether it is the last one (end-of-sequence token, token budget spent, or the
context full), so a stream can mark its final token as finished instead of trailing an extra,
token-less step after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from interp_core.sampling import Sampling
from interp_eager.hooks import HookSession, Write

__all__ = ["decode_steps", "sample_next"]


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> tuple[int, float]:
    """Pick the next token from `[vocab]` logits; return (token id, its log-probability)."""
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
) -> Iterator[tuple[int, float, bool]]:
    """Yield (token id, log-probability, is_last) per generated token of the HF model `hf`.

    `sampling` holds the checked arguments (`interp_core.sampling`), `eos` the ids that end the
    sequence and `context` the number of positions the model has (None: unbounded). The caller
    guarantees the prompt leaves room in the context for at least one token, so every call
    yields at least one step and exactly one step has is_last set. Each step's forward pass runs
    inside `guard()` (the model's lock, which also refuses a model shut down meanwhile) with the
    steering hooks installed; neither is held while the step is yielded.
    """
    max_new_tokens = sampling.max_new_tokens
    generator = None
    if sampling.seed is not None:
        generator = torch.Generator(device="cpu").manual_seed(sampling.seed)
    past: Any = None
    current = ids
    length = ids.shape[1]
    for step in range(max_new_tokens):
        positions = torch.arange(length - current.shape[1], length, device=ids.device)
        positions = positions.unsqueeze(0)
        with guard(), HookSession([], writes) as session, torch.no_grad():
            session.start_forward(positions)
            output = hf(
                input_ids=current,
                position_ids=positions,
                past_key_values=past,
                use_cache=True,
            )
            session.check_writes_applied()
        past = output.past_key_values
        with torch.no_grad():
            token, logprob = sample_next(
                output.logits[0, -1].cpu(),
                temperature=sampling.temperature,
                top_k=sampling.top_k,
                top_p=sampling.top_p,
                generator=generator,
            )
        # The next forward would place the new token at position `length`; past the context
        # there is no such position.
        context_full = context is not None and length + 1 >= context
        last = token in eos or step == max_new_tokens - 1 or context_full
        yield token, logprob, last
        if last:
            return
        current = torch.tensor([[token]], device=ids.device)
        length += 1
