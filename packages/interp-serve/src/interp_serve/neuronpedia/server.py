"""The sub-app mounted at `/neuronpedia`: Neuronpedia's inference-server routes on our Service.

Its answers take the contract's shapes, not ours: a body that does not fit a route's request
schema is a 422 `{"detail": [{loc, msg, type}]}` (FastAPI's validation shape, which the
contract states), and a refusal is `{"error": "..."}` with its status (400 for a request we
cannot serve, 401 for a wrong secret, 413/429/503 from our limits), as Neuronpedia's server
answers. The `model` field is not checked, as there: a server holds one model.

Auth: with `INTERP_NEURONPEDIA_SECRET` set, every route but `/health` needs that value in the
`X-SECRET-KEY` header (compared in constant time, never logged), and the outer app lets these
paths past its Bearer-key check. Without it, the outer app's API keys guard these routes too.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from interp_core.errors import CapabilityUnsupported, InterpError
from interp_serve.errors import status_of
from interp_serve.neuronpedia import (
    activations,
    chat_template,
    contract,
    lens,
    readouts,
    steer,
    utilities,
)
from interp_serve.service import Service

__all__ = ["MOUNT", "SECRET_ENV", "create_neuronpedia_app", "secret_from_env"]

MOUNT = "/neuronpedia"
SECRET_ENV = "INTERP_NEURONPEDIA_SECRET"

logger = logging.getLogger("interp_serve.neuronpedia")

Handler = Callable[[Service, dict[str, Any], Any], Awaitable[Any]]


def _batched(single: Handler) -> Handler:
    """A batch route: the single route once per prompt, its answers in order."""

    async def batch(service: Service, body: dict[str, Any], gone: Any) -> dict[str, Any]:
        rest = {k: v for k, v in body.items() if k != "prompts"}
        results = [await single(service, {**rest, "prompt": p}, gone) for p in body["prompts"]]
        return {"results": results}

    return batch


SERVED: dict[str, Handler] = {
    "/v1/activation/single": activations.activation_single,
    "/v1/activation/single-batch": _batched(activations.activation_single),
    "/v1/activation/all": activations.activation_all,
    "/v1/activation/all-batch": _batched(activations.activation_all),
    "/v1/activation/topk-by-token": activations.topk_by_token,
    "/v1/activation/topk-by-token-batch": _batched(activations.topk_by_token),
    "/v1/activation/source": readouts.activation_source,
    "/v1/activation/raw": readouts.activation_raw,
    "/v1/activation/attention": readouts.activation_attention,
    "/v1/steer/completion": steer.completion,
    "/v1/steer/completion-chat": steer.chat_completion,
    "/v1/tokenize": utilities.tokenize,
    "/v1/apply-chat-template": chat_template.apply_chat_template,
    "/v1/lens/prompt": lens.lens_prompt,
    "/v1/util/sae-vector": utilities.sae_vector,
    "/v1/util/sae-topk-by-decoder-cossim": utilities.decoder_cossim,
}

# The contract's routes this server answers with a refusal, and why.
REFUSED: dict[str, str] = {
    "/v1/util/similarity-matrix-pred": "it needs temporal SAEs, which interp-sae does not load",
}


def secret_from_env() -> str | None:
    return os.environ.get(SECRET_ENV) or None


def _refusal(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _problems_json(found: list[contract.Problem]) -> JSONResponse:
    detail = [{"loc": ["body", *where], "msg": msg, "type": kind} for where, msg, kind in found]
    return JSONResponse({"detail": detail}, status_code=422)


def create_neuronpedia_app(service: Service, secret: str | None = None) -> FastAPI:
    """Neuronpedia's inference API over `service`; `secret` is the `X-SECRET-KEY` value."""
    app = FastAPI(
        title="interp-serve: Neuronpedia inference API",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.secret = secret
    expected = secret.encode() if secret else None

    @app.middleware("http")
    async def check_secret(request: Request, call_next: Any) -> Response:
        if expected is None or _is_root_health(request):
            return await call_next(request)
        given = request.headers.get("x-secret-key", "").encode()
        if not hmac.compare_digest(given, expected):
            return _refusal("Invalid or missing X-SECRET-KEY header", 401)
        return await call_next(request)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/v1/capabilities")
    async def capabilities() -> dict[str, Any]:
        return utilities.capabilities(service, sorted(SERVED), REFUSED)

    @app.get("/v1/steer/health")
    async def steer_health() -> dict[str, Any]:
        return utilities.steer_health(service)

    @app.post("/initialize")
    async def initialize(custom_hf_model_id: str | None = None) -> Any:
        # Neuronpedia's server loads its model on this call; ours loaded it at start, so the
        # call has nothing to do unless it names another model, which needs a restart.
        return utilities.initialize(service, custom_hf_model_id)

    for path, handler in SERVED.items():
        app.add_api_route(path, _route(service, path, handler), methods=["POST"])
    for path, why in REFUSED.items():
        app.add_api_route(path, _refused(path, why), methods=["POST"])

    @app.exception_handler(HTTPException)
    async def framework(request: Request, error: HTTPException) -> JSONResponse:
        # The framework's own refusals (no such route, a method the route lacks) in the
        # contract's error shape, not FastAPI's {"detail": "..."}.
        where = f"{request.method} {request.url.path}"
        if error.status_code == 404:
            routes = ", ".join(sorted([*SERVED, "/v1/capabilities", "/health"]))
            message = f"no route {where} in Neuronpedia's API; the served routes: {routes}"
        elif error.status_code == 405:
            allowed = (error.headers or {}).get("Allow")
            message = f"{where} is not a method this route takes; it takes {allowed or 'another'}"
        else:
            message = f"{where}: {error.detail}"
        response = _refusal(message, error.status_code)
        for name, value in (error.headers or {}).items():
            response.headers[name] = value
        return response

    return app


def _is_root_health(request: Request) -> bool:
    # Mounted, the path the sub-app sees still carries the mount prefix in `url.path`.
    return request.url.path in ("/health", f"{MOUNT}/health")


def _route(service: Service, path: str, handler: Handler) -> Callable[[Request], Awaitable[Any]]:
    schema = contract.request_schema(path)
    assert schema is not None, path

    async def route(request: Request) -> Any:
        try:
            body = json.loads(await request.body())
        except ValueError as error:
            found = [((), f"the body is not JSON ({error})", "json_invalid")]
            return _problems_json(found)
        found = contract.problems(body, schema)
        if found:
            return _problems_json(found)
        body = contract.apply_defaults(body, schema)
        try:
            answer = await handler(service, body, request.is_disconnected)
        except InterpError as error:
            status = status_of(error)
            return _refusal(str(error), 400 if status == 422 else status)
        except Exception as error:
            logger.error("unexpected error on %s", path, exc_info=error)
            name = type(error).__name__
            return _refusal(f"internal server error ({name}); the server's log has it", 500)
        if isinstance(answer, Response):  # a stream or status the handler shaped itself
            return answer
        if hasattr(answer, "__aiter__"):
            return StreamingResponse(answer, media_type="text/event-stream")
        return JSONResponse(answer)

    route.__name__ = "neuronpedia_" + path.strip("/").replace("/", "_").replace("-", "_")
    return route


def _refused(path: str, why: str) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def route(request: Request) -> JSONResponse:
        error = CapabilityUnsupported(f"POST {path} is not served by interp-serve: {why}")
        return _refusal(str(error), 400)

    route.__name__ = "neuronpedia_refused_" + path.strip("/").replace("/", "_").replace("-", "_")
    return route
