"""DeepSeek-V4's chat format in chat spans: exact token groups, a partition drawn chats keep, the
format picked for a checkpoint that defines it in code, and a tiny model's generated reasoning
and answer labelled by channel.

The text itself is checked against vLLM's vendored encoder in interp-vllm's
test_deepseek_v4_encoding.py; here the tokens: the test tokenizer with the format's markers as
special tokens (`reasoning_tokenizer("deepseek-v4")`), so each span is an exact token range.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest
from chat_helpers import driven, label_groups, span_groups
from eager_helpers import model
from hypothesis import given, settings
from hypothesis import strategies as st

from interp_core import load_model
from interp_core.chat import message_spans
from interp_core.chat_formats import format_text, resolve_chat_format
from interp_core.deepseek_v4_chat import render_blocks
from interp_core.errors import CapabilityUnsupported, InvalidArgument, NoChatTemplateError
from interp_testmodels.chat_templates import reasoning_tokenizer

TOKENIZER = reasoning_tokenizer("deepseek-v4")

_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Capital of France?"},
    {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy."},
    {"role": "user", "content": "And Germany?"},
]


def _spans(messages: list[dict[str, Any]], **options: Any) -> Any:
    return message_spans(TOKENIZER, messages, chat_format="deepseek-v4", **options)


def test_thinking_mode_drops_the_earlier_reasoning_and_opens_a_block() -> None:
    chat = _spans(_CHAT, add_generation_prompt=True)
    assert span_groups(TOKENIZER, chat) == [
        ((0, "system", "header", None), "<｜begin▁of▁sentence｜>"),
        ((0, "system", "content", None), "Be brief."),
        ((1, "user", "header", None), "<｜User｜>"),
        ((1, "user", "content", None), "Capital of France?"),
        ((2, "assistant", "header", None), "<｜Assistant｜>"),
        ((2, "assistant", "footer", "analysis"), "</think>"),  # its reasoning is dropped
        ((2, "assistant", "content", "final"), "Paris."),
        ((2, "assistant", "footer", None), "<｜end▁of▁sentence｜>"),
        ((3, "user", "header", None), "<｜User｜>"),
        ((3, "user", "content", None), "And Germany?"),
        ((4, "assistant", "header", None), "<｜Assistant｜>"),
        ((4, "assistant", "header", "analysis"), "<think>"),
    ]
    assert chat.partition == ((0, 8), (8, 17), (17, 23), (23, 29), (29, 31))
    assert chat.text == format_text("deepseek-v4", _CHAT, add_generation_prompt=True)


def test_kept_reasoning_effort_and_chat_mode() -> None:
    kept = span_groups(TOKENIZER, _spans(_CHAT, drop_thinking=False, reasoning_effort="high"))
    assert kept[0][1].startswith("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum")
    assert kept[0][0] == (0, "system", "header", None)
    assert kept[4:9] == [
        ((2, "assistant", "header", None), "<｜Assistant｜>"),
        ((2, "assistant", "header", "analysis"), "<think>"),
        ((2, "assistant", "content", "analysis"), "Easy."),
        ((2, "assistant", "footer", "analysis"), "</think>"),
        ((2, "assistant", "content", "final"), "Paris."),
    ]
    chat_mode = span_groups(
        TOKENIZER, _spans(_CHAT, add_generation_prompt=True, enable_thinking=False)
    )
    assert chat_mode[-2:] == [
        ((4, "assistant", "header", None), "<｜Assistant｜>"),
        ((4, "assistant", "footer", "analysis"), "</think>"),
    ]
    assert all(text != "Easy." for _, text in chat_mode)  # chat mode writes no reasoning


def test_a_dropped_developer_message_has_an_empty_range() -> None:
    chat = [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Salut"},
        {"role": "user", "content": "Bye"},
    ]
    spans = _spans(chat, add_generation_prompt=True)
    assert spans.partition[0] == (0, 0)
    first = ((1, "user", "header", None), "<｜begin▁of▁sentence｜><｜User｜>")
    assert span_groups(TOKENIZER, spans)[0] == first
    kept = _spans(chat, add_generation_prompt=True, drop_thinking=False)
    assert span_groups(TOKENIZER, kept)[:3] == [
        ((0, "developer", "header", None), "<｜begin▁of▁sentence｜><｜User｜>"),
        ((0, "developer", "content", None), "Answer in French."),
        ((1, "user", "header", None), "<｜User｜>"),
    ]


_TEXT = st.text(alphabet="ab .\n", max_size=5)


@st.composite
def _chats(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant"]))
        message = {"role": role, "content": draw(_TEXT) or ("d" if role == "developer" else "")}
        if role == "assistant" and draw(st.booleans()):
            message["reasoning_content"] = draw(_TEXT)
        out.append(message)
    return out


@settings(max_examples=150, deadline=None)
@given(messages=_chats(), thinking=st.booleans(), drop=st.booleans())
def test_drawn_chats_partition_their_tokens_by_message(
    messages: list[dict[str, Any]], thinking: bool, drop: bool
) -> None:
    gen = messages[-1]["role"] != "assistant"
    options = {"enable_thinking": thinking, "drop_thinking": drop, "add_generation_prompt": gen}
    chat = _spans(messages, **options)
    blocks = render_blocks(
        messages, thinking=thinking, drop_thinking=drop, add_generation_prompt=gen
    )
    assert len(chat.partition) == len(blocks) == len(messages) + gen
    assert chat.partition[0][0] == 0 and chat.partition[-1][1] == len(chat.token_ids)
    for (_, stop), (start, _) in itertools.pairwise(chat.partition):
        assert stop == start
    assert chat.text == "".join(b.text for b in blocks)
    # A token belongs to the message its first character is in (a byte-level token can run
    # across two messages' texts when no marker separates them, e.g. two system messages).
    starts = list(itertools.accumulate([len(b.text) for b in blocks], initial=0))[:-1]
    offsets = TOKENIZER(chat.text, add_special_tokens=False, return_offsets_mapping=True)
    for token, (first, _) in enumerate(offsets["offset_mapping"]):
        owner = max(i for i, b in enumerate(blocks) if b.text and starts[i] <= first)
        start, stop = chat.partition[owner]
        assert start <= token < stop
        span = chat.spans[token]
        assert (span.message, span.role) == (owner, blocks[owner].role)
        assert span.channel is None or blocks[owner].role == "assistant"


def test_the_format_is_named_or_picked_from_the_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"'template', 'deepseek-v4'"):
        message_spans(TOKENIZER, _CHAT, chat_format="deepseek-v3")
    with pytest.raises(CapabilityUnsupported, match="think"):
        _spans(_CHAT, fmt="harmony")
    # A template is refused options it does not read; the code format has them.
    with pytest.raises(CapabilityUnsupported, match="no reasoning_effort option"):
        message_spans(reasoning_tokenizer("think"), _CHAT, reasoning_effort="high")
    # No template and nothing saying DeepSeek-V4: the template path's refusal, naming the format.
    with pytest.raises(NoChatTemplateError, match="deepseek-v4"):
        message_spans(TOKENIZER, _CHAT)

    class Facts:
        architecture = "DeepseekV4ForCausalLM"
        model_type = "deepseek_v4"

    assert resolve_chat_format(TOKENIZER, None, Facts()) == "deepseek-v4"
    # A checkpoint folder without a template, with the encoder DeepSeek-V4 ships beside it:
    # loaded through load_model, its spans are ours with nothing named.
    folder = tmp_path / "dsv4-like"
    shutil.copytree(model("llama").model_id, folder)
    (folder / "chat_template.jinja").unlink()
    (folder / "encoding").mkdir()
    (folder / "encoding" / "encoding_dsv4.py").write_text("# the checkpoint's encoder\n")
    m = load_model(str(folder), backend="eager")
    assert resolve_chat_format(m.tokenizer, None, m.facts) == "deepseek-v4"
    picked = m.message_spans(_CHAT, add_generation_prompt=True)
    assert picked == message_spans(
        m.tokenizer, _CHAT, add_generation_prompt=True, chat_format="deepseek-v4"
    )
    assert picked.text.endswith("<｜Assistant｜><think>")


@pytest.mark.parametrize("thinking", [True, False], ids=["thinking", "chat"])
def test_a_tiny_models_reasoning_then_answer_carry_their_channels(thinking: bool) -> None:
    # The model's own tokenizer (the markers are several tokens each), the format named.
    m = model("llama")
    chat = [{"role": "user", "content": "Name a colour."}]
    prompt = m.message_spans(
        chat, add_generation_prompt=True, chat_format="deepseek-v4", enable_thinking=thinking
    ).token_ids
    reply = (" so</think>" if thinking else "") + "Blue<｜end▁of▁sentence｜>"
    generated = driven(m, list(prompt), m.tokenizer.encode(reply, add_special_tokens=False))
    labels = m.generation_labels(prompt, generated, chat_format="deepseek-v4")
    got = label_groups(m.tokenizer, generated, labels)
    answer = [
        (("final", "content", 0), "Blue"),
        ((None, "footer", 0), "<｜end▁of▁sentence｜>"),
    ]
    reasoning = [(("analysis", "content", 0), " so"), (("analysis", "footer", 0), "</think>")]
    assert got == (reasoning if thinking else []) + answer
