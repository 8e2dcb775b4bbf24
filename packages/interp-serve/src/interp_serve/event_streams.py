"""The server-sent-event answers of the streaming routes, written once.

A streaming route awaits its stream's first item before it answers (`first_item`), so a refusal
(bad sampling, a steering spec that does not fit, a point that cannot be streamed) is a plain
JSON error with its status rather than an event inside a 200 stream. `sse_response` then sends
every item as one `data:` event; an error after the 200 has gone out is the last event, in the
error shape, and the stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from interp_serve.errors import status_of
from interp_serve.wire import error_to_json

__all__ = ["first_item", "sse_response"]


async def first_item(items: AsyncIterator[Any]) -> Any:
    """The first of `items`, or None when there is none; `items` is closed when that fails."""
    try:
        return await anext(items)
    except StopAsyncIteration:
        return None
    except BaseException:
        await items.aclose()
        raise


def sse_response(
    first: Any, rest: AsyncIterator[Any], event: Callable[[Any, bool], Awaitable[str]]
) -> StreamingResponse:
    """`first` (unless None) and then `rest` as server-sent events; `event(item, opening)` is
    one item's data (`opening` is true for `first`). `rest` is closed when the stream ends."""

    async def events() -> AsyncIterator[str]:
        try:
            if first is not None:
                yield f"data: {await event(first, True)}\n\n"
            async for item in rest:
                yield f"data: {await event(item, False)}\n\n"
        except Exception as error:  # after the 200 has gone out, the error is the last event
            yield f"data: {json.dumps(error_to_json(error, status_of(error)))}\n\n"
        finally:
            await rest.aclose()
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
