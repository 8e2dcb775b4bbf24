"""Which token ids may a request to the vLLM backends carry, and in what form?

vLLM runs every prompt unpadded, as a plain list of ids, so `check_prompts()` turns what a caller
passes (a `[seq]` or `[batch, seq]` tensor, array or nested list) into one list of ints per
prompt, refusing before anything is sent: a tensor whose dtype is not an integer id type (bool,
uint8 and floats are data, not ids; the eager backend refuses the same), ids that are not ints or
lie outside the vocabulary, an empty prompt, a batch of rows of different lengths (a capture
returns one `[batch, seq, ...]` tensor) and a prompt that leaves no room under `max_model_len`.
"""

from __future__ import annotations

from typing import Any

from interp_core.errors import InvalidArgument

__all__ = ["TOKEN_DTYPES", "all_ones", "check_prompts"]

# What an embedding lookup takes (torch and numpy spell them the same).
TOKEN_DTYPES = ("int64", "int32")


def check_prompts(tokens: Any, vocab: int, max_model_len: int) -> list[list[int]]:
    """One checked list of ids per prompt of `tokens` (InvalidArgument for anything else)."""
    dtype = getattr(tokens, "dtype", None)
    if dtype is not None and str(dtype).removeprefix("torch.") not in TOKEN_DTYPES:
        error = InvalidArgument.build(
            f"tokens are a {type(tokens).__name__} of {dtype}",
            "token ids are integers (int64 or int32); bool, uint8 and float arrays are data, "
            "not ids",
            "call model.to_tokens(text) to make them, or convert integer ids with .long()",
        )
        raise error
    ids = tokens.tolist() if hasattr(tokens, "tolist") else tokens
    if isinstance(ids, (list, tuple)) and ids and not isinstance(ids[0], (list, tuple)):
        ids = [ids]
    if not isinstance(ids, (list, tuple)) or not ids:
        error = InvalidArgument.build(
            f"tokens of type {type(tokens).__name__} hold no prompt",
            "a request runs a non-empty [seq] or [batch, seq] list or tensor of token ids",
            "pass token ids, e.g. model.to_tokens(text)",
        )
        raise error
    rows = [_prompt(row, vocab, max_model_len) for row in ids]
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        error = InvalidArgument.build(
            f"the batch holds prompts of {lengths} tokens",
            "one call returns [batch, seq, ...] tensors, so its prompts must be equally long "
            "(vLLM runs them unpadded)",
            "call once per prompt length (the calls run concurrently on vLLM)",
        )
        raise error
    return rows


def _prompt(row: Any, vocab: int, max_model_len: int) -> list[int]:
    if not isinstance(row, (list, tuple)) or not row:
        error = InvalidArgument.build(
            "a prompt of the batch is empty or not a list",
            "every prompt must be a non-empty list of token ids",
            "drop empty rows, or pass [seq] / [batch, seq] ids",
        )
        raise error
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in row):
        kinds = sorted({type(i).__name__ for i in row})
        error = InvalidArgument.build(
            f"token ids must be ints, got {kinds}",
            "a prompt is a flat list of vocabulary indices",
            "call model.to_tokens(text), or pass [seq] / [batch, seq] ids",
        )
        raise error
    bad = [i for i in row if not 0 <= i < vocab]
    if bad:
        error = InvalidArgument.build(
            f"token ids {bad[:5]} are outside the vocabulary [0, {vocab})",
            "the embedding has one row per vocabulary entry",
            "tokenize with this model's tokenizer (model.to_tokens)",
        )
        raise error
    if len(row) >= max_model_len:
        error = InvalidArgument.build(
            f"the prompt has {len(row)} tokens but max_model_len is {max_model_len}",
            "that leaves no room to run it",
            "shorten it or load with a larger max_model_len",
        )
        raise error
    return [int(i) for i in row]


def all_ones(mask: Any) -> bool:
    """Whether every entry of a (nested) attention mask is 1: nothing to mask."""
    values = mask.tolist() if hasattr(mask, "tolist") else mask
    flat: list[Any] = []
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            flat.append(item)
    return all(v == 1 for v in flat)
