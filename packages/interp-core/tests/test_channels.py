"""Reasoning segments of a text, stdlib only: `<think>` blocks and harmony messages."""

from __future__ import annotations

import pytest

from interp_core.channels import chat_format, segments
from interp_core.errors import InvalidArgument


def _cut(text: str, fmt: str) -> list[tuple[str, str | None, str, int]]:
    return [(text[p.start : p.end], p.channel, p.section, p.message) for p in segments(text, fmt)]


def test_think_blocks_are_analysis_and_the_rest_final() -> None:
    assert _cut("a<think>b</think>c<think>d", "think") == [
        ("a", "final", "content", 0),
        ("<think>", "analysis", "header", 0),
        ("b", "analysis", "content", 0),
        ("</think>", "analysis", "footer", 0),
        ("c", "final", "content", 0),
        ("<think>", "analysis", "header", 0),
        ("d", "analysis", "content", 0),
    ]
    # A closer before any opener: the text began inside a block (the prompt opened it).
    assert _cut("so.</think>ok", "think") == [
        ("so.", "analysis", "content", 0),
        ("</think>", "analysis", "footer", 0),
        ("ok", "final", "content", 0),
    ]


def test_harmony_messages_carry_their_channel_tool_calls_included() -> None:
    text = (
        "<|start|>user<|message|>hi<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"
        "<|call|>"
    )
    assert _cut(text, "harmony") == [
        ("<|start|>user<|message|>", None, "header", 0),
        ("hi", None, "content", 0),
        ("<|end|>", None, "footer", 0),
        (
            "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
            "commentary",
            "header",
            1,
        ),
        ("{}", "commentary", "content", 1),
        ("<|call|>", "commentary", "footer", 1),
    ]
    # Text that begins inside a header (after a prompt's `<|start|>assistant`).
    assert _cut("<|channel|>final<|message|>Paris<|return|>", "harmony") == [
        ("<|channel|>final<|message|>", "final", "header", 0),
        ("Paris", "final", "content", 0),
        ("<|return|>", "final", "footer", 0),
    ]


def test_the_format_is_read_from_the_template_or_refused() -> None:
    class Tokenizer:
        chat_template = "{{ '<|start|>' }}{{ '<|channel|>' }}{{ '<|message|>' }}"

    assert chat_format(Tokenizer()) == "harmony"
    Tokenizer.chat_template = "{{ '</think>' }}"
    assert chat_format(Tokenizer()) == "think"
    Tokenizer.chat_template = "{{ '<|im_start|>' }}"
    assert chat_format(Tokenizer()) == "plain"
    assert chat_format(Tokenizer(), "harmony") == "harmony"
    with pytest.raises(InvalidArgument, match="not a chat format"):
        segments("x", "markdown")
