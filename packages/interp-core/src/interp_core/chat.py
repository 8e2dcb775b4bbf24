"""Which message, and which part of it, does every token of a rendered chat belong to?

`message_spans(tokenizer, messages)` renders a chat with the tokenizer's own template and labels
each token with its message's index and role and with the section of the message it falls in:
`header` (the template's markers before the content, e.g. `<|im_start|>user\\n`), `content` (the
message's text) or `footer` (markers after it, e.g. `<|im_end|>\\n`). `partition` gives every
message a contiguous `[start, end)` token range; the ranges tile the whole chat in order. With
`add_generation_prompt=True` the prompt the template appends for the next turn is one more entry,
role "assistant", all header, at index `len(messages)`.

Pure Python over the tokenizer object (HF fast tokenizers: `apply_chat_template(tokenize=False)`
and `return_offsets_mapping=True`), so every backend uses the same code. A message's text is
located by rendering growing prefixes of the chat; a template whose prefix renderings are not
prefixes of the full rendering, or that rewrites a message's content, is refused rather than
labelled by guesswork.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.errors import CapabilityUnsupported, NoChatTemplateError

__all__ = ["SECTIONS", "ChatSpans", "TokenSpan", "check_chat_template", "message_spans"]

SECTIONS = ("header", "content", "footer")


@dataclass(frozen=True, slots=True)
class TokenSpan:
    """What one token of a rendered chat belongs to."""

    message: int  # index into the messages (len(messages) for the generation prompt)
    role: str
    section: str  # one of SECTIONS


@dataclass(frozen=True, slots=True)
class ChatSpans:
    """A rendered chat: its text, token ids, one `TokenSpan` per token and the per-message
    partition (`[start, end)` token ranges, contiguous, covering every token)."""

    text: str
    token_ids: tuple[int, ...]
    spans: tuple[TokenSpan, ...]
    partition: tuple[tuple[int, int], ...]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def check_chat_template(tokenizer: Any) -> None:
    """Refuse (`NoChatTemplateError`) a tokenizer that carries no chat template."""
    if has_chat_template(tokenizer):
        return
    name = getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    what = f"the tokenizer of {name} has no chat template"
    why = "a chat can only be rendered the way the model was trained to read it by its template"
    instead = (
        "format the prompt yourself and use to_tokens, or set tokenizer.chat_template to the "
        "model's template"
    )
    raise NoChatTemplateError.build(what, why, instead)


def _render(tokenizer: Any, messages: Sequence[Mapping[str, Any]], prompt: bool) -> str:
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=prompt
    )
    if not isinstance(text, str):
        message = f"the chat template rendered {type(text).__name__}, not text"
        raise CapabilityUnsupported(message)
    return text


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(messages, str | bytes) or not messages:
        message = "message_spans needs a non-empty list of {'role': ..., 'content': ...} messages"
        raise CapabilityUnsupported(message)
    for index, item in enumerate(messages):
        if not isinstance(item, Mapping) or not isinstance(item.get("content"), str):
            message = (
                f"message {index} is {item!r}; each message must be a mapping with a 'role' and "
                f"a string 'content'"
            )
            raise CapabilityUnsupported(message)


def _char_sections(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], text: str
) -> list[tuple[int, int, int, int]]:
    """Per message: (start, content_start, content_end, end) character offsets in `text`."""
    bounds = []
    previous = 0
    for index, item in enumerate(messages):
        prefix = _render(tokenizer, messages[: index + 1], False)
        if not text.startswith(prefix) or len(prefix) < previous:
            what = "this chat template renders a chat's first messages differently on their own"
            why = "so the characters of each message cannot be located in the whole chat"
            instead = "slice the rendered tokens yourself"
            raise CapabilityUnsupported.build(what, why, instead)
        content = item["content"]
        if content:
            found = _locate(tokenizer, messages, index, prefix, previous)
        else:  # an empty message is all markers: header up to its end
            found = len(prefix)
        bounds.append((previous, found, found + len(content), len(prefix)))
        previous = len(prefix)
    return bounds


def _locate(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], index: int, prefix: str, start: int
) -> int:
    """Where message `index`'s content sits in `prefix`: the occurrence whose removal gives the
    rendering of the same chat with that message's content emptied (so a role name or a marker
    that happens to equal the content is never taken for it)."""
    content = messages[index]["content"]
    emptied = [*messages[:index], {**messages[index], "content": ""}]
    without = _render(tokenizer, emptied, False)
    found = prefix.find(content, start)
    while found >= 0:
        if prefix[:found] + prefix[found + len(content) :] == without:
            return found
        found = prefix.find(content, found + 1)
    what = f"message {index}'s content does not appear verbatim in the rendered chat"
    why = "the template rewrites it (e.g. strips or escapes it)"
    instead = "slice the rendered tokens yourself"
    raise CapabilityUnsupported.build(what, why, instead)


def message_spans(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = False,
) -> ChatSpans:
    """Render `messages` with the template and label every token (see the module docstring)."""
    check_chat_template(tokenizer)
    _check_messages(messages)
    text = _render(tokenizer, messages, add_generation_prompt)
    bounds = _char_sections(tokenizer, messages, text)
    roles = [str(m.get("role", "")) for m in messages]
    if bounds[-1][3] < len(text):  # the generation prompt (or trailing markers)
        end = bounds[-1][3]
        bounds.append((end, len(text), len(text), len(text)))
        roles.append("assistant")
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = [int(i) for i in encoded["input_ids"]]
    offsets = encoded.get("offset_mapping")
    if offsets is None:
        what = "message_spans needs a fast tokenizer (one that reports character offsets)"
        instead = "load the model's fast tokenizer (use_fast=True)"
        raise CapabilityUnsupported.build(what, None, instead)
    spans: list[TokenSpan] = []
    starts: list[int] = []
    message = 0
    cursor = 0
    for token, (start, _) in enumerate(offsets):
        cursor = max(cursor, int(start))
        while message < len(bounds) - 1 and cursor >= bounds[message][3]:
            message += 1
        if len(starts) <= message:
            starts.extend([token] * (message + 1 - len(starts)))
        _, content_start, content_end, _ = bounds[message]
        if cursor < content_start:
            section = "header"
        elif cursor < content_end:
            section = "content"
        else:
            section = "footer"
        spans.append(TokenSpan(message, roles[message], section))
    starts.extend([len(ids)] * (len(bounds) - len(starts)))
    partition = tuple(
        (starts[i], starts[i + 1] if i + 1 < len(bounds) else len(ids)) for i in range(len(bounds))
    )
    return ChatSpans(text, tuple(ids), tuple(spans), partition)
