"""How do a generation's logprobs read in OpenAI's two response shapes?

The OpenAI routes take the fields OpenAI defines (`/v1/completions`: `logprobs: N`;
`/v1/chat/completions`: `logprobs: true` and `top_logprobs: N`) and answer in the shape each
route has there: the legacy `{tokens, token_logprobs, top_logprobs: [{token: logprob}],
text_offset}` for completions, `{content: [{token, logprob, bytes, top_logprobs}]}` for chat.
Token strings can collide (two ids that decode alike), so every chat entry also carries its
`token_id`, and the `interp` object of the response holds the alternatives by id.

The values are the engine's: log_softmax of the raw logits (before penalties and temperature),
vLLM's default "raw_logprobs" meaning, on every backend.
"""

from __future__ import annotations

import math
from typing import Any

from interp_core.errors import InvalidArgument
from interp_core.sampling import MAX_LOGPROBS

__all__ = ["chat_logprobs", "completion_logprobs", "requested_logprobs", "step_logprobs"]


def _count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LOGPROBS:
        message = f"{field}={value!r} must be an int in [0, {MAX_LOGPROBS}]"
        raise InvalidArgument(message)
    return value


def requested_logprobs(body: Any, *, chat: bool) -> int | None:
    """How many alternatives the OpenAI fields ask for per token; None when logprobs are off."""
    if chat:
        if body.logprobs in (None, False):
            if body.top_logprobs not in (None, 0):
                message = "top_logprobs needs logprobs: true (OpenAI's rule); set both"
                raise InvalidArgument(message)
            return None
        if body.logprobs is not True:
            message = f"logprobs={body.logprobs!r} on chat completions must be true or false"
            raise InvalidArgument(message)
        return _count(body.top_logprobs or 0, "top_logprobs")
    if body.top_logprobs is not None:
        message = "top_logprobs is a chat field; /v1/completions takes logprobs: N"
        raise InvalidArgument(message)
    return None if body.logprobs is None else _count(body.logprobs, "logprobs")


def _finite(value: float) -> float:
    # JSON has no -inf; OpenAI clients read -9999 as "no probability" (vLLM sends the same).
    return value if math.isfinite(value) else -9999.0


def _piece(tokenizer: Any, token: int) -> str:
    return str(tokenizer.decode([token]))


def _chat_entry(tokenizer: Any, token: int, logprob: float) -> dict[str, Any]:
    piece = _piece(tokenizer, token)
    return {
        "token": piece,
        "logprob": _finite(logprob),
        "bytes": list(piece.encode()),
        "token_id": token,
    }


def step_logprobs(tokenizer: Any, entries: Any, top: int, *, chat: bool, offset: int = 0) -> Any:
    """`entries` (`TokenLogprobs`, one per token) in the route's OpenAI shape, `top` each."""
    if chat:
        content = []
        for entry in entries:
            item = _chat_entry(tokenizer, entry.token_id, entry.logprob)
            item["top_logprobs"] = [_chat_entry(tokenizer, t, lp) for t, lp in entry.top[:top]]
            content.append(item)
        return {"content": content}
    tokens, offsets = [], []
    for entry in entries:
        piece = _piece(tokenizer, entry.token_id)
        tokens.append(piece)
        offsets.append(offset)
        offset += len(piece)
    return {
        "tokens": tokens,
        "token_logprobs": [_finite(entry.logprob) for entry in entries],
        "top_logprobs": [
            {_piece(tokenizer, t): _finite(lp) for t, lp in entry.top[:top]} for entry in entries
        ],
        "text_offset": offsets,
    }


def chat_logprobs(tokenizer: Any, generation: Any, top: int) -> Any:
    return step_logprobs(tokenizer, generation.logprobs or (), top, chat=True)


def completion_logprobs(tokenizer: Any, generation: Any, top: int) -> Any:
    return step_logprobs(tokenizer, generation.logprobs or (), top, chat=False)
