"""`POST /v1/capture/stream`: a generation's captures as server-sent events while it runs.

The request is `/v1/capture`'s with `generate` (what the generation samples with). The answer
is an SSE stream with one event per `CaptureChunk` of the backend's
`capture_generation_stream`: `{"start", "stop", "steps": [step...], "tensors": base64 of the
chunk's rows as safetensors, "generation": the finished generation on the last event}`, then
`data: [DONE]`. Rows travel inside the events instead of as a handle, so nothing is kept in the
server's store and the client reads each chunk as it arrives. The first chunk is awaited before
the 200 goes out, so a refusal (a point that cannot be streamed, a bad knob) is a plain JSON
error with its status; a failure after that is the stream's last event, in the error shape.

The capture is priced at the longest the generation can run, as `/v1/capture` prices one, and
the stream holds one of the engine's slots until it ends or the client leaves.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from interp_serve import tensors as tensor_io
from interp_serve.event_streams import first_item, sse_response
from interp_serve.schemas import _STRICT, _TOKENS, GenerateOptions
from interp_serve.service import Service
from interp_serve.wire import generation_to_json, step_to_json

__all__ = ["CaptureStreamRequest", "router"]

router = APIRouter()


class CaptureStreamRequest(BaseModel):
    model_config = _STRICT
    tokens: list[Any] = Field(description=_TOKENS)
    points: list[str] = Field(description="addresses to capture, e.g. resid_post.3")
    steering: list[dict[str, Any]] = Field(default_factory=list, description="steering specs")
    generate: GenerateOptions = Field(
        default_factory=GenerateOptions, description="{max_new_tokens, temperature, seed}"
    )


def chunk_to_json(chunk: Any) -> dict[str, Any]:
    tensors = {str(address): tensor for address, tensor in chunk.tensors.items()}
    encoded = tensor_io.encode(tensors) if tensors else b""
    return {
        "start": chunk.start,
        "stop": chunk.stop,
        "steps": [step_to_json(step) for step in chunk.steps],
        "tensors": base64.b64encode(encoded).decode("ascii"),
        "generation": None if chunk.generation is None else generation_to_json(chunk.generation),
    }


@router.post(
    "/v1/capture/stream",
    summary="A captured generation whose rows arrive as server-sent events while it runs",
    responses={200: {"content": {"text/event-stream": {}}, "description": "one event a chunk"}},
)
async def capture_stream(body: CaptureStreamRequest, request: Request) -> Any:
    service: Service = request.app.state.service
    specs = service.specs(body.steering)
    options = body.generate.model_dump()
    chunks = service.capture_generation_stream(body.tokens, body.points, specs, **options)
    first = await first_item(chunks)

    async def event(chunk: Any, _opening: bool) -> str:
        service.metrics.tokens.inc(len(chunk.steps))
        return await _encoded(chunk)

    return sse_response(first, chunks, event)


async def _encoded(chunk: Any) -> str:
    # Encoding copies the rows; off the event loop, as the other routes encode tensors.
    return await asyncio.to_thread(lambda: json.dumps(chunk_to_json(chunk)))
