"""`POST /v1/lens/generate`: the lens over a generation, streamed as server-sent events.

The body (`LensGenerateRequest`) names one prompt, the lenses (`{"layers", "jacobian",
"jacobian_set"}` objects, or strings: `"logit"` or an installed fitted set's name), `top_n`, the
point, `max_new_tokens`, `skip_before`, an optional word mask (one boolean per token id), the
steering specs and the sampling knobs. Each event is one step (`step_to_json`): `position`,
`token_id`, `is_generated`, `next_token_id`, `finish_reason`, and per lens `top_ids` /
`top_probs` as `[n_layers][top_n]` lists; the stream ends with `data: [DONE]`.

The first step is awaited before the answer starts, so a refusal (an unknown lens, a point the
lens cannot read, `top_n` over the server's cap) is a JSON error with its status rather than an
event in a 200 stream; an error after that is the last event. Every call goes through `Service`,
which caps `top_n` and prices the generation's forward before it runs.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from interp_core.lens_generation import LensStep
from interp_core.readouts import LensSpec
from interp_serve.event_streams import first_item, sse_response
from interp_serve.service import Service

__all__ = ["LensGenerateRequest", "lens_from_json", "router", "step_from_json", "step_to_json"]

router = APIRouter()


class LensGenerateRequest(BaseModel):
    """One lens over a generation."""

    model_config = ConfigDict(extra="forbid")
    tokens: list[Any] = Field(description="token ids of one prompt")
    lenses: list[Any] = Field(
        description='per lens {"layers", "jacobian", "jacobian_set"}, "logit", or a set name'
    )
    top_n: Any = 10
    point: Any = "resid_post"
    max_new_tokens: Any = 16
    skip_before: Any = 0
    word_mask: list[Any] | None = Field(None, description="one boolean per token id, or null")
    steering: list[dict[str, Any]] = Field(default_factory=list, description="steering specs")
    temperature: Any = None
    top_k: Any = None
    top_p: Any = None
    seed: Any = None


def lens_to_json(lens: Any) -> Any:
    if isinstance(lens, LensSpec):
        layers = None if lens.layers is None else list(lens.layers)
        return {"layers": layers, "jacobian": lens.jacobian, "jacobian_set": lens.jacobian_set}
    return lens  # a name (or something the backend refuses in its own words)


def lens_from_json(lens: Any) -> Any:
    if isinstance(lens, dict):
        unknown = sorted(set(lens) - {"layers", "jacobian", "jacobian_set"})
        if unknown:
            from interp_core.errors import InvalidArgument

            message = f"a lens object takes layers, jacobian and jacobian_set, not {unknown}"
            raise InvalidArgument(message)
        return LensSpec(
            lens.get("layers"),
            jacobian=lens.get("jacobian", False),
            jacobian_set=lens.get("jacobian_set", "default"),
        )
    return lens


def step_to_json(step: LensStep) -> dict[str, Any]:
    return {
        "position": step.position,
        "token_id": step.token_id,
        "is_generated": step.is_generated,
        "next_token_id": step.next_token_id,
        "finish_reason": step.finish_reason,
        "top_ids": [ids.tolist() for ids in step.top_ids],
        "top_probs": [probs.tolist() for probs in step.top_probs],
    }


def step_from_json(data: dict[str, Any], tensor: Any) -> LensStep:
    """A step read back; `tensor(nested, kind)` builds the client's arrays ("ids"/"probs")."""
    return LensStep(
        position=int(data["position"]),
        token_id=int(data["token_id"]),
        is_generated=bool(data["is_generated"]),
        top_ids=tuple(tensor(ids, "ids") for ids in data["top_ids"]),
        top_probs=tuple(tensor(probs, "probs") for probs in data["top_probs"]),
        next_token_id=data.get("next_token_id"),
        finish_reason=data.get("finish_reason"),
    )


@router.post(
    "/v1/lens/generate",
    summary="Lens over a generation, streamed (server-sent events, one per position)",
    response_description="text/event-stream of steps, then [DONE]",
)
async def generate_with_lens(body: LensGenerateRequest, request: Request) -> Any:
    service: Service = request.app.state.service
    sampling = {
        key: value
        for key in ("temperature", "top_k", "top_p", "seed")
        if (value := getattr(body, key)) is not None
    }
    steps = service.generate_with_lens(
        body.tokens,
        [lens_from_json(lens) for lens in body.lenses],
        service.specs(body.steering),
        top_n=body.top_n,
        point=body.point,
        max_new_tokens=body.max_new_tokens,
        skip_before=body.skip_before,
        word_mask=body.word_mask,
        **sampling,
    )
    first: LensStep | None = await first_item(steps)

    async def event(step: LensStep, _opening: bool) -> str:
        return json.dumps(step_to_json(step))

    return sse_response(first, steps, event)
