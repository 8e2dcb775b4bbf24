"""The server's own refusals, and the HTTP status of every error it can answer with.

Library errors (`interp_core.errors`) keep their class across the wire; these are the refusals
that only a server makes: limits, overload, deadlines, auth, expired handles, a dead engine. The
`remote` backend re-raises each as the same class with the same message.
"""

from __future__ import annotations

from interp_core.errors import BackendUnavailable, InterpError

__all__ = [
    "ClientGone",
    "EngineDead",
    "HandleNotFound",
    "Overloaded",
    "RemoteError",
    "RequestTimeout",
    "StoreFull",
    "TooLarge",
    "Unauthorized",
    "status_of",
]


class RemoteError(InterpError, RuntimeError):
    """An error answer the client cannot map to a known class (a proxy's page, a 500).

    `status` is the HTTP status; `retry_after` the seconds the server asked to wait, if it said.
    """

    def __init__(self, message: str, status: int = 0, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class TooLarge(InterpError, ValueError):
    """A request body or a capture larger than the server's cap (HTTP 413)."""


class StoreFull(TooLarge):
    """The activation store's global budget cannot take one more capture now (HTTP 413)."""


class Overloaded(InterpError, RuntimeError):
    """Every slot is busy and the queue is full (HTTP 429, with Retry-After)."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EngineDead(InterpError, RuntimeError):
    """The model's engine died; the server cannot serve until restarted (HTTP 503)."""


class RequestTimeout(InterpError, TimeoutError):
    """A call ran past the server's per-request deadline (HTTP 504)."""


class ClientGone(InterpError, ConnectionError):
    """The client disconnected before its call finished; the call was cancelled (HTTP 499)."""


class Unauthorized(InterpError, PermissionError):
    """No API key, or one the server does not hold (HTTP 401)."""


class HandleNotFound(InterpError, KeyError):
    """An activation handle that expired, was deleted, or never existed (HTTP 404)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (Unauthorized, 401),
    (HandleNotFound, 404),
    (TooLarge, 413),
    (Overloaded, 429),
    (ClientGone, 499),
    (EngineDead, 503),
    (BackendUnavailable, 503),
    (RequestTimeout, 504),
    (InterpError, 400),
)


def status_of(error: BaseException) -> int:
    """The HTTP status an error is answered with (500 for anything not raised on purpose)."""
    for cls, status in _STATUS:
        if isinstance(error, cls):
            return status
    return 500
