"""The OpenAI-compatible routes: /v1/models, /v1/completions, /v1/chat/completions.

Existing OpenAI clients work unchanged: same request fields, same response and stream-chunk
shapes, errors in the `{"error": {...}}` form. Penalties, `min_p`, `repetition_penalty` and
`logprobs` / `top_logprobs` are served, on streams too (OpenAI's shapes: `openai_logprobs`);
a sampling field left out follows the checkpoint's generation_config.json, and the settings used
are in the response's `interp.sampling`; `n` > 1 gives n choices. Fields the engine does not
serve (`stop`, `echo`, `n` > 1 on a stream) are refused with a reason instead of
silently ignored. The optional `interp` object adds capture (over prompt and generated
tokens), steering and a logit lens; the response then carries an `interp` object with the
generated token ids, the capture's handle and metadata, and the lens.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fastapi import APIRouter, Request

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.sampling import SEED_LIMIT
from interp_serve.event_streams import first_item, sse_response
from interp_serve.injection import completion_inputs, prompt_length, whole_embeds_prompt
from interp_serve.openai_logprobs import (
    chat_logprobs,
    completion_logprobs,
    requested_logprobs,
    step_logprobs,
)
from interp_serve.schemas import ChatRequest, CompletionRequest
from interp_serve.service import Service
from interp_serve.wire import (
    generation_to_json,
    lens_to_json,
    step_to_json,
)

__all__ = ["router"]

router = APIRouter()

# Completions one request may ask for; each is a full generation on the backend.
_MAX_N = 16


def _service(request: Request) -> Service:
    return request.app.state.service


def _refuse_unserved(body: Any) -> None:
    """Refuse OpenAI fields the engine does not serve, naming each."""
    unserved = []
    if body.n != 1 and (body.stream or (body.interp is not None and body.interp.capture)):
        unserved.append(f"n={body.n} with a stream or a capture (send n requests)")
    if body.stop:
        unserved.append("stop (stop sequences; cut the text client-side)")
    if body.echo:
        unserved.append("echo (the prompt's token ids are in the interp object)")
    if unserved:
        message = f"this server does not serve {'; '.join(unserved)}; leave those fields out"
        raise CapabilityUnsupported(message)
    if body.stream and body.interp is not None and body.interp.capture:
        message = (
            "capture with stream: true is not served: a capture covers the whole generation, "
            "so it is answered once; send stream: false with interp.capture, or stream without"
        )
        raise CapabilityUnsupported(message)


def _sampling(body: Any, *, chat: bool) -> dict[str, Any]:
    options = body.interp
    top = requested_logprobs(body, chat=chat)
    extra = options.n_logprobs if options is not None else 0
    # The sampled token's own logprob comes with the alternatives, so ask for at least one;
    # a malformed interp.n_logprobs goes on as given, for the core to refuse in its words.
    wanted = max(top or 0, 0 if top is None else 1)
    n_logprobs = max(wanted, extra) if _int(extra) else extra
    chosen = {
        "max_new_tokens": body.max_tokens,
        "temperature": body.temperature,
        "top_k": body.top_k,
        "top_p": body.top_p,
        "min_p": body.min_p,
        "presence_penalty": body.presence_penalty,
        "frequency_penalty": body.frequency_penalty,
        "repetition_penalty": body.repetition_penalty,
        "use_generation_config": body.use_generation_config,
        "seed": body.seed,
        "n_logprobs": n_logprobs,
    }
    if options is not None and options.prompt_logprobs is not None:
        chosen["prompt_logprobs"] = options.prompt_logprobs
    return chosen


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _accepted(body: Any, request: Request) -> tuple[Service, Any]:
    """The service and the call inputs of a completion request, refused first where it names
    another model or asks for what the server does not do."""
    service = _service(request)
    service.check_model(body.model)
    _refuse_unserved(body)
    return service, completion_inputs(service, body)


@router.get("/v1/models", summary="The served model")
async def list_models(request: Request) -> dict[str, Any]:
    service = _service(request)
    entry = {
        "id": service.name,
        "object": "model",
        "created": 0,
        "owned_by": "interp-engine",
        "backend": service.backend_name,
    }
    return {"object": "list", "data": [entry]}


@router.post("/v1/completions", summary="OpenAI-compatible text completion")
async def completions(body: CompletionRequest, request: Request) -> Any:
    service, inputs = _accepted(body, request)
    if whole_embeds_prompt(inputs, body.prompt):
        return await _answer(service, body, None, request, chat=False, inputs=inputs)
    tokens = await service.prompt_ids(body.prompt)
    return await _answer(service, body, tokens, request, chat=False, inputs=inputs)


@router.post("/v1/chat/completions", summary="OpenAI-compatible chat completion")
async def chat_completions(body: ChatRequest, request: Request) -> Any:
    service, inputs = _accepted(body, request)
    tokens = await service.chat_ids([m.model_dump() for m in body.messages])
    return await _answer(service, body, tokens, request, chat=True, inputs=inputs)


async def _answer(
    service: Service,
    body: Any,
    tokens: list[list[int]] | None,
    request: Request,
    *,
    chat: bool,
    inputs: dict[str, Any] | None = None,
) -> Any:
    options = body.interp
    specs = (
        service.specs(options.steering, options.features, options.clamp)
        if options is not None
        else []
    )
    sampling = _sampling(body, chat=chat)
    meta: dict[str, Any] = {}
    if options is not None and options.lens is not None:
        lens = options.lens
        result = await service.logit_lens(
            tokens, lens.layers, lens.top_k, lens.point, request.is_disconnected
        )
        meta["lens"] = lens_to_json(result)
    if body.stream:
        shown = meta if options is not None else None
        sampling.update(inputs or {})  # the backend's stream takes them with the sampling
        return await _stream(service, body, tokens, specs, sampling, shown, chat=chat)
    if options is not None and options.capture:
        for key in list(sampling):
            if key in ("max_new_tokens", "temperature", "seed"):
                continue
            # Each other knob must be left at its "not asked for" value.
            unasked = {"n_logprobs": 0, "use_generation_config": True}.get(key)
            value = sampling.pop(key)
            if value != unasked or type(value) is not type(unasked):
                message = (
                    f"{key} with interp.capture is not served: a captured generation samples "
                    f"with temperature and seed only; leave {key} out"
                )
                raise CapabilityUnsupported(message)
        if sampling["temperature"] is None:
            sampling.pop("temperature")  # capture_generation's own default: greedy
        generation, cache = await service.capture_generation(
            tokens, options.capture, specs, request.is_disconnected, inputs, **sampling
        )
        prompt = prompt_length(tokens, inputs)
        positions = {
            "prompt": [0, prompt],
            "generated": [prompt, prompt + len(generation.token_ids) - 1],
        }
        meta.update(await service.keep(cache, options.inline, positions, request.state.owner))
        generations = [generation]
    else:
        generations = [
            await service.generate(tokens, specs, request.is_disconnected, inputs, **options)
            for options in _samples(body, sampling)
        ]
        generation = generations[0]
    for one in generations:
        service.metrics.tokens.inc(len(one.token_ids))
    meta.update(generation_to_json(generation))  # with `sampling`: the settings used
    top = requested_logprobs(body, chat=chat)
    body_json = _completion_body(service, generation, meta, chat=chat, top=top)
    if len(generations) > 1:
        _more_choices(service, body_json, generations, meta, chat=chat, top=top)
    return body_json


def _samples(body: Any, sampling: dict[str, Any]) -> list[dict[str, Any]]:
    """The sampling of each of `n` completions: sample i runs with seed + i when a seed is
    given (so the n differ and the request stays repeatable), fresh randomness otherwise."""
    if not isinstance(body.n, int) or isinstance(body.n, bool) or not 1 <= body.n <= _MAX_N:
        message = f"n={body.n!r} must be an int in [1, {_MAX_N}]: completions per prompt"
        raise InvalidArgument(message)
    seed = sampling.get("seed")
    if body.n > 1 and seed is not None and isinstance(seed, int):
        return [{**sampling, "seed": (seed + i) % SEED_LIMIT} for i in range(body.n)]
    return [dict(sampling) for _ in range(body.n)]


def _more_choices(
    service: Service, answer: dict, generations: list[Any], meta: Any, *, chat: bool, top: Any
) -> None:
    # Choices 1..n-1 in the same shape as choice 0; each one's ids and settings in interp.choices.
    for index, generation in enumerate(generations[1:], start=1):
        extra = _completion_body(service, generation, None, chat=chat, top=top)["choices"][0]
        extra["index"] = index
        answer["choices"].append(extra)
    meta["choices"] = [generation_to_json(g) for g in generations]
    usage = answer["usage"]
    usage["completion_tokens"] = sum(len(g.token_ids) for g in generations)
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]


def _completion_body(
    service: Service, generation: Any, meta: Any, *, chat: bool, top: int | None = None
) -> dict:
    tokenizer = service.model.tokenizer
    prompt_n = len(generation.prompt_token_ids)
    usage = {
        "prompt_tokens": prompt_n,
        "completion_tokens": len(generation.token_ids),
        "total_tokens": prompt_n + len(generation.token_ids),
    }
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": generation.text},
            "finish_reason": generation.finish_reason,
            "logprobs": None if top is None else chat_logprobs(tokenizer, generation, top),
        }
        kind, prefix = "chat.completion", "chatcmpl-"
    else:
        choice = {
            "index": 0,
            "text": generation.text,
            "finish_reason": generation.finish_reason,
            "logprobs": None if top is None else completion_logprobs(tokenizer, generation, top),
        }
        kind, prefix = "text_completion", "cmpl-"
    body: dict[str, Any] = {
        "id": prefix + uuid.uuid4().hex,
        "object": kind,
        "created": int(time.time()),
        "model": service.name,
        "choices": [choice],
        "usage": usage,
    }
    if meta is not None:
        body["interp"] = meta
    return body


async def _stream(
    service: Service,
    body: Any,
    tokens: list[list[int]],
    specs: list[Any],
    sampling: dict[str, Any],
    meta: dict[str, Any] | None,
    *,
    chat: bool,
) -> Any:
    steps = service.generate_stream(tokens, specs, **sampling)
    # The first step is awaited before answering, so a refusal (bad sampling, a steering spec
    # that does not fit) is a plain JSON error with its status, not an event inside a 200 stream.
    first = await first_item(steps)
    ident = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    top = requested_logprobs(body, chat=chat)
    offset = [0]  # the completions shape's text_offset runs over the whole stream

    def chunk(step: Any, *, opening: bool = False) -> str:
        logprobs = None
        if top is not None and step is not None and step.token_logprobs is not None:
            tokenizer = service.model.tokenizer
            entries = [step.token_logprobs]
            logprobs = step_logprobs(tokenizer, entries, top, chat=chat, offset=offset[0])
            if not chat:
                offset[0] += sum(len(piece) for piece in logprobs["tokens"])
        if chat:
            delta: dict[str, Any] = {"content": step.text if step is not None else ""}
            if opening:
                delta["role"] = "assistant"
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": logprobs}
        else:
            text = step.text if step is not None else ""
            choice = {"index": 0, "text": text, "logprobs": logprobs}
        choice["finish_reason"] = step.finish_reason if step is not None else None
        data: dict[str, Any] = {
            "id": ident,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created,
            "model": service.name,
            "choices": [choice],
        }
        if meta is not None:
            extra: dict[str, Any] = {"step": None if step is None else step_to_json(step)}
            if opening:
                extra.update(meta)
                extra["prompt_token_ids"] = tokens[0]
            data["interp"] = extra
        return json.dumps(data)

    async def event(step: Any, opening: bool) -> str:
        service.metrics.tokens.inc()
        return chunk(step, opening=opening)

    return sse_response(first, steps, event)
