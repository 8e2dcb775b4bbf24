"""How does a vLLM model stream a generation's captures, and capture only some rows?

Streamed capture: one streamed request (`RequestOutputKind.DELTA`) carries the capture spec as
`capture_generation` does; as each engine output arrives, `collective_rpc("interp_drain", id)`
brings the rows the workers hold so far (`interp_vllm.stream_worker`), and the output's new
tokens and those rows leave as one `CaptureChunk`. The finished output is followed by the usual
`interp_collect`, which brings the rest and forgets the request. A chunk holds the rows of the
positions that have arrived contiguously from its start; rows a worker has already computed
for a later step wait for the chunk that reaches them. A position the engine recomputes after
preemption, already handed out, is not handed out twice.

`rows=`: the request carries the chosen positions, and the worker drops the other positions'
rows on the device before anything is copied (`Request.row_pick`), so only the chosen rows
leave the worker. Attention patterns are rebuilt here from every position's q and k, which
would leave the worker whole: with `rows=` they are refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from interp_core.address import Address, to_addresses
from interp_core.capture_stream import CaptureChunk, check_rows, check_streamable
from interp_core.errors import CapabilityUnsupported
from interp_core.model_base import StreamCall, generation_reach
from interp_core.results import Generation
from interp_vllm import sampling_params
from interp_vllm.keys import address_key
from interp_vllm.support import RECOMPUTED
from interp_vllm.wire import (
    collect,
    engine_death,
    engine_errors,
    held_rows,
    missing_rows,
    stream_steps,
    submission,
)

__all__ = ["check_capture_rows", "rows_cache", "stream_capture"]


def check_capture_rows(rows: Any, length: int, points: Sequence[Address]) -> tuple[int, ...]:
    """`rows=` checked against a `length`-token prompt; attention patterns refused with it."""
    patterns = [str(a) for a in points if a.name in RECOMPUTED]
    if patterns:
        what = f"capture(rows=...) of {', '.join(patterns)} on vLLM"
        raise CapabilityUnsupported.build(
            what,
            "attention patterns are rebuilt outside the workers from the q and k of every "
            "position, so those would leave the worker whole",
            "capture the pattern without rows= and slice its query axis, or use backend='eager'",
        )
    chosen = check_rows(rows, length)
    assert chosen is not None
    return chosen


def rows_cache(
    addresses: Sequence[Address], payload: dict[str, Any], chosen: Sequence[int]
) -> dict[Address, Any]:
    """One `[1, len(chosen), ...]` tensor per address, rows in the order `chosen` names them."""
    import torch

    wanted = sorted(chosen)
    tensors = {}
    for address in addresses:
        key = address_key(address)
        rows, where = held_rows(payload, key)
        if rows is None or where != wanted:
            instead = "capture without rows= on backend='eager'"
            raise missing_rows(
                key, rows, f"positions {where}", str(wanted), "chosen position", instead
            )
        order = torch.tensor([wanted.index(r) for r in chosen], dtype=torch.long)
        tensors[address] = rows.index_select(0, order).unsqueeze(0)
    return tensors


class _Rows:
    """Rows drained per site key, handed out as contiguous position ranges."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.held: dict[str, dict[int, Any]] = {key: {} for key in self.keys}

    def add(self, payload: dict[str, Any], start: int) -> None:
        for key in self.keys:
            rows = payload["captured"].get(key)
            if rows is None:
                continue
            for index, position in enumerate(payload["positions"].get(key, [])):
                if position >= start:  # an earlier one was handed out already
                    self.held[key][position] = rows[index]

    def ready(self, start: int, limit: int) -> int:
        """The end of the positions every key holds contiguously from `start`, at most `limit`
        (the positions the tokens seen so far were computed at)."""
        stop = limit
        for rows in self.held.values():
            end = start
            while end in rows and end < limit:
                end += 1
            stop = min(stop, end)
        return stop

    def take(self, start: int, stop: int) -> dict[str, Any]:
        import torch

        out = {}
        for key, rows in self.held.items():
            out[key] = torch.stack([rows.pop(p) for p in range(start, stop)]).unsqueeze(0)
        return out


async def stream_capture(
    model: Any,  # a VLLMModel
    tokens: Any,
    points: Sequence[Any],
    call: StreamCall,
) -> AsyncIterator[CaptureChunk]:
    """Chunks as engine outputs arrive (see the module docstring); the last carries the
    `Generation`, its sampling decided from `call.sampling` as `generate` decides it."""
    model._require_hooks("capture_generation_stream")
    prompt = model._one_prompt(tokens, "capture_generation_stream")
    addresses = to_addresses(points)
    check_streamable(addresses, call.sampling)
    sampling = model.resolve_sampling(**call.sampling)
    steering = call.steering
    params = sampling_params.params(sampling, stream=True)
    model._may_write(steering)
    engine = await model._ready()
    addresses = model._addresses(addresses)
    writes = model._writes(steering, *generation_reach(len(prompt), params.max_tokens), [prompt])
    spec = model._spec(addresses, writes) or {"capture": [], "steer": []}
    keys = [address_key(a) for a in addresses]
    rid, request = submission(prompt, params, spec)
    held = _Rows(keys)
    facts = model.facts
    start, index = 0, 0
    generated: list[int] = []
    texts: list[str] = []
    logprobs: list[Any] = []
    collected = False
    try:
        with engine_errors(engine):
            async for output in engine.generate(request, params, rid):
                completion = output.outputs[0]
                method = "interp_collect" if output.finished else "interp_drain"
                payload = await collect(engine, rid, facts, method=method)
                collected = output.finished
                held.add(payload, start)
                alternatives = sampling_params.token_logprobs(completion, sampling.n_logprobs) or ()
                logprobs.extend(alternatives)
                steps = stream_steps(completion, output.finished, index, sampling, alternatives)
                index += len(steps)
                generated.extend(step.token_id for step in steps)
                texts.append(completion.text)
                generation = None
                # The last sampled token is never fed back: prompt + generated - 1 positions.
                fed = len(prompt) + len(generated) - 1
                stop = held.ready(start, fed)
                if output.finished:
                    if stop < fed:
                        what = f"the vLLM workers returned rows up to {stop} of a generation "
                        what += f"that ran {fed} positions"
                        raise CapabilityUnsupported.build(
                            what,
                            "the hook did not see every position (a prefix-cache hit or a "
                            "compiled forward skips hooks)",
                            "use capture_generation on backend='eager'",
                        )
                    generation = Generation(
                        text="".join(texts),
                        token_ids=generated,
                        prompt_token_ids=prompt,
                        finish_reason=completion.finish_reason,
                        output=output,
                        sampling=sampling,
                        logprobs=tuple(logprobs) if sampling.n_logprobs else None,
                    )
                rows = held.take(start, stop)
                tensors = {a: rows[address_key(a)] for a in addresses}
                yield CaptureChunk(start, stop, tensors, steps, generation)
                start = stop
    finally:
        if not collected and engine_death(engine) is None:
            import asyncio

            await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))
