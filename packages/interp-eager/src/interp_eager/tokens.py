"""Text to tokens and back, the way interpretability code expects.

`encode` prepends the BOS token by default (TransformerLens's convention) whether or not the
tokenizer would add it itself, and never adds it twice. `chat_tokens` renders a chat with the
model's template and reports, for every message, the span of token positions it occupies, so a
capture can be sliced to the assistant's answer or a user's question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp_core.chat import check_chat_template
from interp_core.errors import CapabilityUnsupported

__all__ = ["ChatTokens", "chat_tokens", "decode", "encode", "str_tokens"]


def _bos(tokenizer: Any) -> int | None:
    return tokenizer.bos_token_id


def _encode_one(tokenizer: Any, text: str, prepend_bos: bool) -> list[int]:
    if not isinstance(text, str):
        message = f"to_tokens takes a string or a list of strings, got {type(text).__name__}"
        raise CapabilityUnsupported(message)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = _bos(tokenizer)
    if prepend_bos and bos is not None and (not ids or ids[0] != bos):
        ids = [bos, *ids]
    return ids


def encode(tokenizer: Any, text: str | Sequence[str], *, prepend_bos: bool = True) -> torch.Tensor:
    """`[batch, seq]` token ids; a list of strings is right-padded with the pad token."""
    texts = [text] if isinstance(text, str) else list(text)
    if not texts:
        message = "to_tokens got an empty list; pass at least one string"
        raise CapabilityUnsupported(message)
    rows = [_encode_one(tokenizer, t, prepend_bos) for t in texts]
    width = max(len(r) for r in rows)
    if width == 0:
        message = "the text encodes to no tokens; pass non-empty text or prepend_bos=True"
        raise CapabilityUnsupported(message)
    if len(rows) > 1 and any(len(r) != width for r in rows):
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        rows = [r + [pad] * (width - len(r)) for r in rows]
    return torch.tensor(rows, dtype=torch.long)


def _as_ids(tokens: Any) -> list[int] | list[list[int]]:
    if isinstance(tokens, torch.Tensor):
        return tokens.tolist()
    return list(tokens)


def str_tokens(tokenizer: Any, text: Any, *, prepend_bos: bool = True) -> list[str]:
    """One string per token of a string or of one row of token ids."""
    if isinstance(text, str):
        ids = _encode_one(tokenizer, text, prepend_bos)
    else:
        ids = _as_ids(text)
        if ids and isinstance(ids[0], list):
            if len(ids) != 1:
                message = "to_str_tokens takes one sequence; index the batch first"
                raise CapabilityUnsupported(message)
            ids = ids[0]
    return [tokenizer.decode([int(i)]) for i in ids]


def decode(tokenizer: Any, tokens: Any) -> str | list[str]:
    ids = _as_ids(tokens)
    if ids and isinstance(ids[0], list):
        return [tokenizer.decode(row) for row in ids]
    return tokenizer.decode(ids)


@dataclass(frozen=True)
class ChatTokens:
    """A rendered chat: its token ids and each message's `[start, stop)` token span."""

    token_ids: torch.Tensor  # [1, seq]
    spans: tuple[tuple[int, int], ...]
    text: str

    def message_tokens(self, index: int) -> torch.Tensor:
        start, stop = self.spans[index]
        return self.token_ids[0, start:stop]


def chat_tokens(
    tokenizer: Any, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = False
) -> ChatTokens:
    """Render `messages` with the chat template and locate every message's tokens."""
    check_chat_template(tokenizer)
    if not messages:
        message = "a chat needs at least one message"
        raise CapabilityUnsupported(message)
    # Render growing prefixes: message i spans from the end of prefix i-1 to the end of prefix i.
    spans = []
    previous = 0
    for i in range(len(messages)):
        prefix = tokenizer.apply_chat_template(list(messages[: i + 1]), tokenize=False)
        ids = tokenizer(prefix, add_special_tokens=False)["input_ids"]
        spans.append((previous, len(ids)))
        previous = len(ids)
    text = tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ChatTokens(torch.tensor([ids], dtype=torch.long), tuple(spans), text)
