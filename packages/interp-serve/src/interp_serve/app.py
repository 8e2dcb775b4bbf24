"""The ASGI app: routes, and the guards every request passes first.

In front of the app, the connection layer (`interp_serve.transport`) bounds what reaches it:
head size and field count, head and body deadlines, open connections. Order of the app's
guards, outermost first: metrics (every answer is counted, refusals included), the
body cap (a body over `max_body_bytes` is refused with 413 before it is read in full), then the
API key (401 unless `Authorization: Bearer KEY` matches a configured key; compared in constant
time against every key, and never logged). `/health` needs no key, so a load balancer can probe
it. Errors become `{"error": {...}}` bodies with their status; an unexpected exception becomes a
500 whose body says only that, while the log keeps the traceback; the framework's own refusals
(no such route, a method the route lacks, a body it cannot read) take the same shape. CORS
headers are sent only for the origins the operator configured. The interactive docs pages are
off: the OpenAPI schema is published in the documentation instead.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from interp_core.errors import InterpError, InvalidArgument
from interp_core.protocol import InterpModel
from interp_serve import (
    capture_stream_routes,
    chat_routes,
    interp_routes,
    lens_routes,
    openai_routes,
    readout_routes,
)
from interp_serve.__about__ import __version__
from interp_serve.errors import TooLarge, Unauthorized, status_of
from interp_serve.service import Service
from interp_serve.settings import ServerSettings
from interp_serve.store import owner_of
from interp_serve.wire import error_to_json

__all__ = ["create_app"]

logger = logging.getLogger("interp_serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health", "/neuronpedia/health"})


def create_app(
    model: InterpModel,
    settings: ServerSettings | None = None,
    saes: Mapping[str, Any] | None = None,
) -> FastAPI:
    """An app serving `model` (any backend's `InterpModel`, already loaded), with `saes`
    (name -> `interp_sae.SAE`, see `interp_serve.saes.load_saes`) for features and steering."""
    settings = settings or ServerSettings()
    service = Service(model, settings, saes)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Installed once the server configured its logging, so its config cannot drop it.
        access = logging.getLogger("uvicorn.access")
        access.addFilter(_REDACT)
        try:
            yield
        finally:
            access.removeFilter(_REDACT)
            await service.shutdown()

    app = _routes_app(lifespan)
    app.state.service = service
    # Neuronpedia's inference API (interp_serve.neuronpedia): its own auth, its own shapes.
    from interp_serve import neuronpedia

    secret = neuronpedia.secret_from_env()
    app.mount(neuronpedia.MOUNT, neuronpedia.create_neuronpedia_app(service, secret))
    open_prefix = f"{neuronpedia.MOUNT}/" if secret else None
    _install_error_handlers(app)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(_Guard, service=service, open_prefix=open_prefix)
    return app


def _routes_app(lifespan: Any = None) -> FastAPI:
    """The routes alone: what the OpenAPI schema describes, with no model behind them."""
    app = FastAPI(
        title="interp-serve",
        version=__version__,
        description="interp-engine over HTTP: OpenAI-compatible completions with capture, "
        "steering and lens, and the interp endpoints.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.include_router(openai_routes.router)
    app.include_router(interp_routes.router)
    app.include_router(readout_routes.router)
    app.include_router(chat_routes.router)
    app.include_router(lens_routes.router)
    app.include_router(capture_stream_routes.router)
    return app


def _error(error: BaseException) -> JSONResponse:
    status = status_of(error)
    headers = {}
    retry = getattr(error, "retry_after", None)
    if retry is not None:
        headers["Retry-After"] = str(int(retry))
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(error_to_json(error, status), status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(InterpError)
    async def library(request: Request, error: InterpError) -> JSONResponse:
        return _error(error)

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, error: RequestValidationError) -> JSONResponse:
        return _error(InvalidArgument(_validation_message(error)))

    @app.exception_handler(HTTPException)
    async def framework(request: Request, error: HTTPException) -> JSONResponse:
        # The framework's own refusals (no such route, a method the route lacks, a body it
        # could not parse) in the same shape as every other answer, not FastAPI's {"detail"}.
        if isinstance(error.__cause__, InterpError):  # e.g. the body cap, hit mid-read
            return _error(error.__cause__)
        status = error.status_code
        response = JSONResponse(
            error_to_json(InvalidArgument(_framework_message(request, error)), status),
            status_code=status,
        )
        for name, value in (error.headers or {}).items():  # Allow: on a 405
            response.headers[name] = value
        return response

    @app.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> JSONResponse:
        # The traceback goes to the server's log, never into a response.
        logger.error("unexpected error on %s", request.url.path, exc_info=error)
        message = (
            f"internal server error ({type(error).__name__}); the server's log has the details"
        )
        return JSONResponse(error_to_json(RuntimeError(message), 500), status_code=500)


def _framework_message(request: Request, error: HTTPException) -> str:
    where = f"{request.method} {request.url.path}"
    if error.status_code == 404:
        return (
            f"no route {where} on this server; the routes are listed in the HTTP API reference "
            f"(GET /v1/models, POST /v1/completions, POST /v1/capture, ...)"
        )
    if error.status_code == 405:
        allowed = (error.headers or {}).get("Allow", "")
        return f"{where} is not a method this route takes; it takes {allowed or 'another'}"
    if error.status_code == 400:
        return f"the request body could not be read ({error.detail}); send a JSON object"
    return f"{where}: {error.detail}"


def _validation_message(error: RequestValidationError) -> str:
    problems = []
    for item in error.errors():
        if item.get("type") == "json_invalid":
            return (
                f"the request body is not valid JSON ({item.get('ctx', {}).get('error', '')}); "
                f"send a JSON object"
            )
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        problems.append(f"{where}: {item.get('msg')}")
    return "the request body does not fit this endpoint: " + "; ".join(problems)


class _Guard:
    """Metrics, body cap and API key, as plain ASGI (streams pass through untouched)."""

    def __init__(self, app: ASGIApp, service: Service, open_prefix: str | None = None) -> None:
        self.app = app
        self.service = service
        # Paths that check a credential of their own (the Neuronpedia mount's secret).
        self.open_prefix = open_prefix
        self.keys = tuple(k.encode() for k in service.settings.api_keys)
        self.cap = service.settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.service.metrics
        started = time.perf_counter()
        status_box = [500]
        sent = [0]

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
            elif message["type"] == "http.response.body":
                sent[0] += len(message.get("body", b""))
            await send(message)

        try:
            refusal = self._refusal(scope)
            if refusal is None and _chunked(scope):
                # No length given: read up to the cap here, so the refusal is a 413 too.
                receive, refusal = await self._buffered(receive)
            if refusal is not None:
                # The body (or what is left of it) is unread: end the connection after the
                # answer; the transport drains it first, so the client reads this answer.
                await _send_json(counting_send, refusal, close=_has_body(scope))
            else:
                await self.app(scope, self._capped(receive), counting_send)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            # A mounted app's route path lacks its mount's prefix (the Neuronpedia mount's
            # /v1/tokenize is not ours): the prefix is what the mount added to root_path.
            mount = str(scope.get("root_path", ""))[len(str(scope.get("app_root_path", ""))) :]
            if route is not None and mount:
                name = mount + name
            metrics.requests.labels(name, str(status_box[0])).inc()
            metrics.latency.labels(name).observe(time.perf_counter() - started)
            metrics.bytes_out.labels(name).inc(sent[0])

    def _refusal(self, scope: Scope) -> BaseException | None:
        headers = dict(scope.get("headers") or ())
        if _key_in_query(scope.get("query_string") or b""):
            message = (
                "an API key was sent in the URL's query string, where proxies and access logs "
                "keep it; this server reads keys only from the Authorization header: send "
                "Authorization: Bearer <key>, and rotate the key that was sent"
            )
            return Unauthorized(message)
        given = headers.get(b"authorization", b"")
        token = given[7:] if given[:7].lower() == b"bearer " else b""
        found = None
        for key in self.keys:  # every key, so the time taken says nothing about which
            if hmac.compare_digest(token, key):
                found = key
        # Who the request is: its captures are kept under this name (`store.owner_of`), and
        # /health shows the model's name only to a caller holding a key.
        state = scope.setdefault("state", {})
        state["owner"] = owner_of(found)
        state["authorized"] = found is not None or not self.keys
        path = scope.get("path") or ""
        own_check = self.open_prefix is not None and path.startswith(self.open_prefix)
        exempt = path in OPEN_PATHS or own_check or scope.get("method") == "OPTIONS"
        if self.keys and not exempt:
            if found is None:
                what = "a wrong API key" if token else "no API key"
                message = (
                    f"this server needs an API key, and the request carried {what}; send "
                    f"Authorization: Bearer <key> (api_key= on the OpenAI client or the remote "
                    f"backend)"
                )
                return Unauthorized(message)
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.cap:
            return _too_large(int(length), self.cap)
        return None

    async def _buffered(self, receive: Receive) -> tuple[Receive, BaseException | None]:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.cap:
                return receive, _too_large(size, self.cap)
            if not message.get("more_body", False):
                break
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        return replayed, None

    def _capped(self, receive: Receive) -> Receive:
        seen = [0]
        cap = self.cap

        async def capped() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > cap:
                    raise _too_large(seen[0], cap)
            return message

        return capped


def _has_body(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or ())
    length = headers.get(b"content-length", b"0")
    return b"transfer-encoding" in headers or length.strip() not in (b"", b"0")


# Query parameters a client could have put a key in (never read as one: refused and redacted).
_KEY_PARAMS = frozenset({"api_key", "apikey", "api-key", "key", "token", "access_token"})


def _key_in_query(query: bytes) -> bool:
    names = (part.split(b"=", 1)[0].lower() for part in query.split(b"&") if part)
    return any(name.decode("latin-1") in _KEY_PARAMS for name in names)


def redact_path(path: str) -> str:
    """A request path as the access log may keep it: no activation handle (it is the bearer's
    capability to read a capture) and no query string (a key may have been put there)."""
    path, _, _ = path.partition("?")
    head, sep, _ = path.partition("/v1/activations/")
    return f"{head}{sep}<handle>" if sep else path


class _Redactor(logging.Filter):
    """Rewrites uvicorn's access-log line (client, method, path, version, status) in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_path(args[2]), *args[3:])
        return True


_REDACT = _Redactor()


def _chunked(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or ())
    return b"content-length" not in headers and b"transfer-encoding" in headers


def _too_large(size: int, cap: int) -> TooLarge:
    message = (
        f"the request body is {size:,} bytes, over this server's cap of {cap:,} bytes; send "
        f"less per request (fewer prompts or shorter steering vectors), or ask the operator to "
        f"raise --max-body-bytes"
    )
    return TooLarge(message)


async def _send_json(send: Send, error: BaseException, close: bool = False) -> None:
    response = _error(error)
    headers = list(response.raw_headers)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})
