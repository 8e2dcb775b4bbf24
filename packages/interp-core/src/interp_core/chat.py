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
from typing import Any

from interp_core.channels import Segment, label_tokens, segments
from interp_core.channels import chat_format as reasoning_format
from interp_core.chat_formats import TEMPLATE, format_spans, resolve_chat_format
from interp_core.chat_spans import ChatSpans, TokenSpan
from interp_core.errors import CapabilityUnsupported, NoChatTemplateError

__all__ = ["SECTIONS", "ChatSpans", "TokenSpan", "check_chat_template", "message_spans"]

SECTIONS = ("header", "content", "footer")


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
        "format the prompt yourself and use to_tokens, set tokenizer.chat_template to the "
        "model's template, or name a format defined in code (chat_format='deepseek-v4')"
    )
    raise NoChatTemplateError.build(what, why, instead)


def _render(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    prompt: bool,
    options: Mapping[str, Any] | None = None,
) -> str:
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages], tokenize=False, add_generation_prompt=prompt, **(options or {})
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
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    text: str,
    options: Mapping[str, Any],
    continuing: bool,
) -> list[tuple[int, int, int, int]]:
    """Per message: (start, content_start, content_end, end) character offsets in `text`."""
    bounds = []
    previous = 0
    for index, item in enumerate(messages):
        last = continuing and index == len(messages) - 1
        extra = {**options, "continue_final_message": True} if last else options
        prefix = _render(tokenizer, messages[: index + 1], False, extra)
        if not text.startswith(prefix) or len(prefix) < previous:
            what = "this chat template renders a chat's first messages differently on their own"
            why = "so the characters of each message cannot be located in the whole chat"
            instead = "slice the rendered tokens yourself"
            raise CapabilityUnsupported.build(what, why, instead)
        content = item["content"]
        if last:  # transformers cut the rendering right after the (stripped) final content
            content = content.strip()
            found = len(prefix) - len(content)
        elif content:
            found = _locate(tokenizer, messages, index, prefix, previous, options)
        else:  # an empty message is all markers: header up to its end
            found = len(prefix)
        bounds.append((previous, found, found + len(content), len(prefix)))
        previous = len(prefix)
    return bounds


def _locate(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    index: int,
    prefix: str,
    start: int,
    options: Mapping[str, Any],
) -> int:
    """Where message `index`'s content sits in `prefix`: the occurrence whose removal gives the
    rendering of the same chat with that message's content emptied (so a role name or a marker
    that happens to equal the content is never taken for it)."""
    content = messages[index]["content"]
    emptied = [*messages[:index], {**messages[index], "content": ""}]
    without = _render(tokenizer, emptied, False, options)
    found = prefix.find(content, start)
    while found >= 0:
        if prefix[:found] + prefix[found + len(content) :] == without:
            return found
        found = prefix.find(content, found + 1)
    what = f"message {index}'s content does not appear verbatim in the rendered chat"
    why = "the template rewrites it (e.g. strips or escapes it)"
    instead = "slice the rendered tokens yourself"
    raise CapabilityUnsupported.build(what, why, instead)


