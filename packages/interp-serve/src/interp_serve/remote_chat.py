"""Chat spans of a remote model: `message_spans` over `POST /v1/chat/spans`.

The remote model's tokenizer is the server's (it has no template here), so the chat is rendered
and labelled where the template lives, and the answer is rebuilt into the in-process types
(`ChatSpans`, `TokenSpan`), equal to what the server's own model answers. Labels for
generated tokens need the template's tokenizer too: `remote_generation_labels` refuses, naming
the route's `generated` field, which labels a reply after a chat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from interp_core.chat import ChatSpans, TokenSpan
from interp_core.errors import CapabilityUnsupported

__all__ = ["remote_generation_labels", "remote_message_spans"]

Post = Callable[[str, dict[str, Any]], Any]


def _body(messages: Sequence[Mapping[str, Any]], options: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [dict(m) for m in messages]}
    keys = (
        "add_generation_prompt",
        "continue_final_message",
        "enable_thinking",
        "chat_format",
        "reasoning_effort",
        "drop_thinking",
    )
    for key in keys:
        if options.get(key) is not None:
            body[key] = options[key]
    if options.get("fmt") is not None:
        body["format"] = options["fmt"]
    return body


def remote_message_spans(
    post: Post, messages: Sequence[Mapping[str, Any]], **options: Any
) -> ChatSpans:
    answer = post("/v1/chat/spans", _body(messages, options))
    spans = tuple(
        TokenSpan(s["message"], s["role"], s["section"], s["channel"]) for s in answer["spans"]
    )
    partition = tuple((int(a), int(b)) for a, b in answer["partition"])
    return ChatSpans(answer["text"], tuple(answer["token_ids"]), spans, partition)


def remote_generation_labels() -> None:
    what = "generation_labels is not served for prompt ids over HTTP"
    why = "the labels are found in the decoded text with the template's markers, on the server"
    instead = (
        "POST /v1/chat/spans with the chat's messages and the reply's ids as 'generated', or "
        "load the model in-process"
    )
    raise CapabilityUnsupported.build(what, why, instead)
