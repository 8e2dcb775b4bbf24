"""Reasoning channels in chat spans and in generated tokens: <think> blocks and harmony.

The templates (interp_testmodels.chat_templates) mark every boundary with a token of its own, so
each expected span is an exact token range: the decoded tokens of every (message, section,
channel) group are asserted, and the groups must tile the chat in order.
"""

from __future__ import annotations

import copy
import itertools

import pytest
from chat_helpers import driven, label_groups, span_groups
from eager_helpers import model

from interp_core.channels import generation_labels
from interp_core.chat import message_spans
from interp_core.errors import CapabilityUnsupported
from interp_testmodels.chat_templates import THINK_TEMPLATE, reasoning_tokenizer
from interp_testmodels.tokenizer import build_tokenizer

_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
    {
        "role": "assistant",
        "content": "Paris.",
        "reasoning_content": "The capital of France is Paris.",
        "thinking": "Easy one.",
    },
    {"role": "user", "content": "And Germany?"},
]


def test_think_spans_label_the_reasoning_analysis_and_the_answer_final() -> None:
    tokenizer = reasoning_tokenizer("think")
    chat = message_spans(tokenizer, _CHAT, add_generation_prompt=True)
    assert tokenizer.decode(list(chat.token_ids)) == chat.text
    assert span_groups(tokenizer, chat) == [
        ((0, "system", "header", None), "<|im_start|>system\n"),
        ((0, "system", "content", None), "Be brief."),
        ((0, "system", "footer", None), "<|im_end|>\n"),
        ((1, "user", "header", None), "<|im_start|>user\n"),
        ((1, "user", "content", None), "What is the capital of France?"),
        ((1, "user", "footer", None), "<|im_end|>\n"),
        ((2, "assistant", "header", None), "<|im_start|>assistant\n"),
        ((2, "assistant", "header", "analysis"), "<think>"),
        ((2, "assistant", "content", "analysis"), "\nThe capital of France is Paris.\n"),
        ((2, "assistant", "footer", "analysis"), "</think>"),
        ((2, "assistant", "header", None), "\n\n"),
        ((2, "assistant", "content", "final"), "Paris."),
        ((2, "assistant", "footer", None), "<|im_end|>\n"),
        ((3, "user", "header", None), "<|im_start|>user\n"),
        ((3, "user", "content", None), "And Germany?"),
        ((3, "user", "footer", None), "<|im_end|>\n"),
        ((4, "assistant", "header", None), "<|im_start|>assistant\n"),
    ]
    assert chat.partition == ((0, 15), (15, 31), (31, 57), (57, 68), (68, 73))


def test_enable_thinking_false_writes_an_empty_block_in_the_generation_prompt() -> None:
    tokenizer = reasoning_tokenizer("think")
    chat = message_spans(tokenizer, _CHAT, add_generation_prompt=True, enable_thinking=False)
    assert span_groups(tokenizer, chat)[-5:] == [
        ((4, "assistant", "header", None), "<|im_start|>assistant\n"),
        ((4, "assistant", "header", "analysis"), "<think>"),
        ((4, "assistant", "content", "analysis"), "\n\n"),
        ((4, "assistant", "footer", "analysis"), "</think>"),
        ((4, "assistant", "header", None), "\n\n"),
    ]
    # A template without the switch refuses it instead of ignoring it.
    with pytest.raises(CapabilityUnsupported, match="no thinking switch"):
        message_spans(build_tokenizer(), _CHAT, enable_thinking=False)


def test_harmony_spans_follow_each_harmony_message_and_its_channel() -> None:
    tokenizer = reasoning_tokenizer("harmony")
    chat = message_spans(tokenizer, _CHAT, add_generation_prompt=True)
    system = (
        "<|start|>system<|message|>Reasoning: low<|end|>"
        "<|start|>developer<|message|># Instructions\n\n"
    )
    assert span_groups(tokenizer, chat) == [
        ((0, "system", "header", None), system),
        ((0, "system", "content", None), "Be brief."),
        ((0, "system", "footer", None), "<|end|>"),
        ((1, "user", "header", None), "<|start|>user<|message|>"),
        ((1, "user", "content", None), "What is the capital of France?"),
        ((1, "user", "footer", None), "<|end|>"),
        (
            (2, "assistant", "header", "analysis"),
            "<|start|>assistant<|channel|>analysis<|message|>",
        ),
        ((2, "assistant", "content", "analysis"), "Easy one."),
        ((2, "assistant", "footer", "analysis"), "<|end|>"),
        ((2, "assistant", "header", "final"), "<|start|>assistant<|channel|>final<|message|>"),
        ((2, "assistant", "content", "final"), "Paris."),
        ((2, "assistant", "footer", "final"), "<|end|>"),
        ((3, "user", "header", None), "<|start|>user<|message|>"),
        ((3, "user", "content", None), "And Germany?"),
        ((3, "user", "footer", None), "<|end|>"),
        ((4, "assistant", "header", None), "<|start|>assistant"),
    ]


