"""Neuronpedia's steered completions over the Service: STEERED and DEFAULT side by side.

A feature steers along its SAE's decoder row at the point the SAE writes; a raw vector steers at
its TransformerLens hook's address. The three methods are our three steering ops, at every
position: SIMPLE_ADDITIVE adds `strength × strengthMultiplier × vector` (`add`),
ORTHOGONAL_DECOMP rescales the component along the vector by that coefficient (`orthogonal`),
PROJECTION_CAP caps the component at it (`projection_cap`, `max`). `normalizeSteering` makes
the vector unit-length first. DEFAULT is the same generation with no steering at all, so the
two outputs differ only by the steering.

Streaming (`stream: true`) sends, after each generated token, the whole response so far as one
SSE `data:` frame, as Neuronpedia's server does: the outputs of the types not started yet are
empty. A refusal after the stream started (the engine died, the request timed out) is its last
frame, `{"error": "..."}`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from interp_core.errors import InterpError, InvalidArgument
from interp_core.steering import SteeringSpec
from interp_serve.neuronpedia.sources import pick_source
from interp_serve.service import Gone, Service

__all__ = ["chat_completion", "completion", "steering_specs"]

_OPS = {"SIMPLE_ADDITIVE": "add", "ORTHOGONAL_DECOMP": "orthogonal", "PROJECTION_CAP": "cap"}


def steering_specs(service: Service, body: dict[str, Any]) -> list[SteeringSpec]:
    """The request's features and vectors as our steering specs, in that order."""
    import torch
    from interp_sae.hooks import address_for_tl_hook

    method = _OPS[body["steerMethod"]]
    multiplier = float(body["strengthMultiplier"])
    skip_special = not body.get("steerSpecialTokens", True)
    targets: list[tuple[Any, Any, float]] = []
    for feature in body.get("features") or ():
        sae = pick_source(service.saes, feature["source"])
        row = sae.decoder_row(feature["index"])
        targets.append((sae.write_address, row, float(feature["strength"])))
    for vector in body.get("vectors") or ():
        direction = torch.tensor(vector["steeringVector"], dtype=torch.float32)
        targets.append((address_for_tl_hook(vector["hook"]), direction, float(vector["strength"])))
    specs = []
    for address, direction, strength in targets:
        if body["normalizeSteering"]:
            norm = float(direction.norm())
            if norm == 0.0:
                message = (
                    f"normalizeSteering cannot scale the zero vector steering at {address} to "
                    f"unit length; send a nonzero vector, or normalizeSteering: false"
                )
                raise InvalidArgument(message)
            direction = direction / norm
        coefficient = strength * multiplier
        if method == "cap":
            spec = SteeringSpec(
                address, direction, "projection_cap", max=coefficient, skip_special=skip_special
            )
        else:
            spec = SteeringSpec(address, direction, method, coefficient, skip_special=skip_special)
        specs.append(spec)
    if "STEERED" in body["types"] and not specs:
        message = (
            "types asks for STEERED output, but the request has no features and no vectors to "
            'steer with; send some, or ask for types: ["DEFAULT"] only'
        )
        raise InvalidArgument(message)
    return specs


def _sampling(body: dict[str, Any]) -> dict[str, Any]:
    seed = body["seed"]
    if seed != int(seed):
        message = f"seed={seed!r} is not a whole number; send an integer seed"
        raise InvalidArgument(message)
    return {
        "max_new_tokens": body["nCompletionTokens"],
        "temperature": float(body["temperature"]),
        "seed": int(seed),
        "frequency_penalty": float(body["freqPenalty"]),
        "n_logprobs": int(body.get("nLogprobs") or 0),
        # The request's knobs are the whole sampling, as on Neuronpedia's server.
        "use_generation_config": False,
    }


