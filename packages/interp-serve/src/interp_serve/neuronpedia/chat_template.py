"""Neuronpedia's `apply-chat-template`: a chat rendered with the model's template, every token
labelled with its message, role, section and channel.

The labels are our chat spans (`interp_core.chat.message_spans`, the same code as `POST
/v1/chat/spans`), so the webapp groups tokens into message bubbles from the template itself,
not from a per-family guess. A token of the generation prompt (the assistant's opening
markers) belongs to message `len(messages)`, as in our spans.
"""

from __future__ import annotations

import asyncio
from typing import Any

from interp_core.errors import InvalidArgument
from interp_serve.inputs import check_text
from interp_serve.service import Gone, Service

__all__ = ["apply_chat_template", "chat_options", "rendered_spans"]

# The template switches passed through chatTemplateKwargs: the ones every template reads the
# same way. Anything else is refused by name rather than handed to a template that may ignore it.
KNOWN_KWARGS = ("enable_thinking",)


def chat_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`chatTemplateKwargs` as `message_spans` options; unknown or ill-typed ones refused."""
    unknown = sorted(set(kwargs) - set(KNOWN_KWARGS))
    if unknown:
        message = (
            f"chatTemplateKwargs {unknown} are not passed to the template here: only "
            f"{', '.join(KNOWN_KWARGS)} is (a template reads other keys its own way, if at all)"
        )
        raise InvalidArgument(message)
    thinking = kwargs.get("enable_thinking")
    if thinking is not None and not isinstance(thinking, bool):
        message = f"chatTemplateKwargs.enable_thinking={thinking!r}: send true, false or leave it"
        raise InvalidArgument(message)
    return {"enable_thinking": thinking}


def _messages(service: Service, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cap = service.settings.max_text_chars
    plain = []
    for index, item in enumerate(messages):
        if item.get("channel") is not None:
            message = (
                f"messages[{index}].channel={item['channel']!r}: a message's channel is not "
                f"rendered here; send an assistant's reasoning as reasoning_content or thinking "
                f"to POST /v1/chat/spans, which labels the channels"
            )
            raise InvalidArgument(message)
        check_text(item["content"], cap, "a message's content")
        plain.append({"role": item["role"], "content": item["content"]})
    if not plain:
        message = "messages is empty: send at least one message to render"
        raise InvalidArgument(message)
    return plain


async def rendered_spans(
    service: Service, messages: list[dict[str, Any]], generation_prompt: bool, **options: Any
) -> Any:
    """Our `ChatSpans` of the messages, rendered off the event loop."""
    from interp_core.chat import message_spans

    tokenizer = service.model.tokenizer
    plain = _messages(service, messages)

    def work() -> Any:
        chat = message_spans(tokenizer, plain, add_generation_prompt=generation_prompt, **options)
        check_text(chat.text, service.settings.max_text_chars, "the rendered chat")
        return chat

    return await asyncio.to_thread(work)


def span_fields(span: Any) -> dict[str, Any]:
    return {
        "messageIndex": span.message,
        "role": span.role,
        "channel": span.channel,
        "section": span.section,
    }


async def apply_chat_template(service: Service, body: dict[str, Any], gone: Gone) -> dict[str, Any]:
    options = chat_options(body["chatTemplateKwargs"])
    chat = await rendered_spans(
        service, body["messages"], bool(body["addGenerationPrompt"]), **options
    )
    ids = list(chat.token_ids)
    strings = await service.str_tokens(ids, prepend_bos=False) if ids else []
    spans = [
        {"position": position, "tokenId": token, "tokenStr": str(text), **span_fields(span)}
        for position, (token, text, span) in enumerate(zip(ids, strings, chat.spans, strict=True))
    ]
    return {"prompt": chat.text, "tokens": ids, "spans": spans}
