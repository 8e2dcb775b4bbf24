"""Which renderer turns a chat into a prompt: the tokenizer's template, or a format we render?

Almost every checkpoint states its chat format as a Jinja template in its tokenizer, and
`interp_core.chat` renders and labels that. A few define it in code instead; for those we carry
our own renderer, written from the format's facts, which reports each message's block itself:

* `template`: the tokenizer's `chat_template`; picked when the tokenizer has one.
* `deepseek-v4`: DeepSeek-V4 (`interp_core.deepseek_v4_chat`); picked when there is no
  template and the checkpoint is a DeepSeek-V4 (its architecture, or the encoder
  `encoding/encoding_dsv4.py` in its folder).

`resolve_chat_format(tokenizer, name, facts)` names the one to use (an unknown name is refused,
listing these); `format_spans` renders and labels a chat with a code format, `format_text`
renders only its text, and `format_generation_labels` labels what a model wrote after such a
prompt. Pure standard library over the tokenizer object (its `decode`, and a fast tokenizer's
character offsets), like the template path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from interp_core import deepseek_v4_chat
from interp_core.channels import _decoded_offsets
from interp_core.chat_spans import ChatSpans, TokenSpan
from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "CHAT_FORMATS",
    "TEMPLATE",
    "format_generation_labels",
    "format_spans",
    "format_text",
    "resolve_chat_format",
]

TEMPLATE = "template"
DEEPSEEK_V4 = "deepseek-v4"
CHAT_FORMATS = (TEMPLATE, DEEPSEEK_V4)

# Where a DeepSeek-V4 checkpoint keeps the encoder that defines its format.
_DEEPSEEK_V4_ENCODER = os.path.join("encoding", "encoding_dsv4.py")
_DEEPSEEK_V4_ARCHITECTURES = ("DeepseekV4ForCausalLM", "DeepseekV4ForConditionalGeneration")


def _is_deepseek_v4(tokenizer: Any, facts: Any) -> bool:
    architecture = getattr(facts, "architecture", None)
    if architecture in _DEEPSEEK_V4_ARCHITECTURES or getattr(facts, "model_type", None) == (
        "deepseek_v4"
    ):
        return True
    folder = getattr(tokenizer, "name_or_path", None)
    return isinstance(folder, str) and os.path.isfile(os.path.join(folder, _DEEPSEEK_V4_ENCODER))


def resolve_chat_format(tokenizer: Any, name: str | None = None, facts: Any = None) -> str:
    """The chat format to render with: `name` when given, else the template when the tokenizer
    has one, else the code format the checkpoint defines (`template` when none does, which the
    template path then refuses for having no template)."""
    if name is not None:
        if name not in CHAT_FORMATS:
            what = f"chat_format={name!r} is not a chat format this library renders"
            instead = f"pass one of {CHAT_FORMATS}, or None to pick it from the checkpoint"
            raise InvalidArgument.build(what, None, instead)
        return name
    if getattr(tokenizer, "chat_template", None):
        return TEMPLATE
    return DEEPSEEK_V4 if _is_deepseek_v4(tokenizer, facts) else TEMPLATE


def _check_fmt(fmt: str | None) -> None:
    if fmt not in (None, "think"):
        what = f"fmt={fmt!r} with chat_format='deepseek-v4'"
        why = "DeepSeek-V4 marks reasoning with <think> blocks"
        raise CapabilityUnsupported.build(what, why, 'leave fmt unset (or "think")')


def _blocks(
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool = False,
    continue_final_message: bool = False,
    enable_thinking: bool | None = None,
    reasoning_effort: str | None = None,
    drop_thinking: bool | None = None,
    fmt: str | None = None,
) -> tuple[deepseek_v4_chat.Block, ...]:
    _check_fmt(fmt)
    # Thinking mode unless switched off: the mode vLLM serves DeepSeek-V4 in by default.
    return deepseek_v4_chat.render_blocks(
        messages,
        thinking=enable_thinking is not False,
        reasoning_effort=reasoning_effort,
        drop_thinking=drop_thinking is not False,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
    )


def format_text(name: str, messages: Sequence[Mapping[str, Any]], **options: Any) -> str:
    """The prompt text of `messages` in code format `name` (options as for `format_spans`)."""
    _known(name)
    return "".join(b.text for b in _blocks(messages, **options))


def _known(name: str) -> None:
    if name == TEMPLATE or name not in CHAT_FORMATS:
        msg = f"{name!r} is not a code chat format; those are {CHAT_FORMATS[1:]}"
        raise InvalidArgument(msg)


def format_spans(
    tokenizer: Any, name: str, messages: Sequence[Mapping[str, Any]], **options: Any
) -> ChatSpans:
    """`interp_core.chat.ChatSpans` of a chat rendered in code format `name`: each token is
    labelled by the piece of its message's block its first character falls in."""
    _known(name)
    blocks = _blocks(messages, **options)
    text = "".join(b.text for b in blocks)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded.get("offset_mapping")
    if offsets is None:
        what = "chat spans need a fast tokenizer (one that reports character offsets)"
        raise CapabilityUnsupported.build(what, None, "load the model's fast tokenizer")
    ids = tuple(int(i) for i in encoded["input_ids"])
    owners: list[tuple[int, int, int, deepseek_v4_chat.Piece]] = []  # (start, end, block, piece)
    cursor = 0
    for index, block in enumerate(blocks):
        for piece in block.pieces:
            owners.append((cursor, cursor + len(piece.text), index, piece))
            cursor += len(piece.text)
    spans = []
    counts = [0] * len(blocks)
    at = 0
    position = 0
    for start, _ in offsets:
        position = max(position, int(start))
        while at < len(owners) - 1 and position >= owners[at][1]:
            at += 1
        _, _, index, piece = owners[at]
        counts[index] += 1
        spans.append(TokenSpan(index, blocks[index].role, piece.section, piece.channel))
    partition = []
    begin = 0
    for count in counts:
        partition.append((begin, begin + count))
        begin += count
    return ChatSpans(text, ids, tuple(spans), tuple(partition))


