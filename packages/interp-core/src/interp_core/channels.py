"""Which channel (reasoning or answer) does each character, and each token, of a chat belong to?

Reasoning models write two kinds of text in one assistant turn, and the two chat formats in use
mark them differently:

* **think** (Qwen3, DeepSeek-R1, SmolLM3 and their kin): reasoning sits between `<think>` and
  `</think>`; what follows is the answer. A template may open the block in the generation prompt
  (so the generated text starts inside it) or write an empty block to switch thinking off.
* **harmony** (gpt-oss): every message is `<|start|>ROLE<|channel|>CHANNEL<|message|>TEXT` closed
  by `<|end|>`, `<|return|>` or `<|call|>`; the channels are `analysis` (reasoning),
  `commentary` (tool calls) and `final` (the answer). Messages without `<|channel|>` (system,
  user) carry no channel.

Both are normalised onto harmony's names: a `<think>` block is channel `analysis` (markers
included) and the answer around it `final`. `segments(text, fmt)` tiles a text with
`Segment(start, end, channel, section, message)` ranges of characters; `generation_labels` labels
the tokens a model generated after a prompt, parsing prompt and output together so that a block
the prompt opened is carried into the output. Pure standard library over a tokenizer object
(its `decode`; chat spans also read HF fast tokenizers' `return_offsets_mapping=True`).

The format is stated (`fmt="think"`, `"harmony"`, `"plain"`) or read from the chat template's own
markers (`fmt=None`); a template that names both is refused rather than guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "CHANNELS",
    "FORMATS",
    "Segment",
    "chat_format",
    "generation_labels",
    "label_tokens",
    "segments",
]

FORMATS = ("think", "harmony", "plain")
CHANNELS = ("analysis", "commentary", "final")

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
HARMONY_START = "<|start|>"
HARMONY_CHANNEL = "<|channel|>"
HARMONY_MESSAGE = "<|message|>"
HARMONY_ENDS = ("<|end|>", "<|return|>", "<|call|>")


@dataclass(frozen=True, slots=True)
class Segment:
    """A `[start, end)` range of characters: its channel (None outside any), its section
    (`header` = markers before the text, `content`, `footer` = the closing marker) and, for
    harmony, the index of the harmony message it belongs to (think and plain: 0, one turn)."""

    start: int
    end: int
    channel: str | None
    section: str
    message: int


def chat_format(tokenizer: Any = None, fmt: str | None = None) -> str:
    """The reasoning format: `fmt` when given, else read from the tokenizer's chat template."""
    if fmt is not None:
        if fmt not in FORMATS:
            msg = f"fmt={fmt!r} is not a chat format"
            raise InvalidArgument.build(
                msg,
                f"the formats with known channel markers are {FORMATS}",
                "pass one of them, or None to read it from the chat template",
            )
        return fmt
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):  # a dict of named templates: the default one
        template = template.get("default", "") if isinstance(template, dict) else ""
    harmony = HARMONY_CHANNEL in template and HARMONY_MESSAGE in template
    think = THINK_CLOSE in template
    if harmony and think:
        msg = "this chat template writes both <think> blocks and harmony channels"
        raise CapabilityUnsupported.build(
            msg,
            "the two formats label reasoning differently, and reading one would mislabel the other",
            'pass fmt="think" or fmt="harmony"',
        )
    return "harmony" if harmony else "think" if think else "plain"


def segments(text: str, fmt: str) -> tuple[Segment, ...]:
    """Character ranges tiling `text`, in order, each with its channel and section."""
    fmt = chat_format(None, fmt)
    if fmt == "harmony":
        parts = _harmony(text)
    elif fmt == "think":
        parts = _think(text)
    else:
        parts = [Segment(0, len(text), None, "content", 0)]
    return tuple(p for p in parts if p.end > p.start)


def _think(text: str) -> list[Segment]:
    """`<think>` blocks are `analysis`, the text between them `final`. A `</think>` with no
    opener before it closes a block the text started inside (the prompt opened it)."""
    out: list[Segment] = []
    cursor = 0
    first_close = text.find(THINK_CLOSE)
    first_open = text.find(THINK_OPEN)
    inside = first_close >= 0 and (first_open < 0 or first_close < first_open)
    while cursor < len(text):
        if inside:
            close = text.find(THINK_CLOSE, cursor)
            if close < 0:  # still reasoning at the end of the text
                out.append(Segment(cursor, len(text), "analysis", "content", 0))
                break
            out.append(Segment(cursor, close, "analysis", "content", 0))
            end = close + len(THINK_CLOSE)
            out.append(Segment(close, end, "analysis", "footer", 0))
            cursor, inside = end, False
            continue
        opener = text.find(THINK_OPEN, cursor)
        if opener < 0:
            out.append(Segment(cursor, len(text), "final", "content", 0))
            break
        out.append(Segment(cursor, opener, "final", "content", 0))
        end = opener + len(THINK_OPEN)
        out.append(Segment(opener, end, "analysis", "header", 0))
        cursor, inside = end, True
    return out


