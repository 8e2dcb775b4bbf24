"""How does the remote backend read a captured generation streamed by the server?

`POST /v1/capture/stream` answers with one server-sent event per chunk
(`interp_serve.capture_stream_routes`): the generated steps, the rows as base64 safetensors
and, on the last one, the generation. Each event becomes the same `CaptureChunk` the server's
backend yielded, as soon as it arrives.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from interp_core.address import Address, to_address
from interp_core.capture_stream import CaptureChunk
from interp_core.model_base import StreamCall
from interp_serve import tensors as tensor_io
from interp_serve.wire import (
    generation_from_json,
    nested_ids,
    step_from_json,
)

__all__ = ["stream_capture"]


async def stream_capture(
    model: Any,  # a RemoteModel
    tokens: Any,
    points: Sequence[Any],
    call: StreamCall,
) -> AsyncIterator[CaptureChunk]:
    """Chunks as the server's events arrive; the knobs of `capture_generation` only (the HTTP
    route samples as `/v1/capture` does), others refused by the server's schema."""

    body = {
        "tokens": nested_ids(tokens),
        "points": [str(to_address(p)) for p in points],
        "steering": model._steering(call.steering),
        "generate": call.sampling,
    }
    async for data in model._events("/v1/capture/stream", json.dumps(body).encode()):
        yield _chunk(data, model._tensor_type)


def _chunk(data: dict[str, Any], tensor_type: str) -> CaptureChunk:
    raw = base64.b64decode(data["tensors"])
    tensors = tensor_io.decode(raw, tensor_type) if raw else {}
    generation = data.get("generation")
    return CaptureChunk(
        start=int(data["start"]),
        stop=int(data["stop"]),
        tensors={Address.parse(key): value for key, value in tensors.items()},
        steps=[step_from_json(step) for step in data["steps"]],
        generation=None if generation is None else generation_from_json(generation),
    )
