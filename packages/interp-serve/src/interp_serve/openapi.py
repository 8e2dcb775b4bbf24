"""The HTTP API's OpenAPI schema, committed next to the code as `openapi.json`.

The running server publishes no schema route; the committed file is what the documentation's
HTTP API page is generated from (so the docs build needs no FastAPI), and the suite checks that
it equals what the routes produce. After changing a route or a request model, rewrite it:

    python -m interp_serve.openapi --write
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_PATH", "render", "schema"]

SCHEMA_PATH = Path(__file__).with_name("openapi.json")


def schema() -> dict[str, Any]:
    """The schema the routes produce now."""
    from fastapi.openapi.utils import get_openapi

    from interp_serve.app import _routes_app

    app = _routes_app()
    spec = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    # The server answers a malformed body with 400 and the error body below, never FastAPI's 422.
    schemas = spec["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Error"] = ERROR_SCHEMA
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            responses = operation["responses"]
            responses.pop("422", None)
            if path in STREAMING_PATHS:
                # With "stream": true the 200 is server-sent events, not one JSON body.
                ok = responses["200"]
                ok["description"] = "JSON, or with stream: true server-sent events"
                ok["content"]["text/event-stream"] = {}
            if path in EVENT_STREAM_PATHS:
                # Always server-sent events (one per step, then [DONE]); refusals stay JSON.
                responses["200"]["content"] = {"text/event-stream": {"schema": {"type": "string"}}}
            for status in _statuses(path):
                responses.setdefault(
                    status,
                    {
                        "description": ERROR_STATUSES[status],
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                )
    return spec


# The routes whose answer is a stream of server-sent events when the body asks for one.
STREAMING_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
# The routes whose 200 is always a stream of server-sent events.
EVENT_STREAM_PATHS = frozenset({"/v1/lens/generate"})

# Every error answer, whatever the route: its status and what it means.
ERROR_STATUSES = {
    "400": "a refusal by the library (type: its interp_core.errors class) or a malformed body",
    "401": "no API key, or a wrong one",
    "404": "an activation handle that expired, was deleted or never existed",
    "413": "a body, capture or store budget over its cap (the message names size and cap)",
    "429": "every slot busy and the queue full; retry after the Retry-After header's seconds",
    "503": "the model's engine died (GET /health says why)",
    "504": "the request ran past the server's per-request deadline",
}

ERROR_SCHEMA = {
    "type": "object",
    "title": "Error",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "what, why, and what to do instead"},
                "type": {
                    "type": "string",
                    "description": "its class, from interp_core.errors or interp_serve.errors",
                },
                "code": {"type": "integer", "description": "the HTTP status"},
                "param": {"type": "null"},
            },
            "required": ["message", "type", "code"],
        }
    },
    "required": ["error"],
}


def _statuses(path: str) -> list[str]:
    if path == "/health":
        return ["503"]
    statuses = ["400", "401", "413", "429", "503", "504"]
    if path.startswith("/v1/activations"):
        statuses = ["401", "404"]
    elif path in ("/v1/models", "/v1/points", "/metrics"):
        statuses = ["401"]
    return statuses


def render() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--write" in argv:
        SCHEMA_PATH.write_text(text)
        return 0
    if SCHEMA_PATH.read_text() != text:
        print(f"{SCHEMA_PATH} is stale: run python -m interp_serve.openapi --write")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
