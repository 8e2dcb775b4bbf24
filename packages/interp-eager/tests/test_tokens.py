"""Do the tokenizer helpers round-trip, add BOS exactly once, and locate chat messages?

Every family (each loads its own saved tokenizer from its folder): `to_tokens` prepends the BOS
token once, whether or not the text already starts with it; `to_str_tokens` gives one string per
token that joins back to the text; `to_string` inverts `to_tokens`; a list of texts is right-
padded with the pad token; and a chat rendered with the template reports, for every message, a
token span whose decoding contains that message's content.
"""

from __future__ import annotations

import pytest
import torch
from eager_helpers import PAD_TOKEN_ID, TEST_PROMPT, model

from interp_testmodels.families import FAMILY_NAMES

_CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_to_tokens_prepends_bos_once(family: str) -> None:
    m = model(family)
    bos = m.tokenizer.bos_token_id
    bare = m.to_tokens(TEST_PROMPT, prepend_bos=False)
    ids = m.to_tokens(TEST_PROMPT)
    assert ids.dtype == torch.long and ids.shape == (1, bare.shape[1] + 1)
    assert ids[0, 0] == bos and bool((bare[0] != bos).all())
    assert torch.equal(ids[0, 1:], bare[0])
    # Text that already starts with the BOS token does not get a second one.
    again = m.to_tokens(m.tokenizer.bos_token + TEST_PROMPT)
    assert torch.equal(again, ids)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_string_helpers_round_trip(family: str) -> None:
    m = model(family)
    text = "Hello! How are you? Numbers such as 42 and 2024, and café ☕ too."
    bare = m.to_tokens(text, prepend_bos=False)
    assert m.to_string(bare[0]) == text
    assert m.to_string(bare) == [text]
    pieces = m.to_str_tokens(text, prepend_bos=False)
    assert len(pieces) == bare.shape[1]
    assert m.to_str_tokens(bare[0]) == pieces
    assert m.to_str_tokens(bare) == pieces
    with_bos = m.to_str_tokens(text)
    assert len(with_bos) == len(pieces) + 1 and with_bos[0] == m.tokenizer.bos_token
    ascii_text = "The quick brown fox jumps over the lazy dog"
    assert "".join(m.to_str_tokens(ascii_text, prepend_bos=False)) == ascii_text


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_list_of_texts_is_right_padded(family: str) -> None:
    m = model(family)
    texts = [TEST_PROMPT, "Hello!"]
    batch = m.to_tokens(texts)
    rows = [m.to_tokens(t)[0] for t in texts]
    assert batch.shape == (2, len(rows[0]))
    assert torch.equal(batch[0], rows[0])
    assert torch.equal(batch[1, : len(rows[1])], rows[1])
    assert bool((batch[1, len(rows[1]) :] == PAD_TOKEN_ID).all())


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_chat_spans_locate_every_message(family: str) -> None:
    m = model(family)
    chat = m.apply_chat_template(_CHAT)
    assert chat.token_ids.shape[0] == 1
    assert len(chat.spans) == len(_CHAT)
    # Spans tile the rendered chat in order, with nothing left over.
    assert chat.spans[0][0] == 0
    for (_, stop), (start, _) in zip(chat.spans, chat.spans[1:], strict=False):
        assert stop == start
    assert chat.spans[-1][1] == chat.token_ids.shape[1]
    for index, message in enumerate(_CHAT):
        decoded = m.tokenizer.decode(chat.message_tokens(index))
        assert message["content"] in decoded, (index, decoded)
        others = [other["content"] for j, other in enumerate(_CHAT) if j != index]
        assert not any(other in decoded for other in others), (index, decoded)
    assert m.to_string(chat.token_ids[0]) == chat.text
    # The generation prompt follows the last message's span.
    prompted = m.apply_chat_template(_CHAT, add_generation_prompt=True)
    assert prompted.spans == chat.spans
    assert prompted.token_ids.shape[1] > chat.token_ids.shape[1]
    assert torch.equal(prompted.token_ids[0, : chat.token_ids.shape[1]], chat.token_ids[0])
    assert m.to_string(prompted.token_ids[0, chat.token_ids.shape[1] :]).startswith(
        "<|im_start|>assistant"
    )