def _options(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool,
    continue_final_message: bool,
    enable_thinking: bool | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The template options to render with, refusing the ones this chat cannot honour."""
    if continue_final_message and add_generation_prompt:
        what = "continue_final_message and add_generation_prompt were both set"
        why = "one continues the last message, the other opens a new turn after it"
        raise CapabilityUnsupported.build(what, why, "set only one of them")
    if continue_final_message and not messages[-1]["content"].strip():
        what = "continue_final_message needs a final message with some text to continue"
        why = "the rendering is cut right after that text, so an empty one has no place"
        raise CapabilityUnsupported.build(what, why, "use add_generation_prompt=True instead")
    given = {"enable_thinking": enable_thinking, **(extra or {})}
    template = tokenizer.chat_template
    chosen: dict[str, Any] = {}
    for key, value in given.items():
        if value is None:
            continue
        if not isinstance(template, str) or key not in template:
            switch = "thinking switch" if key == "enable_thinking" else f"{key} option"
            what = f"{key} was set, but this chat template has no {switch}"
            why = "the option would be ignored silently and the chat rendered as if it were unset"
            instead = f"leave {key} unset for this model"
            raise CapabilityUnsupported.build(what, why, instead)
        chosen[key] = bool(value) if key == "enable_thinking" else value
    return chosen


def message_spans(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = False,
    continue_final_message: bool = False,
    enable_thinking: bool | None = None,
    fmt: str | None = None,
    chat_format: str | None = None,
    reasoning_effort: str | None = None,
    drop_thinking: bool | None = None,
) -> ChatSpans:
    """Render `messages` with the template and label every token (see the module docstring).

    `continue_final_message=True` renders the last message open (no footer), for a reply the
    model is to continue; `enable_thinking`, `reasoning_effort` and `drop_thinking` are passed
    to a template that reads them (and refused by one that does not). `fmt` names the reasoning
    format (`interp_core.channels`), read from the template when None. `chat_format` names the
    renderer (`interp_core.chat_formats`: the template, or a format defined in code such as
    `deepseek-v4`), picked from the tokenizer when None."""
    name = resolve_chat_format(tokenizer, chat_format)
    if name != TEMPLATE:
        return format_spans(
            tokenizer,
            name,
            messages,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=continue_final_message,
            enable_thinking=enable_thinking,
            reasoning_effort=reasoning_effort,
            drop_thinking=drop_thinking,
            fmt=fmt,
        )
    check_chat_template(tokenizer)
    _check_messages(messages)
    extra = {"reasoning_effort": reasoning_effort, "drop_thinking": drop_thinking}
    options = _options(
        tokenizer, messages, add_generation_prompt, continue_final_message, enable_thinking, extra
    )
    fmt = reasoning_format(tokenizer, fmt)
    if continue_final_message:
        text = _render(tokenizer, messages, False, {**options, "continue_final_message": True})
    else:
        text = _render(tokenizer, messages, add_generation_prompt, options)
    bounds = _char_sections(tokenizer, messages, text, options, continue_final_message)
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
    # Each message's text parsed alone, so a marker quoted in one cannot open a block in another.
    parts = [
        Segment(p.start + start, p.end + start, p.channel, p.section, p.message)
        for start, _, _, end in bounds
        for p in segments(text[start:end], fmt)
    ]
    channels = label_tokens(offsets, parts) if parts else [None] * len(ids)
    spans: list[TokenSpan] = []
    starts: list[int] = []
    message = 0
    cursor = 0
    for token, ((start, _), part) in enumerate(zip(offsets, channels, strict=True)):
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
        section, channel = _channel(fmt, roles[message], section, part)
        spans.append(TokenSpan(message, roles[message], section, channel))
    starts.extend([len(ids)] * (len(bounds) - len(starts)))
    partition = tuple(
        (starts[i], starts[i + 1] if i + 1 < len(bounds) else len(ids)) for i in range(len(bounds))
    )
    return ChatSpans(text, tuple(ids), tuple(spans), partition)


def _channel(fmt: str, role: str, section: str, part: Segment | None) -> tuple[str, str | None]:
    """A token's section and channel once its reasoning segment is known.

    Inside a harmony message that names a channel, or a `<think>` block of an assistant turn,
    the segment decides both (`<think>` and harmony headers are `header`, their text `content`,
    `</think>` and `<|end|>` `footer`). An assistant's own content outside a block is `final`
    in the think format. Everything else keeps its section and has no channel."""
    if part is None or part.channel is None:
        return section, None
    if fmt == "harmony" or (part.channel == "analysis" and role == "assistant"):
        return part.section, part.channel
    if fmt == "think" and role == "assistant" and section == "content":
        return section, "final"
    return section, None
