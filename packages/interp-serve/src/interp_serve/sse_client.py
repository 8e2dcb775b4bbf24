"""How the remote backend reads one of the server's event streams (completions, the lens over a
generation, the streamed capture): a POST whose answer is server-sent events of JSON.

`server_events` yields each event's JSON object until `[DONE]`. A refusal before the stream
opens (an HTTP error status) and an error event after it opened (the server's last event when a
call fails mid-stream) both raise the library error the server named; a connection that fails
raises what the caller's `unreachable` makes of it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from interp_serve.wire import error_from_json

__all__ = ["server_events"]

_JSON = {"Content-Type": "application/json"}


async def server_events(
    client: Any,
    path: str,
    body: bytes,
    *,
    raise_for: Callable[[Any], None],
    unreachable: Callable[[Exception], Exception],
) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of `POST path` with `body` on the async httpx `client`."""
    import httpx

    try:
        async with client.stream("POST", path, content=body, headers=_JSON) as response:
            if response.status_code >= 400:
                await response.aread()
                raise_for(response)
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: ") :]
                if payload == "[DONE]":
                    return
                data = json.loads(payload)
                if "error" in data:
                    raise error_from_json(data, int(data["error"].get("code") or 500))
                yield data
    except httpx.TransportError as error:
        raise unreachable(error) from error
