"""The connection layer: what a client holding no key can make the server hold, bounded.

uvicorn leaves the request head unbounded on its default parser (httptools: a 16 MiB header or
100,000 header fields are read and served), arms its keep-alive timer only after an answer (a
connection that trickles a head byte by byte is never closed: every byte cancels the timer),
and `limit_concurrency` answers a text 503 only once a full head arrived. So the server runs
uvicorn's h11 protocol (h11 is a dependency of uvicorn itself, so it is always there, and it
bounds a head's bytes with `max_incomplete_event_size`) with this subclass around it, which adds:

- the head's field count (`max_header_fields`), the size of a head that arrived in one read
  (h11 measures only one still arriving), and a 431 answer in the API's `{"error": …}` shape
  for both limits, where h11 and uvicorn answer a plain-text 400;
- a deadline for a whole head (`header_timeout_s`, from the connection's start or its previous
  answer; trickled bytes do not extend it), and an idle limit on a body (`body_timeout_s`);
- a cap on open connections (`max_connections`): one more is answered 503 and closed at once;
- a lingering close: when the server closes a connection whose request is still arriving (a
  413 decided from Content-Length, a 431), it sends its answer, half-closes, and reads and
  discards up to `drain_bytes` for up to `drain_timeout_s` before closing. Closing with unread
  bytes makes the kernel send a reset, and a client that writes its whole body before reading
  (urllib, httpx) then sees "connection reset" instead of the answer.

All of this sits in front of the app, and so in front of the API key check. It relies on
uvicorn's h11 protocol's callbacks (`handle_events`, `send_400_response`,
`on_response_complete`); tests/test_transport.py runs it against a real uvicorn server.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any, cast

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from interp_serve.settings import ServerSettings

__all__ = ["error_response", "protocol_class", "uvicorn_options"]

# A connection refused for the cap is drained only briefly: its client sent a head at most.
_REFUSED_DRAIN_BYTES = 64 * 1024
_REFUSED_DRAIN_S = 1.0


def uvicorn_options(settings: ServerSettings) -> dict[str, Any]:
    """The `uvicorn.run` keywords that put this layer in front of the app."""
    return {
        "http": protocol_class(settings),
        "ws": "none",  # the API has no websocket route; an upgrade is a plain request
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "limit_concurrency": None,  # ours is max_connections, answered before any byte is read
    }


def protocol_class(settings: ServerSettings) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with `settings`' connection limits (see the module docstring)."""
    return type("GuardedH11Protocol", (_GuardedProtocol,), {"limits": settings})