async def _logprobs(service: Service, generation: Any) -> list[dict[str, Any]] | None:
    if not generation.logprobs:
        return None
    wanted = sorted(
        {p.token_id for p in generation.logprobs}
        | {t for p in generation.logprobs for t, _ in p.top}
    )
    strings = dict(zip(wanted, await service.str_tokens(wanted), strict=True))
    return [
        {
            "token": strings[p.token_id],
            "logprob": p.logprob,
            "topLogprobs": [{"token": strings[t], "logprob": lp} for t, lp in p.top],
        }
        for p in generation.logprobs
    ]


async def _run(
    service: Service, ids: list[int], specs: list[SteeringSpec], body: dict[str, Any], gone: Gone
) -> dict[str, tuple[str, Any]]:
    """Each asked type's (text, logprobs), generated one after the other."""
    done: dict[str, tuple[str, Any]] = {}
    for kind in body["types"]:
        steering = specs if kind == "STEERED" else []
        generation = await service.generate([ids], steering, gone, **_sampling(body))
        done[kind] = (generation.text, await _logprobs(service, generation))
    return done


def _check_stream(body: dict[str, Any]) -> None:
    """Refuse, before the stream starts, what a stream cannot carry."""
    _sampling(body)
    if body.get("nLogprobs"):
        message = (
            "nLogprobs with stream: true is not served here (a frame carries text only); ask "
            "without stream for logprobs, or with nLogprobs: 0"
        )
        raise InvalidArgument(message)


def _frame(answer: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(answer)}\n\n".encode()


async def _stream(
    service: Service,
    ids: list[int],
    specs: list[SteeringSpec],
    body: dict[str, Any],
    shape: Any,
) -> AsyncIterator[bytes]:
    texts = dict.fromkeys(body["types"], "")
    sampling = _sampling(body)
    try:
        for kind in body["types"]:
            steering = specs if kind == "STEERED" else []
            async for step in service.generate_stream([ids], steering, **sampling):
                texts[kind] += step.text
                yield _frame(shape({k: (t, None) for k, t in texts.items()}))
    except InterpError as error:
        # The status line has gone out: a refusal mid-stream is the stream's last frame.
        yield _frame({"error": str(error)})


async def completion(service: Service, body: dict[str, Any], gone: Gone) -> Any:
    specs = steering_specs(service, body)
    ids = (await service.tokenize(body["prompt"]))[0]

    def shape(done: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        outputs = []
        for kind in body["types"]:
            text, logprobs = done[kind]
            entry: dict[str, Any] = {"type": kind, "output": text}
            if logprobs is not None:
                entry["logprobs"] = logprobs
            outputs.append(entry)
        return {"outputs": outputs}

    if body.get("stream"):
        _check_stream(body)
        return _stream(service, ids, specs, body, shape)
    return shape(await _run(service, ids, specs, body, gone))


async def chat_completion(service: Service, body: dict[str, Any], gone: Gone) -> Any:
    specs = steering_specs(service, body)
    if body.get("isAssistantAxis"):
        message = (
            "isAssistantAxis (persona monitoring along the assistant axis) is not served here: "
            "it needs Neuronpedia's persona data for the model; send isAssistantAxis: false"
        )
        raise InvalidArgument(message)
    messages = [{"role": m["role"], "content": m["content"]} for m in body["prompt"]]
    ids = (await service.chat_ids(messages))[0]
    rendered = await service.detokenize(ids)

    def shape(done: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        outputs = []
        for kind in body["types"]:
            text, logprobs = done[kind]
            reply = [*messages, {"role": "assistant", "content": text}]
            entry: dict[str, Any] = {"type": kind, "chatTemplate": reply, "raw": rendered + text}
            if logprobs is not None:
                entry["logprobs"] = logprobs
            outputs.append(entry)
        return {"outputs": outputs, "input": {"chatTemplate": messages, "raw": rendered}}

    if body.get("stream"):
        _check_stream(body)
        return _stream(service, ids, specs, body, shape)
    return shape(await _run(service, ids, specs, body, gone))
