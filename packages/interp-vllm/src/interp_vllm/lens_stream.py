"""The lens over a generation on vLLM: decoded in the workers, streamed as the engine steps.

`WorkerLensStream` is a collaborator of `VLLMModel` (it receives the model's `ModelCalls`). One
streaming request carries the lens's residual keys in its spec, so the hooked sites (or the
static tier's traced taps, under its compiled graph) keep each step's rows on the device. Each
time vLLM hands back an output, one `interp_lens_poll` RPC decodes the rows kept since the last
poll inside the workers (`interp_vllm.lens_stream_worker`) and only the top-k ids and
probabilities come back; the steps they complete are yielded then, not at the end.

A row of position `p` exists once the forward that sampled token `p + 1` has run, but vLLM may
run a step ahead of the outputs delivered here; a step whose next token has not arrived yet
waits for the output that brings it. When the request finishes, a last poll takes what is
left, and the collect that follows raises any refusal the workers recorded (a steering write
that overflowed), before the final step is yielded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_core.lens_generation import (
    LensPlan,
    LensStep,
    check_lens_generation,
    check_skip_reach,
)
from interp_core.model_base import StreamCall, check_lens_sampling, generation_reach
from interp_vllm import sampling_params
from interp_vllm.calls import ModelCalls
from interp_vllm.keys import address_key
from interp_vllm.support import INSTEAD
from interp_vllm.wire import collect, engine_death, engine_errors, submission

__all__ = ["WorkerLensStream"]


class WorkerLensStream:
    """`generate_with_lens` for one model: its `ModelCalls`, its sampling resolution (the
    checkpoint's recommendations) and its installed fitted-lens sets."""

    def __init__(
        self,
        calls: ModelCalls,
        resolve_sampling: Callable[..., Any],
        lens_sets: Callable[[], Mapping[str, Sequence[int]]],
    ) -> None:
        self._calls = calls
        self._resolve = resolve_sampling
        self._lens_sets = lens_sets

    def _plan(self, tokens: Any, lenses: Any, options: dict[str, Any]) -> tuple[list[int], Any]:
        calls = self._calls
        calls.require_hooks("generate_with_lens")
        prompt = calls.one_prompt(tokens, "generate_with_lens")
        plan = check_lens_generation(
            lenses,
            n_layers=calls.facts.n_layers,
            vocab_size=calls.facts.vocab_size,
            held=self._lens_sets(),
            **options,
        )
        return prompt, plan

    async def generate_with_lens(
        self, tokens: Any, lenses: Any, call: StreamCall
    ) -> AsyncIterator[LensStep]:
        """The steps of one generation, for the keywords `ModelBase.generate_with_lens` read."""
        calls = self._calls
        steering = call.steering
        prompt, plan = self._plan(tokens, lenses, call.read)
        sampling = self._resolve(**check_lens_sampling(call.sampling))
        check_skip_reach(plan, len(prompt), sampling.max_new_tokens)
        params = sampling_params.params(sampling, stream=True)
        calls.may_write(steering)
        engine = await calls.ready()
        if calls.pipeline > 1:
            what = "generate_with_lens under pipeline parallelism"
            why = "the layers' rows live on their stages and the lens decodes on the last"
            raise CapabilityUnsupported.build(what, why, "load with pipeline_parallel=1")
        if "final_norm" not in calls.served():
            what = "the lens over a generation on this model is not served by vLLM"
            raise CapabilityUnsupported.build(what, "the workers found no final norm", INSTEAD)
        addresses = calls.addresses([Address(plan.point, layer) for layer in plan.layers])
        keys = {layer: address_key(a) for layer, a in zip(plan.layers, addresses, strict=True)}
        writes = calls.writes(steering, *generation_reach(len(prompt), params.max_tokens), [prompt])
        spec = {"capture": [], "steer": writes, "lens": list(keys.values())}
        rid, request = submission(prompt, params, spec)
        poll = _poll_options(plan, keys)
        sequence = list(prompt)
        ready: list[LensStep] = []
        reason = None
        streamed = 0
        waiting: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        try:
            with engine_errors(engine):
                async for output in engine.generate(request, params, rid):
                    completion = output.outputs[0]
                    sequence.extend(int(t) for t in completion.token_ids)
                    if output.finished:
                        poll["final"] = True
                        reason = completion.finish_reason
                    waiting.update(await _polled(calls, rid, poll))
                    poll["mask"] = None  # the workers keep it for this request
                    if output.finished:
                        await collect(engine, rid, calls.facts)  # a recorded refusal raises here
                    ready.extend(_complete(waiting, sequence, len(prompt), plan))
                    if ready and not output.finished:
                        for step in ready:
                            yield step
                        streamed += len(ready)
                        ready.clear()
                        await asyncio.sleep(0)
        finally:
            if engine_death(engine) is None:
                if plan.word_mask is not None and not poll["final"]:
                    # A stream left early: the workers forget the mask they keep for it.
                    ending = {**poll, "final": True, "lenses": []}
                    await asyncio.shield(
                        engine.collective_rpc("interp_lens_poll", args=(rid, ending))
                    )
                await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))
        expected = max(len(sequence) - 1 - plan.skip_before, 0)
        if waiting or streamed + len(ready) != expected:
            what = (
                f"the vLLM workers returned lens rows for {streamed + len(ready)} of the "
                f"{expected} positions this generation read"
            )
            raise CapabilityUnsupported.build(what, None, INSTEAD)
        for n, step in enumerate(ready):
            if n == len(ready) - 1:
                step = replace(step, finish_reason=reason)
            yield step