def error_response(
    status: int, kind: str, message: str, headers: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """A whole HTTP/1.1 answer in the API's error shape, written past the app (and h11)."""
    body = json.dumps(
        {"error": {"message": message, "type": kind, "code": status, "param": None}}
    ).encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


class _Connection(h11.Connection):
    """h11's parser, plus the field-count limit and a record of why it refused a request."""

    def __init__(self, owner: _GuardedProtocol, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.owner = owner
        self.last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
            if isinstance(event, h11.Request):
                self.owner._head_arrived(event)
            elif isinstance(event, h11.EndOfMessage):
                self.owner._body_arrived()
        except h11.RemoteProtocolError as error:
            self.last_error = error
            raise
        return event


class _Transport:
    """The socket's transport as uvicorn sees it: `close()` goes through the protocol, which
    may linger (drain the request still arriving) before the real close."""

    def __init__(self, raw: asyncio.Transport, owner: _GuardedProtocol) -> None:
        self._raw = raw
        self._owner = owner

    def close(self) -> None:
        self._owner._close()

    def is_closing(self) -> bool:
        return self._owner._closing or self._raw.is_closing()

    def write(self, data: bytes) -> None:
        if not self._owner._closing:
            self._raw.write(data)

    def pause_reading(self) -> None:
        if not self._owner._closing:
            self._raw.pause_reading()

    def resume_reading(self) -> None:
        if not self._owner._closing:
            self._raw.resume_reading()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _GuardedProtocol(H11Protocol):
    limits: ServerSettings

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Connection(self, self.limits.max_header_bytes)
        self._raw: asyncio.Transport | None = None
        self._closing = False
        self._drain_left = 0
        self._awaiting_head = False
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._drain_timer: asyncio.TimerHandle | None = None

    # --- connection -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        transport = cast(asyncio.Transport, transport)
        self._raw = transport
        if len(self.server_state.connections) >= self.limits.max_connections:
            # Refused before a byte is read: never joins uvicorn's connections.
            message = (
                f"this server holds its cap of {self.limits.max_connections:,} open connections; "
                f"retry after the Retry-After header's seconds, or ask the operator to raise "
                f"--max-connections"
            )
            transport.write(error_response(503, "Overloaded", message, (("retry-after", "1"),)))
            self._closing = True
            self._linger(_REFUSED_DRAIN_BYTES, _REFUSED_DRAIN_S)
            return
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        if self.flow is None:  # refused for the cap: uvicorn never knew it
            return
        self._closing = True
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            # Lingering: the bytes of a request already answered, read only to be dropped.
            self._drain_left -= len(data)
            if self._drain_left < 0 and self._raw is not None:
                self._raw.close()
            return
        if self._awaiting_head:
            self._head_bytes += len(data)
        elif self._body_timer is not None:
            self._arm_body()
        super().data_received(data)

    def on_response_complete(self) -> None:
        # Armed before uvicorn starts the next pipelined request, whose head then disarms it.
        if not self.transport.is_closing():
            self._await_head()
        super().on_response_complete()

    def shutdown(self) -> None:
        # A connection already closing (lingering) ends by itself within drain_timeout_s; h11
        # may be in a state that cannot "send" a close (its head was refused past h11).
        if not self._closing:
            super().shutdown()

    def send_400_response(self, msg: str) -> None:
        """h11 refused the head: answer in the API's shape, 431 when it was too large."""
        error = self.conn.last_error
        status = getattr(error, "error_status_hint", 400) if error is not None else 400
        if status == 431:
            kind = "TooLarge"
            message = (
                f"the request head is over this server's limit of "
                f"{self.limits.max_header_bytes:,} bytes or {self.limits.max_header_fields} "
                f"header fields; send fewer or shorter headers"
            )
        else:
            status, kind = 400, "InvalidArgument"
            message = f"the request is not valid HTTP/1.1 ({error}); send a well-formed request"
        if self._raw is not None and not self._closing:
            self._raw.write(error_response(status, kind, message))
        self.transport.close()

    # --- closing --------------------------------------------------------------------------
    def _close(self) -> None:
        if self._closing or self._raw is None:
            return
        self._closing = True
        self._cancel_timers()
        state = self.conn.their_state
        incomplete = state in (h11.SEND_BODY, h11.ERROR) or (
            self._awaiting_head and self._head_bytes > 0
        )
        if incomplete:
            self._linger(self.limits.drain_bytes, self.limits.drain_timeout_s)
        else:
            self._raw.close()

    def _linger(self, budget: int, seconds: float) -> None:
        """Half-close after the answer, then drop what still arrives (bounded) before closing."""
        raw = self._raw
        assert raw is not None
        if raw.is_closing() or not raw.can_write_eof():
            raw.close()
            return
        self._drain_left = budget
        raw.write_eof()  # the client reads the whole answer, then end of stream
        raw.resume_reading()
        self._drain_timer = self.loop.call_later(seconds, raw.close)

    # --- deadlines ------------------------------------------------------------------------
    def _await_head(self) -> None:
        self._awaiting_head = True
        self._head_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_late)

    def _head_arrived(self, event: h11.Request) -> None:
        self._awaiting_head = False
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if len(event.headers) > self.limits.max_header_fields:
            message = f"{len(event.headers)} header fields"
            raise h11.RemoteProtocolError(message, error_status_hint=431)
        # h11 bounds a head still arriving; one that came whole in a single read is measured
        # here (request line + fields, as sent less optional whitespace).
        size = len(event.method) + len(event.target) + 12
        size += sum(len(name) + len(value) + 4 for name, value in event.headers) + 2
        if size > self.limits.max_header_bytes:
            message = f"a {size:,}-byte request head"
            raise h11.RemoteProtocolError(message, error_status_hint=431)
        if self.conn.their_state is h11.SEND_BODY:
            self._arm_body()

    def _body_arrived(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _arm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self._closing or self._raw is None:
            return
        if self._head_bytes:
            message = (
                f"the request head (request line and headers) did not arrive in full within "
                f"{self.limits.header_timeout_s:g} s; send it at once"
            )
            self._raw.write(error_response(408, "RequestTimeout", message))
        self._closing = True
        self._raw.close()

    def _body_late(self) -> None:
        self._body_timer = None
        if self._closing or self._raw is None:
            return
        if self.flow is not None and self.flow.read_paused:
            # Not the client's stall: the app has not read what came; wait for it.
            self._arm_body()
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            message = (
                f"the request body stalled for {self.limits.body_timeout_s:g} s; send it at once"
            )
            self._raw.write(error_response(408, "RequestTimeout", message))
        self._closing = True
        self._raw.close()

    def _cancel_timers(self) -> None:
        for name in ("_head_timer", "_body_timer"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)