def _harmony(text: str) -> list[Segment]:
    """One header / content / footer triple per `<|start|>` message; text outside messages
    (before the first, or after a closing marker) has no channel. A text may begin inside a
    message's header or content (a generation prompt ends with `<|start|>assistant`)."""
    out: list[Segment] = []
    cursor = 0
    message = 0
    # Where the text starts: inside a header when a <|message|> comes before any <|start|>,
    # inside content when a closing marker does.
    state = _opening_state(text)
    while cursor < len(text):
        if state == "outside":
            start = text.find(HARMONY_START, cursor)
            if start < 0:
                out.append(Segment(cursor, len(text), None, "content", message))
                break
            out.append(Segment(cursor, start, None, "content", message))
            cursor, state = start, "header"
            continue
        if state == "header":
            body = text.find(HARMONY_MESSAGE, cursor)
            stop = len(text) if body < 0 else body + len(HARMONY_MESSAGE)
            header = text[cursor:stop]
            channel = _channel_of(header)
            out.append(Segment(cursor, stop, channel, "header", message))
            cursor, state = stop, "content"
            continue
        channel = out[-1].channel if out else _channel_of(text[:cursor])
        end, marker = _next_end(text, cursor)
        if end < 0:
            out.append(Segment(cursor, len(text), channel, "content", message))
            break
        out.append(Segment(cursor, end, channel, "content", message))
        out.append(Segment(end, end + len(marker), channel, "footer", message))
        cursor, state, message = end + len(marker), "outside", message + 1
    return out


def _opening_state(text: str) -> str:
    start = text.find(HARMONY_START)
    first = len(text) if start < 0 else start
    body = text.find(HARMONY_MESSAGE)
    end, _ = _next_end(text, 0)
    candidates = [(body, "header"), (end, "content")]
    earliest = [(i, s) for i, s in candidates if 0 <= i < first]
    return min(earliest)[1] if earliest else "outside"


def _next_end(text: str, cursor: int) -> tuple[int, str]:
    found = [(text.find(m, cursor), m) for m in HARMONY_ENDS]
    found = [(i, m) for i, m in found if i >= 0]
    return min(found) if found else (-1, "")


def _channel_of(header: str) -> str | None:
    """The word after `<|channel|>` in a header (`analysis`, or `commentary` in
    `<|channel|>commentary to=functions.f <|constrain|>json`)."""
    at = header.rfind(HARMONY_CHANNEL)
    if at < 0:
        return None
    rest = header[at + len(HARMONY_CHANNEL) :]
    word = rest.split("<|", 1)[0].split()
    return word[0] if word else None


def label_tokens(offsets: Sequence[Sequence[int]], parts: Sequence[Segment]) -> list[Segment]:
    """The segment each token falls in, by the first character it covers (a token that starts
    before the segment it mostly covers, e.g. a byte-level space, counts where it starts)."""
    labels = []
    index = 0
    cursor = 0
    for start, _ in offsets:
        cursor = max(cursor, int(start))
        while index < len(parts) - 1 and cursor >= parts[index].end:
            index += 1
        labels.append(parts[index])
    return labels


def generation_labels(
    tokenizer: Any,
    prompt_ids: Sequence[int],
    generated_ids: Sequence[int],
    *,
    fmt: str | None = None,
) -> tuple[tuple[str | None, str, int], ...]:
    """`(channel, section, message)` for every generated token, message counted from 0 at the
    first generated token's message (a harmony reply of analysis then final is messages 0, 1)."""
    fmt = chat_format(tokenizer, fmt)
    generated = [int(i) for i in generated_ids]
    if not generated:
        return ()
    ids = [int(i) for i in prompt_ids] + generated
    text, offsets = _decoded_offsets(tokenizer, ids)
    parts = segments(text, fmt)
    labels = label_tokens(offsets, parts)[len(prompt_ids) :]
    first = labels[0].message
    return tuple((s.channel, s.section, s.message - first) for s in labels)


def _decoded_offsets(tokenizer: Any, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """The decoded text and each token's character range in it. Generated ids need not be what
    the tokenizer would make of their text (re-encoding may merge them), so the ranges come
    from decoding, not from re-tokenizing: token by token when that spells the whole text,
    else by growing prefixes (a token that ends inside a multi-byte character)."""
    text = tokenizer.decode(ids, skip_special_tokens=False)
    pieces = [tokenizer.decode([i], skip_special_tokens=False) for i in ids]
    if "".join(pieces) != text:
        ends = [
            len(tokenizer.decode(ids[: n + 1], skip_special_tokens=False)) for n in range(len(ids))
        ]
        pieces = []
        for n, end in enumerate(ends):
            begin = ends[n - 1] if n else 0
            pieces.append(text[begin : max(begin, end)])
    offsets = []
    cursor = 0
    for piece in pieces:
        offsets.append((cursor, cursor + len(piece)))
        cursor += len(piece)
    return text, offsets
