"""What a rendered chat's tokens belong to: the types every chat renderer answers in.

`TokenSpan` labels one token; `ChatSpans` holds a rendered chat, one span per token and each
message's token range. The template path (`interp_core.chat`) and the formats rendered in code
(`interp_core.chat_formats`) both build them, so they live apart from either.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChatSpans", "TokenSpan"]


@dataclass(frozen=True, slots=True)
class TokenSpan:
    """What one token of a rendered chat belongs to."""

    message: int  # index into the messages (len(messages) for the generation prompt)
    role: str
    section: str  # one of SECTIONS
    # The reasoning channel (`interp_core.channels`: analysis / commentary / final) for a
    # template with <think> blocks or harmony channels; None in a plain template, and for the
    # template's own markers around a message.
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class ChatSpans:
    """A rendered chat: its text, token ids, one `TokenSpan` per token and the per-message
    partition (`[start, end)` token ranges, contiguous, covering every token)."""

    text: str
    token_ids: tuple[int, ...]
    spans: tuple[TokenSpan, ...]
    partition: tuple[tuple[int, int], ...]
