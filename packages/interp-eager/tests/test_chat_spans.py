"""Per-token chat spans: message, role and section of every token, and a contiguous partition."""

from __future__ import annotations

import copy

import pytest
from eager_helpers import model

from interp_core.chat import message_spans
from interp_core.errors import CapabilityUnsupported, NoChatTemplateError
from interp_testmodels.tokenizer import build_tokenizer

# The user's content equals its role name, so a search for the text alone would find the header.
_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "user"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]


def _decoded(
    tokenizer: object, ids: tuple[int, ...], spans: tuple, message: int, section: str
) -> str:
    picked = [
        i for i, s in zip(ids, spans, strict=True) if s.message == message and s.section == section
    ]
    return tokenizer.decode(picked)  # type: ignore[attr-defined]


def test_every_token_is_labelled_with_message_role_and_section() -> None:
    tokenizer = build_tokenizer()
    chat = message_spans(tokenizer, _CHAT)
    assert len(chat.spans) == len(chat.token_ids)
    assert tokenizer.decode(list(chat.token_ids)) == chat.text
    for index, item in enumerate(_CHAT):
        assert _decoded(tokenizer, chat.token_ids, chat.spans, index, "header") == (
            f"<|im_start|>{item['role']}\n"
        )
        assert _decoded(tokenizer, chat.token_ids, chat.spans, index, "content") == item["content"]
        assert _decoded(tokenizer, chat.token_ids, chat.spans, index, "footer") == "<|im_end|>\n"
        start, end = chat.partition[index]
        assert {s.role for s in chat.spans[start:end]} == {item["role"]}
        assert {s.message for s in chat.spans[start:end]} == {index}
    # Contiguous, in order, covering every token.
    assert chat.partition[0][0] == 0 and chat.partition[-1][1] == len(chat.token_ids)
    for (_, stop), (start, _) in zip(chat.partition, chat.partition[1:], strict=False):
        assert stop == start


def test_generation_prompt_is_one_more_header_entry() -> None:
    tokenizer = build_tokenizer()
    chat = message_spans(tokenizer, _CHAT, add_generation_prompt=True)
    assert len(chat.partition) == len(_CHAT) + 1
    start, end = chat.partition[-1]
    assert tokenizer.decode(list(chat.token_ids[start:end])) == "<|im_start|>assistant\n"
    assert {(s.message, s.role, s.section) for s in chat.spans[start:end]} == {
        (len(_CHAT), "assistant", "header")
    }


def test_both_entry_points_agree_on_eager() -> None:
    m = model("llama")
    spans = m.message_spans(_CHAT)
    assert spans == message_spans(m.tokenizer, _CHAT)
    assert m.message_partition(_CHAT) == spans.partition
    # The older per-message spans of apply_chat_template tile the chat the same way.
    assert m.apply_chat_template(_CHAT).spans == spans.partition


def test_a_tokenizer_without_a_template_is_no_chat_template_error() -> None:
    tokenizer = copy.deepcopy(build_tokenizer())
    tokenizer.chat_template = None
    with pytest.raises(NoChatTemplateError, match=r"has no chat template.*to_tokens"):
        message_spans(tokenizer, _CHAT)
    assert issubclass(NoChatTemplateError, CapabilityUnsupported)
    from interp_eager.tokens import chat_tokens

    with pytest.raises(NoChatTemplateError):
        chat_tokens(tokenizer, _CHAT)


def test_rewritten_content_is_refused() -> None:
    tokenizer = copy.deepcopy(build_tokenizer())
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | upper }}<|im_end|>\n"
        "{% endfor %}"
    )
    with pytest.raises(CapabilityUnsupported, match="does not appear verbatim"):
        message_spans(tokenizer, _CHAT)
