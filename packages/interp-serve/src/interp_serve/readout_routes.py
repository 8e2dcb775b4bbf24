"""The read-out routes: weight rows, residual decoding, probes, fitted lenses.

* `POST /v1/unembed_rows`, `POST /v1/embed_rows` (JSON `{"token_ids": [...]}`): safetensors with
  one tensor `rows` `[k, d_model]`.
* `POST /v1/decode_residuals` (safetensors: `residuals` `[..., d_model]`, `DecodeMeta` in the
  `interp` metadata): safetensors `logits`, or `ids` and `probs` with `top_k`.
* `POST /v1/project` (safetensors: `vectors.<i>`, optional `bias.<i>`, `ProjectMeta` in the
  metadata): safetensors `values.<i>` `[batch, seq, k]` float32, computed where the activations
  are (in the vLLM workers on vLLM).
* `PUT /v1/lens_jacobians/{name}`: install a fitted lens set, as a safetensors body in our lens
  layout (`J.<layer>` tensors), or as JSON `{"file": ...}` naming a file in the server's lens
  folder (`interp serve --lens-dir`); `DELETE` removes it. A lens for another model is refused
  before anything is held.
* `POST /v1/lens/fitted`: the logit lens through an installed set (`LensSpec(..., jacobian=True)`).

Every tensor body is read with safetensors (nothing in it can run code) and counted against the
server's body cap before it is read. Every engine call goes through `Service`, which checks the
token ids (ints in the vocabulary), caps `top_k` (`--max-top-k`) and prices what the call holds
before it runs: the forward of `project` and of the fitted lens like a capture or a lens
(`--max-forward-bytes`), the logits `decode_residuals` computes for its rows, and every answer
(`rows × d_model` weight rows, `[batch, seq, k]` values) against `--max-capture-bytes` (413).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request, Response

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import DirectionSet, LensSpec, TopTokens
from interp_serve import tensors as tensor_io
from interp_serve.readout_schemas import (
    DecodeMeta,
    FittedLensRequest,
    LensFileRequest,
    ProjectMeta,
    WeightRowsRequest,
)
from interp_serve.service import Service
from interp_serve.wire import lens_to_json

__all__ = ["router"]

router = APIRouter()

SAFETENSORS = "application/octet-stream"
_BINARY = {"schema": {"type": "string", "format": "binary"}}


def _service(request: Request) -> Service:
    return request.app.state.service


def _tensor_body(description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {SAFETENSORS: _BINARY},
        }
    }


_TENSORS_OUT = {200: {"content": {SAFETENSORS: {}}, "description": "safetensors bytes"}}


async def _read_tensors(request: Request) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's tensors (torch) and the JSON of its `interp` metadata key."""
    data = await request.body()
    try:
        meta = tensor_io.metadata(data)
        tensors = await asyncio.to_thread(tensor_io.decode, data, "torch")
    except InvalidArgument:
        raise
    except Exception as error:
        message = f"the body is not a safetensors file ({type(error).__name__}: {error})"
        raise InvalidArgument.build(
            message, None, "send the tensors as safetensors bytes"
        ) from error
    try:
        extra = json.loads(meta.get("interp", "{}"))
    except ValueError as error:
        message = f"the safetensors metadata key 'interp' is not JSON ({error})"
        raise InvalidArgument(message) from error
    if not isinstance(extra, dict):
        message = "the safetensors metadata key 'interp' must hold a JSON object"
        raise InvalidArgument(message)
    return tensors, extra


async def _answer(tensors: dict[str, Any], meta: dict[str, Any] | None = None) -> Response:
    header = {"interp": json.dumps(meta or {})}
    data = await asyncio.to_thread(tensor_io.encode, tensors, header)
    return Response(content=data, media_type=SAFETENSORS)


def _rows_route(which: str, summary: str) -> Any:
    """`POST /v1/<which>`: the weight rows `which` names (`Service.weight_rows`) for the body's
    token ids; the route function is named `which`, as its OpenAPI operation is."""

    async def route(body: WeightRowsRequest, request: Request) -> Response:
        rows = await _service(request).weight_rows(which, body.token_ids, request.is_disconnected)
        return await _answer({"rows": rows}, {"token_ids": body.token_ids})

    route.__name__ = route.__qualname__ = which
    post = router.post(
        f"/v1/{which}", summary=summary, response_class=Response, responses=_TENSORS_OUT
    )
    return post(route)


unembed_rows = _rows_route("unembed_rows", "Rows of the unembedding W_U for token ids")
embed_rows = _rows_route("embed_rows", "Rows of the token embedding W_E for token ids")


