"""The chat-spans route: a chat rendered with the served model's template, every token labelled.

`POST /v1/chat/spans` takes OpenAI-style messages (an assistant message may carry its reasoning
as `reasoning_content`, the `<think>` templates' key, or `thinking`, harmony's) and the template
options (`add_generation_prompt`, `continue_final_message`, `enable_thinking`,
`reasoning_effort`, `drop_thinking`, `format` to name the reasoning format instead of reading it
from the template, and `chat_format` to name the renderer: the template, or a format defined in
code such as `deepseek-v4`, which is picked by itself for a checkpoint that defines one). It
answers the rendered `text`, its `token_ids`, one `{message, role, section, channel}` per token
and each message's `[start, end)` token range (`interp_core.chat.message_spans`). With
`generated` (ids a model produced after that prompt) it also labels them, one
`{channel, section, message}` each (`interp_core.channels.generation_labels`).

The texts are capped like every text the server reads (`--max-text-chars`, 413), and rendering
runs off the event loop. A template that cannot be labelled is refused as in-process.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from interp_core.channels import FORMATS
from interp_core.chat_formats import CHAT_FORMATS
from interp_serve.inputs import check_text
from interp_serve.service import Service

__all__ = ["ChatSpansRequest", "router"]

router = APIRouter()

_STRICT = ConfigDict(extra="forbid", strict=True)


class SpanMessage(BaseModel):
    model_config = _STRICT
    role: str
    content: str
    reasoning_content: str | None = Field(None, description="reasoning, for <think> templates")
    reasoning: str | None = Field(None, description="reasoning (deepseek-v4's other key)")
    thinking: str | None = Field(None, description="reasoning, for harmony templates")
    tools: list[dict[str, Any]] | None = Field(
        None, description="deepseek-v4: OpenAI-style tools a system or developer message offers"
    )
    tool_calls: list[dict[str, Any]] | None = Field(
        None, description="deepseek-v4: an assistant's OpenAI-style tool calls"
    )
    tool_call_id: str | None = Field(None, description="deepseek-v4: the call a tool answers")


class ChatSpansRequest(BaseModel):
    model_config = _STRICT
    messages: list[SpanMessage] = Field(min_length=1, description="the chat to render")
    add_generation_prompt: bool = Field(False, description="open the assistant's next turn")
    continue_final_message: bool = Field(False, description="leave the last message open")
    enable_thinking: bool | None = Field(
        None, description="the template's thinking switch; refused by a template without one"
    )
    format: str | None = Field(
        None, description=f"reasoning format, one of {FORMATS}; read from the template if null"
    )
    chat_format: str | None = Field(
        None,
        description=f"renderer, one of {CHAT_FORMATS}; picked from the checkpoint if null",
    )
    reasoning_effort: str | None = Field(
        None, description="the format's reasoning effort (deepseek-v4: low, high, max)"
    )
    drop_thinking: bool | None = Field(
        None, description="drop reasoning of turns before the last user message (deepseek-v4)"
    )
    generated: list[int] | None = Field(
        None, description="token ids generated after this chat, to label by channel"
    )


def _service(request: Request) -> Service:
    return request.app.state.service


@router.post("/v1/chat/spans", summary="A chat's tokens, each with its message, role and channel")
async def chat_spans(body: ChatSpansRequest, request: Request) -> dict[str, Any]:
    service = _service(request)
    cap = service.settings.max_text_chars
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    for item in messages:
        for key in ("content", "reasoning_content", "reasoning", "thinking"):
            if key in item:
                check_text(item[key], cap, f"a message's {key}")
    generated = (
        None if body.generated is None else service.ids(body.generated, "generated", in_range=True)
    )
    chat, labels = await service.message_spans(
        messages,
        generated,
        add_generation_prompt=body.add_generation_prompt,
        continue_final_message=body.continue_final_message,
        enable_thinking=body.enable_thinking,
        fmt=body.format,
        chat_format=body.chat_format,
        reasoning_effort=body.reasoning_effort,
        drop_thinking=body.drop_thinking,
    )
    answer: dict[str, Any] = {
        "text": chat.text,
        "token_ids": list(chat.token_ids),
        "spans": [
            {"message": s.message, "role": s.role, "section": s.section, "channel": s.channel}
            for s in chat.spans
        ],
        "partition": [list(r) for r in chat.partition],
    }
    if labels is not None:
        answer["labels"] = [{"channel": c, "section": s, "message": m} for c, s, m in labels]
    return answer
