"""The interp routes: capture, lens, tokens, points, activations by handle, health, metrics."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request, Response

from interp_core.errors import InvalidArgument
from interp_core.points import POINTS, Scope
from interp_serve.errors import HandleNotFound
from interp_serve.saes import sae_rows
from interp_serve.schemas import (
    CaptureRequest,
    DetokenizeRequest,
    FeaturesRequest,
    LensRequest,
    SupportsRequest,
    TokenizeRequest,
)
from interp_serve.service import Service
from interp_serve.wire import (
    facts_to_json,
    generation_to_json,
    lens_to_json,
    nested_ids,
    support_to_json,
)

__all__ = ["router"]

router = APIRouter()

SAFETENSORS = "application/octet-stream"
# The answer of a route that takes `direct`.
_JSON_OR_TENSORS: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {SAFETENSORS: {}},
        "description": "JSON, or with direct: true the safetensors bytes",
    }
}


def _service(request: Request) -> Service:
    return request.app.state.service


async def _tensors_answer(
    request: Request,
    body: CaptureRequest | FeaturesRequest,
    tensors: Any,
    positions: dict[str, Any],
    extra: dict[str, Any],
) -> Any:
    """A route's tensors: with `direct`, the safetensors bytes (positions and `extra` in their
    metadata); else kept under a handle or inlined, beside `extra`."""
    service = _service(request)
    if body.direct:
        data = await service.direct(tensors, {"positions": positions, **extra})
        return Response(content=data, media_type=SAFETENSORS)
    kept = await service.keep(tensors, body.inline, positions, request.state.owner)
    return {"interp": kept, **extra}


@router.post(
    "/v1/capture",
    summary="One forward pass (or a generation) with captures",
    responses=_JSON_OR_TENSORS,
)
async def capture(body: CaptureRequest, request: Request) -> Any:
    service = _service(request)
    specs = service.specs(body.steering)
    inputs = service.call_inputs(body.prompt_embeds, body.lora)
    extra: dict[str, Any] = {}
    if body.generate is not None and body.rows is not None:
        message = "rows with generate: a captured generation returns every row"
        raise InvalidArgument.build(
            message,
            "rows= selects positions of a forward over tokens that are known up front",
            "capture without rows and slice it, or stream it with /v1/capture/stream",
        )
    if body.generate is not None:
        generation, cache = await service.capture_generation(
            body.tokens,
            body.points,
            specs,
            request.is_disconnected,
            inputs,
            **body.generate.model_dump(),
        )
        prompt = len(generation.prompt_token_ids)
        positions = {
            "prompt": [0, prompt],
            "generated": [prompt, prompt + len(generation.token_ids) - 1],
        }
        extra["generation"] = generation_to_json(generation)
    else:
        cache = await service.capture(
            body.tokens,
            body.points,
            specs,
            body.attention_mask,
            request.is_disconnected,
            inputs,
            rows=body.rows,
        )
        first = next(iter(cache.values()), None)
        seq = int(first.shape[1]) if first is not None and len(first.shape) > 1 else None
        positions = {"prompt": [0, seq]} if seq is not None else {}
        if body.rows is not None:
            positions = {"rows": body.rows}
    return await _tensors_answer(request, body, cache, positions, extra)


@router.post(
    "/v1/features",
    summary="Top-k SAE features per token, encoded next to the capture",
    responses=_JSON_OR_TENSORS,
)
async def features(body: FeaturesRequest, request: Request) -> Any:
    service = _service(request)
    if (body.tokens is None) == (body.text is None):
        message = "give the prompt as tokens (ids) or as text, exactly one of them"
        raise InvalidArgument(message)
    tokens = body.tokens if body.tokens is not None else await service.tokenize(body.text)
    specs = service.specs(body.steering, body.features, body.clamp)
    names, results = await service.features(
        tokens, body.saes, body.top_k, specs, request.is_disconnected
    )
    tensors = {}
    for name, result in zip(names, results, strict=True):
        tensors[f"{name}.indices"] = result.top.indices
        tensors[f"{name}.values"] = result.top.values
    first = next(iter(tensors.values()))
    seq = int(first.shape[1]) if len(first.shape) > 2 else int(first.shape[0])
    described = {row["name"]: row for row in sae_rows({n: service.saes[n] for n in names})}
    extra = {"top_k": body.top_k, "saes": described, "tokens": nested_ids(tokens)}
    return await _tensors_answer(request, body, tensors, {"prompt": [0, seq]}, extra)


@router.get("/v1/saes", summary="The SAEs this server loaded at start (--sae)")
async def saes(request: Request) -> dict[str, Any]:
    return {"saes": sae_rows(_service(request).saes)}


@router.get(
    "/v1/activations/{handle}",
    summary="A capture's tensors as safetensors bytes",
    response_class=Response,
    responses={200: {"content": {SAFETENSORS: {}}}, 404: {"description": "expired or unknown"}},
)
async def activations(handle: str, request: Request) -> Response:
    data = _service(request).fetch(handle, request.state.owner)
    if data is None:
        raise _missing(handle)
    return Response(content=data, media_type=SAFETENSORS)


@router.delete("/v1/activations/{handle}", summary="Free a capture before it expires")
async def delete_activations(handle: str, request: Request) -> dict[str, Any]:
    if not _service(request).drop(handle, request.state.owner):
        raise _missing(handle)
    return {"deleted": handle}


def _missing(handle: str) -> HandleNotFound:
    # The same answer for another key's handle as for one that never existed.
    message = (
        f"no activations under handle {handle!r} for this API key: it expired, was deleted, "
        f"belongs to another key, or never existed; "
        f"capture again (handles live for the time the capture response's expires_in says)"
    )
    return HandleNotFound(message)


@router.post("/v1/lens", summary="Logit lens")
async def lens(body: LensRequest, request: Request) -> dict[str, Any]:
    result = await _service(request).logit_lens(
        body.tokens, body.layers, body.top_k, body.point, request.is_disconnected
    )
    return lens_to_json(result)


@router.post(
    "/v1/tokenize",
    summary="Text to token ids (and token strings)",
    response_class=Response,
    responses={200: {"content": {"application/json": {}}}},
)
async def tokenize(body: TokenizeRequest, request: Request) -> Response:
    service = _service(request)
    answer: dict[str, Any] = {}
    if body.text is not None:
        answer["tokens"] = await service.tokenize(body.text, body.prepend_bos)
    if body.str_tokens:
        source = body.text if body.text is not None else body.tokens
        answer["str_tokens"] = await service.str_tokens(source, body.prepend_bos)
    return Response(await service.json_bytes(answer), media_type="application/json")


@router.post("/v1/detokenize", summary="Token ids to text")
async def detokenize(body: DetokenizeRequest, request: Request) -> dict[str, Any]:
    return {"text": await _service(request).detokenize(body.tokens)}


@router.post("/v1/supports", summary="Whether each address can be captured here, and why not")
async def supports(body: SupportsRequest, request: Request) -> dict[str, Any]:
    model = _service(request).model
    return {"verdicts": [support_to_json(model.supports(point)) for point in body.points]}


@router.get("/v1/points", summary="Model facts and every point: served or refused, and why")
async def points(request: Request) -> dict[str, Any]:
    service = _service(request)
    model = service.model
    facts = model.facts
    rows = []
    for name, spec in POINTS.items():
        if spec.scope is Scope.TRUNK:
            verdict = model.supports(name)
            rows.append(
                {
                    "point": name,
                    "scope": "trunk",
                    "served": bool(verdict),
                    "served_layers": [],
                    "refused": [] if verdict else [_refusal(None, verdict)],
                }
            )
            continue
        served, refused = [], []
        for layer in range(facts.n_layers):
            verdict = model.supports((name, layer))
            if verdict:
                served.append(layer)
            else:
                refused.append(_refusal(layer, verdict))
        rows.append(
            {
                "point": name,
                "scope": spec.scope.name.lower(),
                "served": bool(served),
                "served_layers": served,
                "refused": _grouped(refused),
            }
        )
    return {
        "model": service.name,
        "model_id": model.model_id,
        "backend": model.backend_name,
        "n_layers": model.n_layers,
        "d_model": model.d_model,
        "served_points": [spec.name for spec in model.points()],
        "facts": facts_to_json(facts),
        "points": rows,
    }


def _refusal(layer: int | None, verdict: Any) -> dict[str, Any]:
    return {
        "layers": [] if layer is None else [layer],
        "reason": verdict.reason,
        "instead": verdict.instead,
    }


def _grouped(refused: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per distinct reason, listing its layers (a router reads a short list)."""
    groups: dict[tuple[Any, Any], dict[str, Any]] = {}
    for item in refused:
        key = (item["reason"], item["instead"])
        if key in groups:
            groups[key]["layers"].extend(item["layers"])
        else:
            groups[key] = dict(item, layers=list(item["layers"]))
    return list(groups.values())


@router.get("/health", summary="Liveness: 200 while the engine serves, 503 once it died")
async def health(request: Request) -> Response:
    service = _service(request)
    engine = service.engine
    body = {
        "status": "ok" if engine.dead is None else "dead",
        "backend": service.backend_name,
        "running": engine.running,
        "queued": engine.waiting,
        "reason": engine.dead,
    }
    if request.state.authorized:
        # The served name defaults to the model's path: shown only to a caller with a key.
        body["model"] = service.name
    status = 200 if engine.dead is None else 503
    return Response(json.dumps(body), status_code=status, media_type="application/json")


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(_service(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)
