"""The server's limits and switches, in one place, with the defaults the CLI shows."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerSettings"]

MiB = 2**20


@dataclass(frozen=True)
class ServerSettings:
    """Everything `create_app` needs besides the model.

    `api_keys` empty means no authentication (the CLI allows that only on loopback or with
    `--no-auth`). `cors_origins` empty means no CORS headers at all: browsers then refuse
    cross-origin calls, which is the safe default for a server holding keys.
    """

    api_keys: tuple[str, ...] = ()
    served_name: str | None = None
    max_body_bytes: int = 8 * MiB
    max_capture_bytes: int = 256 * MiB
    store_budget_bytes: int = 2048 * MiB
    inline_max_bytes: int = 1 * MiB
    activation_ttl_s: float = 300.0
    max_concurrency: int = 16
    max_queue: int = 256
    request_timeout_s: float = 600.0
    cors_origins: tuple[str, ...] = ()
    # Top-k a request may ask for: features per token (/v1/features) and guesses per layer and
    # position (the logit lens); the answer grows with it.
    max_top_k: int = 256
    # The activations one request's forward may need (rows x length priced from the model's
    # facts before it runs; see interp_serve.pricing).
    max_forward_bytes: int = 8192 * MiB
    # Characters of text one request may have tokenized: tokenizing is linear in them, and a
    # tokenizer's peak is tens of bytes per character.
    max_text_chars: int = 1_000_000
