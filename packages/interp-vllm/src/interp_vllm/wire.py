"""What does one request carry to vLLM's workers, and how do their answers become tensors?

A request's wishes travel inside its own `SamplingParams.extra_args` (`interp_vllm.worker` reads
them there): the site keys to capture, the steering operations, the lens layers and a unique id,
which is also its `cache_salt`, so with prefix caching on a salted request can neither reuse
another request's KV blocks (which would skip the rows it must capture, or carry someone else's
steering) nor lend its own. After it finishes, one `collective_rpc("interp_collect", id)` brings
its rows back from every worker; tensor-parallel ranks' rows are reassembled here, and attention
patterns rebuilt from the q and k rows (`interp_vllm.attention`). The model checks everything a
request carries before it gets here (`interp_vllm.model`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from interp_core.address import Address
from interp_core.errors import (
    CapabilityUnsupported,
    EngineDied,
    InterpError,
    InvalidArgument,
    SteeringSpecError,
)
from interp_core.facts import ModelFacts
from interp_core.results import Generation, GenerationStep
from interp_vllm.keys import address_key
from interp_vllm.support import INSTEAD, RECOMPUTED

__all__ = [
    "address_key",
    "as_generation",
    "cache",
    "collect",
    "engine_errors",
    "finished",
    "needed_keys",
    "raise_refusals",
    "request_spec",
    "run_request",
    "sink_keys",
    "stream_steps",
    "submission",
]

# The library errors a worker may fail one request with, by the class name it sends back.
_REFUSALS: dict[str, type[InterpError]] = {
    kind.__name__: kind for kind in (CapabilityUnsupported, InvalidArgument, SteeringSpecError)
}
# The worker-side sites attention patterns are rebuilt from: post-RoPE q and k.
_QK = ("_q_rot", "_k_rot")


def needed_keys(addresses: Sequence[Address], has_site: Callable[[str], bool]) -> list[str]:
    """The site keys the workers must capture to answer `addresses`."""
    keys: list[str] = []
    for address in addresses:
        if address.name in RECOMPUTED:
            keys.extend(f"{qk}.{address.layer}" for qk in _QK)
            sinks = f"_sinks.{address.layer}"
            if address.name == "attn_probs" and has_site(sinks):
                keys.append(sinks)  # gpt-oss: the sink logit shares each denominator
        else:
            keys.append(address_key(address))
    return keys


def sink_keys(addresses: Sequence[Address]) -> list[str]:
    """Sink sites a static tap set names whenever attention probabilities are declared.

    Before the workers answer, a sink site may exist or not; hooking a missing key is a no-op in
    the worker.
    """
    return [f"_sinks.{a.layer}" for a in addresses if a.name == "attn_probs"]


def request_spec(keys: Sequence[str], writes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The spec a request carries (None: nothing to capture or steer, a plain request)."""
    keys = sorted(set(keys))
    if not keys and not writes:
        return None
    return {"capture": keys, "steer": writes}


def submission(
    prompt: list[int], params: Any, spec: dict[str, Any] | None, fields: Any = None
) -> tuple[str, dict[str, Any]]:
    """A fresh request id and the prompt to submit; an interpreted request carries its spec in
    `extra_args` and its id as the cache salt (so prefix caching never shares its KV blocks).
    `fields` (an embeddings prompt, `interp_vllm.call_inputs`) replace the token ids."""
    from interp_vllm.worker import SPEC_KEY

    rid = f"interp-{uuid.uuid4().hex}"
    request: dict[str, Any] = dict(fields) if fields else {"prompt_token_ids": prompt}
    if spec:
        params.extra_args = {SPEC_KEY: {**spec, "id": rid}}
        request["cache_salt"] = rid
    return rid, request


