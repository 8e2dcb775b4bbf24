"""How does the eager backend hand out a generation's captures while it runs, and read `rows=`?

The decoding loop (`interp_eager.generation.decode_steps`) captures the requested points in the
forward of every step: the first step's forward covers the prompt, each later one the token fed
back. Each step's rows become one `CaptureChunk` together with the token that step sampled, so
the first chunk arrives after one forward, and the chunks tile prompt + generated - 1 positions,
the same positions `capture_generation` covers (the last sampled token is never fed back).

The rows come from cached decoding (one new position attending to the KV cache), where
`capture_generation` reruns the whole sequence in one forward: the two agree to float rounding
(≤ 1e-5 in float32 on the test models), not bit for bit.

`generate_stream` is the same loop without captures (`stream_generation`).

`rows=` on `capture` runs the forward as usual and keeps only the chosen positions: on this
backend every row is in-process already, so the selection saves the caller the slicing, not a
transfer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from interp_core.address import to_addresses
from interp_core.cache import ActivationCache
from interp_core.capture_stream import (
    CaptureChunk,
    check_rows,
    check_streamable,
    refuse_rows_without_tokens,
    select_rows,
)
from interp_core.model_base import StreamCall
from interp_core.results import Generation, GenerationStep, TokenLogprobs
from interp_eager import call_inputs
from interp_eager.arguments import gen_defaults

__all__ = ["capture_rows", "stream_capture", "stream_generation"]


def capture_rows(model: Any, tokens: Any, rows: Any, cache_of: Any) -> ActivationCache:
    """`cache_of()` (the full capture) reduced to positions `rows` (checked first, against the
    input's length, so a bad `rows=` costs no forward); None: the full capture."""
    if rows is None:
        return cache_of()
    if tokens is None:
        refuse_rows_without_tokens()
    chosen = check_rows(rows, int(model._tokens(tokens).shape[1]))
    cache = cache_of()
    assert chosen is not None
    return ActivationCache(select_rows(cache.tensors, chosen), output=cache.output)


async def stream_capture(
    model: Any, tokens: Any, points: Sequence[Any], call: StreamCall
) -> AsyncIterator[CaptureChunk]:
    """One `CaptureChunk` per generated token (see the module docstring); the last one carries
    the `Generation`. Sampling is decided as in `generate` from `call.sampling` (max_new_tokens,
    temperature, seed, top_k, penalties, n_logprobs...)."""
    taken: list[dict[Any, Any]] = []
    with model._serving():
        addresses = [model._check_address(a) for a in to_addresses(points)]
        check_streamable(addresses, call.sampling)
        ids = model._tokens(tokens)
        max_new_tokens = call.sampling["max_new_tokens"]
        if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool):
            # Priced at the longest the generation can run, before it runs.
            model._check_budget(addresses, 1, ids.shape[1] + max(max_new_tokens, 1) - 1)
        reads = [model.tap(a) for a in dict.fromkeys(addresses)]
        sampling, steps = model._decode_steps(
            ids,
            steering=call.steering,
            reads=(reads, lambda session, *_: taken.append(_rows_of(session, reads))),
            **call.sampling,
        )
    prompt = ids[0].tolist()
    start = 0
    history: list[Any] = []
    for step, one in _generation_steps(model, sampling, steps):
        rows = taken.pop()
        history.append(step)
        # The first forward ran the prompt, every later one the one token fed back.
        stop = start + (len(prompt) if one.index == 0 else 1)
        generation = None
        if step.last:
            logprobs = None
            if sampling.n_logprobs:
                logprobs = tuple(TokenLogprobs(s.token, s.raw_logprob, s.top) for s in history)
            generated = [s.token for s in history]
            generation = Generation(
                text=model.tokenizer.decode(generated, skip_special_tokens=True),
                token_ids=generated,
                prompt_token_ids=prompt,
                finish_reason=one.finish_reason,
                sampling=sampling,
                logprobs=logprobs,
            )
        yield CaptureChunk(start, stop, rows, (one,), generation)
        start = stop
        if not step.last:
            await asyncio.sleep(0)


async def stream_generation(
    model: Any, tokens: Any, **kwargs: Any
) -> AsyncIterator[GenerationStep]:
    """`generate_stream`: one step per generated token; the last one is marked finished with
    its reason, the first carries the sampling settings used.

    Step texts concatenate to `generate`'s text. A token that ends inside a multi-byte
    character emits no text yet (decoding it alone gives U+FFFD); its characters arrive with
    the token that completes them, or with the last step.
    """
    # With prompt_embeds= / lora=, each step's forward runs with them installed.
    tokens, kwargs, guard = call_inputs.for_stream(model, tokens, kwargs)
    sampling, steps = model._decode_steps(tokens, guard=guard, **gen_defaults(kwargs))
    for step, one in _generation_steps(model, sampling, steps):
        yield one
        if not step.last:
            await asyncio.sleep(0)


def _generation_steps(
    model: Any, sampling: Any, steps: Any
) -> Iterator[tuple[Any, GenerationStep]]:
    """Each decoding `Step` with its `GenerationStep` (the text-delta rule of the module's
    streams, written once)."""
    eos = model._eos_ids()
    generated: list[int] = []
    emitted = ""
    for index, step in enumerate(steps):
        generated.append(step.token)
        text = model.tokenizer.decode(generated, skip_special_tokens=True)
        # A token that ends inside a multi-byte character waits for the one that completes it.
        delta = text[len(emitted) :] if step.last or not text.endswith("\ufffd") else ""
        emitted += delta
        finish = ("stop" if step.token in eos else "length") if step.last else None
        used = sampling if index == 0 else None
        entry = (
            TokenLogprobs(step.token, step.raw_logprob, step.top) if sampling.n_logprobs else None
        )
        yield (
            step,
            GenerationStep(
                index, step.token, delta, step.logprob, step.last, finish, step.top, used, entry
            ),
        )


def _rows_of(session: Any, reads: list[Any]) -> dict[Any, Any]:
    """This forward's rows of every read, by address (copied: the session was made with copy)."""
    return {tap.address: session.result(tap.address) for tap in reads}
