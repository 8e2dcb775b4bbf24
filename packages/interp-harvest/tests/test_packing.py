"""Packing documents into contexts: hand-worked streams for each BOS policy (SAELens's rules:
documents cut across contexts, the partial tail dropped, a special token never doubled), and
resuming from any context's `resume_at` reproducing the uninterrupted stream."""

from __future__ import annotations

import pytest
from interp_harvest.packing import PackingPolicy, pack

from interp_core.errors import CapabilityUnsupported, InvalidArgument

BOS = 0
DOCS = ["abc", "defgh", "", "ij", "klmnopq"]


def _encode(text: str) -> list[int]:
    return [ord(c) for c in text]


def _contexts(size: int, bos: str, docs: list[str] = DOCS, **kw: object) -> list[list[int]]:
    policy = PackingPolicy(size, bos, BOS)
    return [list(c.tokens) for c in pack(docs, _encode, policy, **kw)]  # type: ignore[arg-type]


def _o(text: str) -> list[int]:
    return _encode(text)


def test_context_policy_starts_every_context_and_separates_documents_with_bos() -> None:
    assert _contexts(4, "context") == [
        [BOS, *_o("abc")],
        [BOS, *_o("def")],
        # the rest of "defgh", then the separator fills the context; "" adds nothing
        [BOS, *_o("gh"), BOS],
        # "ij" starts a context: one BOS, not a context BOS and a separator
        [BOS, *_o("ij"), BOS],
        [BOS, *_o("klm")],
        [BOS, *_o("nop")],
    ]  # "q" with its context BOS is a partial tail and is dropped


def test_context_start_policy_joins_documents_back_to_back() -> None:
    assert _contexts(6, "context-start") == [
        [BOS, *_o("abcde")],
        [BOS, *_o("fghij")],
        [BOS, *_o("klmno")],
    ]


def test_none_policy_has_no_special_token() -> None:
    assert _contexts(5, "none") == [_o("abcde"), _o("fghij"), _o("klmno")]


def test_a_document_that_already_starts_with_bos_gets_no_second_one() -> None:
    docs = ["\x00ab", "\x00cd"]  # the encoder yields BOS (0) itself
    assert _contexts(3, "context", docs) == [[BOS, *_o("ab")], [BOS, *_o("cd")]]


def test_sources_and_the_budget() -> None:
    policy = PackingPolicy(4, "context", BOS)
    contexts = list(pack(DOCS, _encode, policy, max_contexts=3))
    assert [(c.index, c.document, c.offset) for c in contexts] == [(0, 0, 0), (1, 1, 0), (2, 1, 3)]


@pytest.mark.parametrize("bos", ["context", "context-start", "none"])
@pytest.mark.parametrize("size", [2, 3, 4, 7])
def test_resuming_at_any_context_continues_the_same_stream(bos: str, size: int) -> None:
    docs = [*DOCS, "rstuvwxyz", "", "AB", "CDEFGHIJKLMNOP"]
    policy = PackingPolicy(size, bos, BOS)
    whole = list(pack(docs, _encode, policy))
    assert len(whole) >= 4
    seen: list[str] = []

    def encode(text: str) -> list[int]:
        seen.append(text)
        return _encode(text)

    for cut, context in enumerate(whole):
        seen.clear()
        rest = list(pack(docs, encode, policy, start=context.resume_at, first_index=cut + 1))
        assert rest == whole[cut + 1 :]
        # the documents before the resume point are not tokenised again
        assert all(docs.index(text) >= context.resume_at[0] for text in seen if text)


def test_refusals() -> None:
    with pytest.raises(CapabilityUnsupported, match="bos='none'"):
        PackingPolicy(8, "context", None)
    with pytest.raises(InvalidArgument, match="BOS policy"):
        PackingPolicy(8, "sometimes", BOS)
    with pytest.raises(InvalidArgument, match="at least 2"):
        PackingPolicy(1, "none", None)