async def run_request(
    engine: Any,
    prompt: list[int],
    params: Any,
    spec: dict[str, Any] | None,
    facts: ModelFacts,
    *,
    lens_top_k: int | None = None,
    inputs: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Run one request to the end; with a spec, collect what its hooks produced. `inputs` (an
    `interp_vllm.call_inputs.RequestInputs`) carries an embeddings prompt and a LoRA adapter."""
    fields = None if inputs is None else inputs.fields
    lora = None if inputs is None else inputs.lora_request
    rid, request = submission(prompt, params, spec, fields)
    final = await finished(engine, request, params, rid, interpreted=bool(spec), lora=lora)
    if not spec:
        return final, {"captured": {}, "positions": {}, "lens": {}}
    return final, await collect(engine, rid, facts, lens_top_k=lens_top_k)


async def run_and_collect(
    engine: Any, prompt: list[int], params: Any, spec: dict[str, Any], method: str, args: tuple
) -> list[dict[str, Any]]:
    """Run one request, then collect it with the worker method `method` (which answers as
    `interp_collect` does, plus its own read-out); a worker's refusal is raised here."""
    rid, request = submission(prompt, params, spec)
    await finished(engine, request, params, rid, interpreted=True)
    answers = await engine.collective_rpc(method, args=(rid, *args))
    raise_refusals(answers)
    return answers


async def finished(
    engine: Any, request: Any, params: Any, rid: str, *, interpreted: bool, lora: Any = None
) -> Any:
    """Run a submitted request to its end and return its final output. If it fails, an engine
    death is raised as `EngineDied`; otherwise an `interpreted` request is first dropped from
    the workers (whatever its hooks held would never be collected)."""
    final = None
    try:
        async for output in engine.generate(request, params, rid, lora_request=lora):
            final = output
    except BaseException as exc:
        died = engine_death(engine, exc)
        if died is not None:
            raise died from exc
        if interpreted:
            await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))
        raise
    return final


def raise_refusals(answers: list[dict[str, Any]]) -> None:
    """Raise the first worker's refusal as its library error, or the workers' errors together
    (answers as `interp_collect` gives them: `refusal`, `errors`)."""
    refusals = [a["refusal"] for a in answers if a.get("refusal")]
    if refusals:
        kind = _REFUSALS.get(refusals[0]["error"], CapabilityUnsupported)
        raise kind(refusals[0]["message"])
    errors = [error for answer in answers for error in answer["errors"]]
    if errors:
        message = "a vLLM worker failed on this request; its read-out is void"
        raise CapabilityUnsupported.build(message, "; ".join(errors), INSTEAD)


# vLLM's own names for "the engine core is gone" (v1's AsyncLLM raises the first; the second
# wraps it for a request that was in flight).
_DEATHS = frozenset({"EngineDeadError", "EngineGenerateError"})


def engine_death(engine: Any, error: BaseException | None = None) -> EngineDied | None:
    """The library error for a dead engine, or None while it lives.

    Dead means vLLM says so (`engine.errored`) or `error` is its engine-death error.
    """
    named = error is not None and any(c.__name__ in _DEATHS for c in type(error).__mro__)
    if not named and not getattr(engine, "errored", False):
        return None
    cause = f"{type(error).__name__}: {error}" if error is not None else "vLLM reports it errored"
    return EngineDied(
        f"the vLLM engine died while serving this model ({cause}); a worker, a node or the "
        f"engine core stopped, and the model serves nothing more: call shutdown() and load it "
        f"again (under distributed='ray', check that every node of the cluster is up)"
    )


@contextlib.contextmanager
def engine_errors(engine: Any) -> Iterator[None]:
    """Around a streamed request: an error it fails with is raised as `EngineDied` when the
    engine died of it (`engine_death`), else as it is."""
    try:
        yield
    except Exception as exc:
        died = engine_death(engine, exc)
        if died is not None:
            raise died from exc
        raise