def format_generation_labels(
    tokenizer: Any,
    name: str,
    prompt_ids: Sequence[int],
    generated_ids: Sequence[int],
    fmt: str | None = None,
) -> tuple[tuple[str | None, str, int], ...]:
    """`(channel, section, message)` of each generated token after a prompt in code format
    `name`. The turn is parsed from the prompt's last assistant opening (`<｜Assistant｜>`), so
    an earlier turn's markers cannot shift it; the reasoning is open when the prompt's last
    thinking marker after it is `<think>`."""
    _known(name)
    _check_fmt(fmt)
    generated = [int(i) for i in generated_ids]
    if not generated:
        return ()
    prompt = [int(i) for i in prompt_ids]
    text, offsets = _decoded_offsets(tokenizer, prompt + generated)
    boundary = offsets[len(prompt) - 1][1] if prompt else 0
    opening = text.rfind(deepseek_v4_chat.ASSISTANT, 0, boundary)
    if opening < 0:
        what = "the prompt has no <｜Assistant｜> opening for the generated turn to follow"
        why = "whether the model writes reasoning or an answer is read from that opening"
        instead = "render the prompt with message_spans(..., add_generation_prompt=True)"
        raise CapabilityUnsupported.build(what, why, instead)
    turn = opening + len(deepseek_v4_chat.ASSISTANT)
    head = text[turn:boundary]
    close = head.find(deepseek_v4_chat.THINK_CLOSE)
    reasoning_open = close < 0 and head.startswith(deepseek_v4_chat.THINK_OPEN)
    if reasoning_open:
        turn += len(deepseek_v4_chat.THINK_OPEN)
    elif close >= 0:  # the reasoning is closed (or empty): the answer follows the marker
        turn += close + len(deepseek_v4_chat.THINK_CLOSE)
    parts = deepseek_v4_chat.turn_segments(text[turn:], reasoning_open=reasoning_open)
    labels = []
    at = 0
    for start, _ in offsets[len(prompt) :]:
        local = max(0, int(start) - turn)
        while at < len(parts) - 1 and local >= parts[at][1]:
            at += 1
        _, _, channel, section, message = parts[at]
        labels.append((channel, section, message))
    return tuple(labels)
