"""interp-engine as an HTTP service, and the `remote` backend that speaks to it.

`interp serve MODEL` (see `interp_serve.cli`) puts any registered backend behind
OpenAI-compatible completions and chat with an optional `interp` object (capture, steering,
lens, feature steering), plus capture, lens, tokenize and points endpoints, SAE features
(`--sae`, the `sae` extra), activations as safetensors by handle, health and Prometheus metrics.
`create_app(model, settings, saes)` builds the same ASGI app for an already loaded model.
`load_model(url, backend="remote")` (the `client` extra) returns a model
with the library's protocol whose work runs on such a server.
"""

from __future__ import annotations

from interp_serve.__about__ import __version__
from interp_serve.errors import (
    EngineDead,
    HandleNotFound,
    Overloaded,
    RemoteError,
    RequestTimeout,
    StoreFull,
    TooLarge,
    Unauthorized,
)
from interp_serve.settings import ServerSettings

__all__ = [
    "EngineDead",
    "HandleNotFound",
    "Overloaded",
    "RemoteError",
    "RequestTimeout",
    "ServerSettings",
    "StoreFull",
    "TooLarge",
    "Unauthorized",
    "__version__",
    "create_app",
]


def __getattr__(name: str) -> object:
    # FastAPI is imported only by code that builds a server, never by the remote client.
    if name == "create_app":
        from interp_serve.app import create_app

        return create_app
    raise AttributeError(name)
