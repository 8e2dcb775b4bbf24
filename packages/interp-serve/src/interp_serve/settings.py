"""The server's limits and switches, in one place, with the defaults the CLI shows."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerSettings"]

KiB = 2**10
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
    # The connection layer (interp_serve.transport), in front of the key check: what a client
    # that holds no key can make the server hold. A request head (request line and headers)
    # over `max_header_bytes` or `max_header_fields` is refused with 431; a head that has not
    # arrived in full `header_timeout_s` after the connection opened (or its previous answer
    # was sent) is closed, as is a body that stalls for `body_timeout_s`; an idle keep-alive
    # connection closes after `keep_alive_timeout_s`; connections beyond `max_connections` are
    # refused with 503. A refused request whose body is still coming is read and discarded up
    # to `drain_bytes` / `drain_timeout_s` before the close, so the client reads the refusal
    # instead of a connection reset.
    max_header_bytes: int = 32 * KiB
    max_header_fields: int = 100
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_timeout_s: float = 5.0
    max_connections: int = 512
    drain_bytes: int = 64 * MiB
    drain_timeout_s: float = 5.0
    # A folder of fitted-lens files that PUT /v1/lens_jacobians/{name} may name ({"file": ...}).
    lens_dir: str | None = None
    # The activations one request's forward may need (rows x length priced from the model's
    # facts before it runs; see interp_serve.pricing).
    max_forward_bytes: int = 8192 * MiB
    # Characters of text one request may have tokenized: tokenizing is linear in them, and a
    # tokenizer's peak is tens of bytes per character.
    max_text_chars: int = 1_000_000
    # LoRA adapters a request may name (`--lora NAME=PATH`): (name, folder) pairs.
    loras: tuple[tuple[str, str], ...] = ()
