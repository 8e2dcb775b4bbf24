"""Which reasoning chat formats do the chat-span tests render, and with what tokenizer?

No model hub is reachable, so the two reasoning formats are written here as small Jinja templates
in the shape their checkpoints use, over the shared test tokenizer:

- `THINK_TEMPLATE`: ChatML turns; an assistant message's `reasoning_content` is rendered as a
  `<think>` block before its content, and `enable_thinking=False` writes an empty block in the
  generation prompt (the switch Qwen3-style templates have).
- `HARMONY_TEMPLATE`: harmony messages (`<|start|>ROLE<|channel|>CH<|message|>TEXT<|end|>`): a
  fixed system message (the reasoning effort), the caller's system message as a developer message,
  an assistant's `thinking` as an `analysis` message before its `final` one, and
  `<|start|>assistant` as the generation prompt.

DeepSeek-V4 has no template (its format is rendered in code, `interp_core.deepseek_v4_chat`);
`reasoning_tokenizer("deepseek-v4")` is the test tokenizer with no template and that format's
markers (`DEEPSEEK_V4_MARKERS`) added.

`reasoning_tokenizer(fmt)` is the test tokenizer with that template and its markers added as
special tokens (one id each, after the 1000 the models embed), so a span boundary is a token
boundary and tests can assert exact token ranges. Those ids lie outside the tiny models'
vocabulary: use it for tokenizer-only tests, and the plain tokenizer for generation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interp_testmodels.tokenizer import SPECIAL_TOKENS, build_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

__all__ = [
    "DEEPSEEK_V4_MARKERS",
    "HARMONY_MARKERS",
    "HARMONY_TEMPLATE",
    "THINK_MARKERS",
    "THINK_TEMPLATE",
    "reasoning_tokenizer",
]

THINK_MARKERS = ("<think>", "</think>")
HARMONY_MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>")
DEEPSEEK_V4_MARKERS = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    *THINK_MARKERS,
)

THINK_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}"
    "{% if m.get('reasoning_content') %}"
    "{{ '<think>\n' + m['reasoning_content'] + '\n</think>\n\n' }}"
    "{% endif %}"
    "{{ m['content'] + '<|im_end|>\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\n\n</think>\n\n' }}"
    "{% endif %}"
    "{% endif %}"
)

HARMONY_TEMPLATE = (
    "{{ '<|start|>system<|message|>Reasoning: low<|end|>' }}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}"
    "{{ '<|start|>developer<|message|># Instructions\n\n' + m['content'] + '<|end|>' }}"
    "{% elif m['role'] == 'assistant' %}"
    "{% if m.get('thinking') %}"
    "{{ '<|start|>assistant<|channel|>analysis<|message|>' + m['thinking'] + '<|end|>' }}"
    "{% endif %}"
    "{{ '<|start|>assistant<|channel|>final<|message|>' + m['content'] + '<|end|>' }}"
    "{% else %}"
    "{{ '<|start|>' + m['role'] + '<|message|>' + m['content'] + '<|end|>' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start|>assistant' }}{% endif %}"
)


def reasoning_tokenizer(fmt: str) -> PreTrainedTokenizerFast:
    """The test tokenizer rendering `fmt` ("think", "harmony" or "deepseek-v4", which has no
    template), its markers one token each."""
    templates = {
        "think": (THINK_TEMPLATE, THINK_MARKERS),
        "harmony": (HARMONY_TEMPLATE, HARMONY_MARKERS),
        "deepseek-v4": (None, DEEPSEEK_V4_MARKERS),
    }
    template, markers = templates[fmt]
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens(
        {"additional_special_tokens": [*SPECIAL_TOKENS[2:], *markers]}  # keep the ChatML ones
    )
    tokenizer.chat_template = template
    return tokenizer