async def collect(
    engine: Any,
    rid: str,
    facts: ModelFacts,
    *,
    lens_top_k: int | None = None,
    method: str = "interp_collect",
) -> dict[str, Any]:
    """What the workers hold for finished request `rid`, or the library error it failed with.

    A refusal the workers recorded for this request alone (a spec they could not read, a
    steering write that overflowed the model dtype) is raised as its `interp_core.errors` class;
    any other hook failure voids the request as `CapabilityUnsupported`. `method`
    "interp_drain" takes the rows held so far of a request still running.
    """
    from interp_vllm import collect_batch
    from interp_vllm.row_transfer import client_route, unpack_rows

    lens = None if lens_top_k is None else {"top_k": lens_top_k}
    # Batched with the other requests that finish (or drain) in the same step.
    answers = await collect_batch.rpc(engine, method, (rid, lens, client_route(engine)))
    # Read (and so delete) every rows file first: an error raised below must not leave one.
    unpacked = [unpack_rows(answer) for answer in answers]
    refusals = [answer["refusal"] for answer in answers if answer.get("refusal")]
    if refusals:
        kind = _REFUSALS.get(refusals[0]["error"], CapabilityUnsupported)
        raise kind(refusals[0]["message"])
    errors = [error for answer in answers for error in answer["errors"]]
    if errors:
        msg = "a vLLM worker hook failed on this request; its captures and steering are void"
        raise CapabilityUnsupported.build(msg, "; ".join(errors), INSTEAD)
    # Each key comes from the ranks that hold its layer: every rank under tensor parallelism
    # alone, the owning stage's ranks (in tensor-parallel order) under pipeline parallelism.
    held_rows: dict[str, list[Any]] = {}
    positions: dict[str, list[int]] = {}
    for answer, rows_of in zip(answers, unpacked, strict=True):
        for key, rows in rows_of.items():
            held_rows.setdefault(key, []).append(rows)
            positions.setdefault(key, answer["positions"][key])
    captured = {key: _gather(key, ranks, facts) for key, ranks in held_rows.items()}
    lens = {key: block for a in reversed(answers) for key, block in a["lens"].items()}
    features = {k: v for a in reversed(answers) for k, v in a.get("features", {}).items()}
    merged = {"captured": captured, "positions": positions, "lens": lens, "features": features}
    return {**answers[0], **merged}


def _gather(key: str, ranks: list[Any], facts: ModelFacts) -> Any:
    """One tensor from every tensor-parallel rank's rows of `key`.

    Residual-width points are all-reduced, so every rank holds the whole row: rank 0's.
    Head- and neuron-sharded points hold contiguous column slices in rank order: their
    concatenation, which must come out exactly the point's width.
    """
    import torch

    first = ranks[0]
    expected = _width(key, facts)
    width = int(first[0].numel()) if first.shape[0] else 0
    if len(ranks) == 1 or width == expected:
        return first
    total = sum(int(r[0].numel()) for r in ranks if r.shape[0])
    if total != expected:
        msg = f"cannot reassemble {key} from {len(ranks)} tensor-parallel ranks"
        raise CapabilityUnsupported.build(
            msg,
            f"their rows are {[tuple(r.shape[1:]) for r in ranks]} wide, and the point is "
            f"{expected} wide",
            "Load with num_gpus=1 for this point",
        )
    return torch.cat(ranks, dim=1)


def _width(key: str, facts: ModelFacts) -> int:
    from interp_core.shapes import point_width

    name, _, layer = key.partition(".")
    internal = {"_q_rot": facts.q_width, "_k_rot": facts.kv_width, "_sinks": facts.n_heads}
    if name in internal:
        return int(internal[name])
    return int(point_width(Address(name, int(layer) if layer else None), facts))


def cache(
    addresses: Sequence[Address],
    payload: dict[str, Any],
    length: int,
    config: dict[str, Any],
    has_site: Callable[[str], bool],
) -> dict[Address, Any]:
    """One `[1, length, ...]` tensor per address (attention patterns `[1, heads, q, k]`)."""
    tensors = {}
    for address in addresses:
        if address.name in RECOMPUTED:
            tensors[address] = _pattern(address, payload, length, config, has_site)
            continue
        tensors[address] = _rows(address_key(address), payload, length).unsqueeze(0)
    return tensors