def _poll_options(plan: LensPlan, keys: dict[int, str]) -> dict[str, Any]:
    mask = None
    if plan.word_mask is not None:
        import torch

        from interp_vllm.tensor_wire import encode_tensor

        mask = encode_tensor(torch.as_tensor(plan.word_mask, dtype=torch.bool))
    lenses = [
        {
            "keys": [keys[layer] for layer in spec.layers or ()],
            "set": spec.jacobian_set if spec.jacobian else None,
        }
        for spec in plan.lenses
    ]
    return {
        "top_k": plan.top_n,
        "lenses": lenses,
        "mask": mask,
        "skip_before": plan.skip_before,
        "final": False,
    }


async def _polled(
    calls: ModelCalls, rid: str, options: dict[str, Any]
) -> dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Position -> (per lens `[n_layers, k]` ids, probs) of the rows the workers decoded."""
    import torch

    answers = await calls.rpc("interp_lens_poll", rid, options)
    failed = [a["error"] for a in answers if a is not None and "error" in a]
    if failed:
        what = "the vLLM workers could not read the lens over this generation"
        raise CapabilityUnsupported.build(what, "; ".join(failed), INSTEAD)
    answer = next((a for a in answers if a is not None and a["positions"]), None)
    if answer is None:
        return {}
    blocks = [
        (torch.tensor(lens["ids"], dtype=torch.int64), torch.tensor(lens["probs"]))
        for lens in answer["lenses"]
    ]
    return {
        int(position): (
            tuple(ids[:, index] for ids, _ in blocks),
            tuple(probs[:, index] for _, probs in blocks),
        )
        for index, position in enumerate(answer["positions"])
    }


def _complete(
    waiting: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]],
    sequence: list[int],
    prompt_length: int,
    plan: LensPlan,
) -> list[LensStep]:
    """The steps of the waiting positions whose next token has arrived, in position order."""
    steps = []
    for position in sorted(waiting):
        if position + 1 >= len(sequence):
            break
        ids, probs = waiting.pop(position)
        if position < plan.skip_before:
            continue
        steps.append(
            LensStep(
                position=position,
                token_id=sequence[position],
                is_generated=position >= prompt_length,
                top_ids=ids,
                top_probs=probs,
                next_token_id=sequence[position + 1],
            )
        )
    return steps