@router.post(
    "/v1/decode_residuals",
    summary="Residuals to logits (or top-k) through the model's final norm and unembedding",
    response_class=Response,
    responses=_TENSORS_OUT,
    openapi_extra=_tensor_body(
        "safetensors: `residuals` [..., d_model]; metadata `interp`: JSON {top_k, raw}"
    ),
)
async def decode_residuals(request: Request) -> Response:
    service = _service(request)
    tensors, extra = await _read_tensors(request)
    meta = DecodeMeta.model_validate(extra)
    if set(tensors) != {"residuals"}:
        message = f"decode_residuals takes one tensor named 'residuals', got {sorted(tensors)}"
        raise InvalidArgument(message)
    decoded = await service.decode_residuals(
        tensors["residuals"], meta.top_k, meta.raw, request.is_disconnected
    )
    if isinstance(decoded, TopTokens):
        return await _answer({"ids": decoded.ids, "probs": decoded.probs})
    return await _answer({"logits": decoded})


@router.post(
    "/v1/project",
    summary="Direction sets (probes, SAE encoders) evaluated where the activations are",
    response_class=Response,
    responses=_TENSORS_OUT,
    openapi_extra=_tensor_body(
        "safetensors: `vectors.<i>` [k, width] and optionally `bias.<i>` [k] per set; metadata "
        "`interp`: JSON {tokens, sets: [{point, nonlinearity}], steering}"
    ),
)
async def project(request: Request) -> Response:
    service = _service(request)
    tensors, extra = await _read_tensors(request)
    meta = ProjectMeta.model_validate(extra)
    expected = {f"vectors.{i}" for i in range(len(meta.sets))}
    expected |= {f"bias.{i}" for i in range(len(meta.sets)) if f"bias.{i}" in tensors}
    if set(tensors) != expected:
        message = (
            f"project's tensors are {sorted(tensors)}; the sets need vectors.0..vectors."
            f"{len(meta.sets) - 1} (and optionally bias.<i>), nothing else"
        )
        raise InvalidArgument(message)
    sets = [
        DirectionSet(s.point, tensors[f"vectors.{i}"], tensors.get(f"bias.{i}"), s.nonlinearity)
        for i, s in enumerate(meta.sets)
    ]
    specs = service.specs(meta.steering)
    values = await service.project(meta.tokens, sets, specs, request.is_disconnected)
    return await _answer({f"values.{i}": v for i, v in enumerate(values)})


def _lens_file(service: Service, name: str) -> Path:
    folder = getattr(service.settings, "lens_dir", None)
    if not folder:
        message = "this server holds no lens files (it was started without --lens-dir)"
        raise CapabilityUnsupported.build(
            message, None, "upload the lens as a safetensors body instead"
        )
    if not name or Path(name).name != name or name.startswith("."):
        message = f"{name!r} is not a file name in the server's lens folder (no paths)"
        raise InvalidArgument(message)
    path = Path(folder) / name
    if not path.is_file():
        message = f"the server's lens folder has no file {name!r}"
        raise InvalidArgument(message)
    return path


@router.put(
    "/v1/lens_jacobians/{name}",
    summary="Install a fitted (Jacobian / tuned) lens set under a name",
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "safetensors in the lens layout (one `J.<layer>` [d_model, d_model] "
            "per layer), or JSON {file} naming a file in the server's lens folder",
            "content": {
                SAFETENSORS: _BINARY,
                "application/json": {"schema": LensFileRequest.model_json_schema()},
            },
        }
    },
)
async def set_lens(name: str, request: Request) -> dict[str, Any]:
    service = _service(request)
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    source: Any
    if kind == "application/json":
        try:
            body = LensFileRequest.model_validate_json(await request.body())
        except ValueError as error:
            message = f"the body does not fit this endpoint: {error}"
            raise InvalidArgument(message) from error
        source = str(_lens_file(service, body.file))
    else:
        tensors, _ = await _read_tensors(request)
        source = tensors
    held = await service.set_lens(source, name, request.is_disconnected)
    return {"name": name, "layers": service.lens_sets().get(name, []), "bytes": held}


@router.delete("/v1/lens_jacobians/{name}", summary="Remove a fitted lens set")
async def delete_lens(name: str, request: Request) -> dict[str, Any]:
    await _service(request).set_lens(None, name, request.is_disconnected)
    return {"removed": name}


@router.get("/v1/lens_jacobians", summary="The installed fitted lens sets and their layers")
async def lens_sets(request: Request) -> dict[str, Any]:
    return {"sets": _service(request).lens_sets()}


@router.post("/v1/lens/fitted", summary="Logit lens through an installed fitted lens set")
async def fitted_lens(body: FittedLensRequest, request: Request) -> dict[str, Any]:
    service = _service(request)
    spec = LensSpec(body.layers, jacobian=True, jacobian_set=body.jacobian_set)
    result = await service.logit_lens(
        body.tokens, spec, body.top_k, body.point, request.is_disconnected
    )
    return lens_to_json(result)
