"""A request's text and token ids, checked before anything reads them.

What arrives as JSON is refused here with 400 and a reason, never handed on to fail deep inside a
tokenizer or an embedding as a 500: token ids must be ints (`true` is not token 1) as one prompt
`[seq]` or a batch `[[...], ...]`, and inside the vocabulary where no backend checks; text must
be valid Unicode (JSON can carry a lone surrogate such as "\\ud800", which no tokenizer can
encode) and, all of a request's text together, at most the server's `max_text_chars`, counted
before tokenizing.
"""

from __future__ import annotations

from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["check_ids", "check_text", "text_chars"]


def text_chars(text: Any) -> int | None:
    """Characters in a string or a list of strings; None for anything else."""
    if isinstance(text, str):
        return len(text)
    if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
        return sum(len(t) for t in text)
    return None


def check_text(text: Any, cap: int, what: str = "text") -> None:
    chars = text_chars(text)
    if chars is None:
        message = f"{what} must be a string or a non-empty list of strings"
        raise InvalidArgument(message)
    if chars > cap:
        message = (
            f"{what} is {chars:,} characters, over this server's cap of {cap:,} characters "
            f"per request (tokenizing is checked before it runs); send shorter text, or ask the "
            f"operator to raise --max-text-chars"
        )
        raise InvalidArgument(message)
    for piece in [text] if isinstance(text, str) else text:
        try:
            piece.encode("utf-8")
        except UnicodeEncodeError as error:
            message = (
                f"{what} is not valid Unicode: it holds a lone surrogate "
                f"({piece[error.start]!r} at character {error.start}), which no tokenizer can "
                f"encode; send the text as UTF-8 without unpaired \\\\ud800-\\\\udfff escapes"
            )
            raise InvalidArgument(message) from None


def _bad(what: str, item: Any, vocab: int) -> CapabilityUnsupported:
    shown = repr(item)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    message = (
        f"{what} holds {shown}, which is not a token id: ids are ints from 0 to {vocab - 1} "
        f"(this model's vocabulary), given as one prompt [seq] or a batch [[...], ...]"
    )
    return CapabilityUnsupported(message)


def _row(row: list[Any], vocab: int, what: str, in_range: bool) -> None:
    for item in row:
        if type(item) is not int or (in_range and not 0 <= item < vocab):
            raise _bad(what, item, vocab)


def check_ids(tokens: Any, vocab: int, what: str = "tokens", *, in_range: bool = False) -> Any:
    """`tokens` as given, once every id in them is an int (a bool, a float, a string or a list
    nested deeper than `[[...], ...]` is refused as the backends refuse non-integer ids:
    CapabilityUnsupported); with `in_range`, also inside the vocabulary (for calls no backend
    checks, such as detokenizing). Empty and ragged prompts are left to the backend's words.
    """
    if not isinstance(tokens, list):
        return tokens
    if any(isinstance(row, list) for row in tokens):
        for row in tokens:
            if not isinstance(row, list):
                raise _bad(what, row, vocab)
            _row(row, vocab, what, in_range)
    else:
        _row(tokens, vocab, what, in_range)
    return tokens
