"""Documents tokenised and packed into fixed-length contexts, the way SAELens packs them.

SAELens's activation store concatenates tokenised documents into contexts of exactly
`context_size` tokens; documents are cut across contexts, the last partial context is dropped,
and two optional special tokens shape the stream: one at the start of every context and a
separator between documents that meet inside a context. A special token is never doubled: it
is skipped where the next token already is that token (a tokenizer that adds BOS itself). The
BOS policies name its settings with the tokenizer's BOS as both tokens:

- `"context"` (SAELens's default): BOS starts every context and separates documents.
- `"context-start"`: BOS starts every context; documents are joined back to back.
- `"none"`: documents joined back to back, no special token anywhere.

(SAELens's third token, one at the start of every document, is the separator again when it is
BOS too: a document then starts with BOS wherever it lands, exactly as under `"context"`.)

Each context records where its first document token came from (document index, token offset), so
a harvested row can be traced back to its text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["BOS_POLICIES", "Context", "PackingPolicy", "pack", "tokenizer_encoder"]

BOS_POLICIES = ("context", "context-start", "none")


@dataclass(frozen=True)
class Context:
    """One packed context: `tokens` (exactly the context size), and the document index and token
    offset (in that document's own tokens) of its first document token."""

    index: int
    tokens: tuple[int, ...]
    document: int
    offset: int
    resume_at: tuple[int, int] = (0, 0)
    """Where packing stands after this context (document, token offset): the next context
    starts there, so `pack(..., start=resume_at)` continues without tokenising the documents
    before it (a context start carries no state beyond its position)."""


@dataclass(frozen=True)
class PackingPolicy:
    context_size: int
    bos: str = "context"
    bos_token_id: int | None = None

    def __post_init__(self) -> None:
        if self.context_size < 2:
            message = f"context_size must be at least 2 tokens, got {self.context_size}"
            raise InvalidArgument(message)
        if self.bos not in BOS_POLICIES:
            message = f"bos={self.bos!r} is not a BOS policy; use one of {BOS_POLICIES}"
            raise InvalidArgument(message)
        if self.bos != "none" and self.bos_token_id is None:
            message = (
                f"bos={self.bos!r} needs the tokenizer's BOS token, and this tokenizer has none; "
                f"pack with bos='none' (--bos none), which joins documents without a separator"
            )
            raise CapabilityUnsupported(message)

    @property
    def context_start(self) -> int | None:
        return self.bos_token_id if self.bos != "none" else None

    @property
    def separator(self) -> int | None:
        return self.bos_token_id if self.bos == "context" else None

    def describe(self) -> dict[str, Any]:
        return {
            "context_size": self.context_size,
            "bos": self.bos,
            "bos_token_id": self.bos_token_id,
        }


def tokenizer_encoder(tokenizer: Any) -> Callable[[str], list[int]]:
    """A document's token ids with no special tokens (packing adds those), through `encode`,
    which HF tokenizers and the remote backend's tokenizer both have."""

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    return encode


def pack(
    documents: Iterable[str],
    encode: Callable[[str], Sequence[int]],
    policy: PackingPolicy,
    *,
    max_contexts: int | None = None,
    start: tuple[int, int] = (0, 0),
    first_index: int = 0,
) -> Iterator[Context]:
    """Contexts of exactly `policy.context_size` tokens, in order, at most `max_contexts`.

    `start` is a context's `resume_at` (the documents before it are iterated past, not
    tokenised) and `first_index` the index the next context gets. Streaming: one document's
    tokens and one context are held at a time.
    """
    size = policy.context_size
    current: list[int] = []
    origin = (0, 0)
    produced = 0
    if max_contexts is not None and max_contexts <= 0:
        return
    start_document, start_offset = start
    for document, text in enumerate(documents):
        if document < start_document:
            continue
        tokens = list(encode(text))
        offset = start_offset if document == start_document else 0
        while offset < len(tokens):
            edge = policy.context_start if not current else policy.separator
            # never doubled: a piece that already starts with the token gets none
            prefix = [edge] if edge is not None and tokens[offset] != edge else []
            if not current:
                origin = (document, offset)
            room = size - len(current)
            current.extend(prefix[:room])
            taken = max(room - len(prefix), 0)
            current.extend(tokens[offset : offset + taken])
            offset += taken
            if len(current) == size:
                after = (document, offset) if offset < len(tokens) else (document + 1, 0)
                yield Context(first_index + produced, tuple(current), *origin, after)
                produced += 1
                current = []
                if max_contexts is not None and produced >= max_contexts:
                    return