def test_a_plain_template_has_no_channels() -> None:
    chat = message_spans(build_tokenizer(), _CHAT[:2], add_generation_prompt=True)
    assert {s.channel for s in chat.spans} == {None}


def test_continue_final_message_leaves_the_last_message_open() -> None:
    tokenizer = reasoning_tokenizer("think")
    chat = [*_CHAT[:2], {"role": "assistant", "content": "<think>\nLet me see"}]
    spans = message_spans(tokenizer, chat, continue_final_message=True)
    assert spans.text.endswith("<|im_start|>assistant\n<think>\nLet me see")
    assert span_groups(tokenizer, spans)[-3:] == [
        ((2, "assistant", "header", None), "<|im_start|>assistant\n"),
        ((2, "assistant", "header", "analysis"), "<think>"),
        ((2, "assistant", "content", "analysis"), "\nLet me see"),
    ]
    with pytest.raises(CapabilityUnsupported, match="set only one"):
        message_spans(tokenizer, chat, continue_final_message=True, add_generation_prompt=True)


def _harmony_reply(answer: str) -> str:
    """A harmony reply: a short analysis message, then the final `answer`."""
    return (
        "<|channel|>analysis<|message|>Hm.<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{answer}<|return|>"
    )


def _harmony_groups(answer: str) -> list[tuple]:
    """The labelled runs of `_harmony_reply(answer)`: message 0 the analysis, 1 the answer."""
    return [
        (("analysis", "header", 0), "<|channel|>analysis<|message|>"),
        (("analysis", "content", 0), "Hm."),
        (("analysis", "footer", 0), "<|end|>"),
        (("final", "header", 1), "<|start|>assistant<|channel|>final<|message|>"),
        (("final", "content", 1), answer),
        (("final", "footer", 1), "<|return|>"),
    ]


def test_generated_tokens_carry_their_channel_and_message() -> None:
    tokenizer = reasoning_tokenizer("harmony")
    prompt = message_spans(tokenizer, _CHAT[:2], add_generation_prompt=True).token_ids
    ids = tokenizer(_harmony_reply("Paris"), add_special_tokens=False)["input_ids"]
    labels = generation_labels(tokenizer, prompt, ids)
    assert label_groups(tokenizer, ids, labels) == _harmony_groups("Paris")
    think = reasoning_tokenizer("think")
    opened = think("<|im_start|>assistant\n<think>\n", add_special_tokens=False)["input_ids"]
    out = think("So it is.</think>\n\nParis.", add_special_tokens=False)["input_ids"]
    labels = generation_labels(think, opened, out)
    channels = [text for _, text in label_groups(think, out, labels)]
    assert channels == ["So it is.", "</think>", "\n\nParis."]
    assert [k for k, _ in itertools.groupby(labels)] == [
        ("analysis", "content", 0),
        ("analysis", "footer", 0),
        ("final", "content", 0),
    ]


_REPLIES = {"think": " so.</think>\n\nBlue.", "harmony": _harmony_reply("Blue.")}
_EXPECTED = {
    "think": [
        (("analysis", "content", 0), " so."),
        (("analysis", "footer", 0), "</think>"),
        (("final", "content", 0), "\n\nBlue."),
    ],
    "harmony": _harmony_groups("Blue."),
}


@pytest.mark.parametrize("fmt", ["think", "harmony"])
def test_a_tiny_models_generated_tokens_carry_their_channels(fmt: str) -> None:
    # The model's own tokenizer (its vocabulary: the markers are several tokens each) with the
    # format's template; the labels come from what the model generated, not from a tokenizer.
    m = model("llama")
    tokenizer = copy.deepcopy(m.tokenizer)
    if fmt == "think":  # continue an assistant turn that opened a <think> block
        tokenizer.chat_template = THINK_TEMPLATE
        chat = [
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "<think>\nWell"},
        ]
        prompt = list(message_spans(tokenizer, chat, continue_final_message=True).token_ids)
    else:  # a harmony prompt without the system message, to fit the model's 128 positions
        prompt = tokenizer.encode(
            "<|start|>user<|message|>Hi<|end|><|start|>assistant", add_special_tokens=False
        )
    reply = _REPLIES[fmt]
    generated = driven(m, prompt, tokenizer.encode(reply, add_special_tokens=False))
    labels = m.generation_labels(prompt, generated, fmt=fmt)
    assert label_groups(tokenizer, generated, labels) == _EXPECTED[fmt]


def test_a_template_writing_both_formats_is_refused() -> None:
    both = copy.deepcopy(build_tokenizer())
    both.chat_template = "<think></think><|channel|><|message|>"
    with pytest.raises(CapabilityUnsupported, match="both"):
        message_spans(both, _CHAT[:1])