def _rows(key: str, payload: dict[str, Any], length: int) -> Any:
    rows, where = held_rows(payload, key)
    if rows is None or where[:length] != list(range(length)):
        got = f"positions {where[:3]}..{where[-3:]}"
        expected = f"positions 0..{length - 1}"
        raise missing_rows(key, rows, got, expected, "position of the request", INSTEAD)
    return rows[:length]


def held_rows(payload: dict[str, Any], key: str) -> tuple[Any, list[int]]:
    """A collected answer's rows at `key` (None when it holds none) and their positions."""
    return payload["captured"].get(key), payload["positions"].get(key, [])


def missing_rows(
    key: str, rows: Any, got: str, expected: str, which: str, instead: str
) -> CapabilityUnsupported:
    """The refusal of an answer whose rows at `key` are not the positions asked for: the hooks
    did not see them (`got`: what came back when `rows` is not None; `which`: "position of the
    request", "chosen position")."""
    return CapabilityUnsupported.build(
        f"the vLLM workers returned {'nothing' if rows is None else got} for {key}, "
        f"expected {expected}",
        f"the hook did not see every {which} (a prefix-cache hit or a compiled forward skips "
        "hooks)",
        instead,
    )


def _pattern(
    address: Address,
    payload: dict[str, Any],
    length: int,
    config: dict[str, Any],
    has_site: Callable[[str], bool],
) -> Any:
    from interp_vllm.attention import probs_from_scores, scores_from_qk

    layer = address.layer
    assert layer is not None
    q = _rows(f"_q_rot.{layer}", payload, length)
    k = _rows(f"_k_rot.{layer}", payload, length)
    scores = scores_from_qk(q, k, config, layer)
    if address.name == "attn_scores":
        return scores
    sinks = None
    if has_site(f"_sinks.{layer}"):
        sinks = _rows(f"_sinks.{layer}", payload, length)[0]  # [heads], same per token
    return probs_from_scores(scores, sinks)


def stream_steps(
    completion: Any, finished: bool, index: int, sampling: Any, alternatives: Any
) -> list[GenerationStep]:
    """The `GenerationStep`s of one streamed output's new tokens, numbered from `index`: vLLM's
    incremental detokenizer gives the output's text, which rides on its last token; the first
    step of the generation carries the `sampling` used, each its `alternatives` entry."""
    ids = [int(token) for token in completion.token_ids]
    steps = []
    for n, token in enumerate(ids):
        last = finished and n == len(ids) - 1
        text = completion.text if n == len(ids) - 1 else ""
        reason = completion.finish_reason if last else None
        entry = alternatives[n] if alternatives else None
        top = entry.top if entry is not None else ()
        used = sampling if index + n == 0 else None
        steps.append(GenerationStep(index + n, token, text, None, last, reason, top, used, entry))
    return steps


def as_generation(final: Any, prompt: list[int], sampling: Any = None) -> Generation:
    """A finished vLLM `RequestOutput` as the protocol's `Generation`, run with `sampling`
    (an `interp_core.sampling.Sampling`; its logprobs are read when it asked for them)."""
    from interp_vllm.sampling_params import prompt_logprobs, token_logprobs

    completion = final.outputs[0]
    return Generation(
        text=completion.text,
        token_ids=tuple(completion.token_ids),
        prompt_token_ids=tuple(prompt),
        finish_reason=completion.finish_reason,
        output=final,
        sampling=sampling,
        logprobs=None if sampling is None else token_logprobs(completion, sampling.n_logprobs),
        prompt_logprobs=(
            None if sampling is None else prompt_logprobs(final, prompt, sampling.prompt_logprobs)
        ),
    )
