"""Where captured activations wait for their owner to fetch them, and for how long.

A capture's tensors are kept as safetensors bytes under a random handle until their time to live
runs out, then dropped, and the handle answers 404. Two limits bound the memory: one capture may
hold at most `request_cap` bytes, and all held captures together at most `budget` bytes. Both are
refused up front with the size and the cap (413), never by evicting someone else's live capture.
A capture belongs to the API key that made it: another key's read or delete of its handle is
answered 404, exactly as a handle that never existed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from interp_serve.errors import StoreFull, TooLarge

__all__ = ["ActivationStore", "check_request_bytes", "owner_of", "show_bytes"]


def show_bytes(n: int) -> str:
    return f"{n:,} bytes ({n / 2**20:.2f} MiB)"


def check_request_bytes(size: int, cap: int) -> None:
    """Refuse a capture of `size` bytes over the per-request cap, naming both."""
    if size > cap:
        message = (
            f"the capture would hold {show_bytes(size)}, over this server's per-request cap of "
            f"{show_bytes(cap)}; capture fewer points, layers or tokens per request, or ask the "
            f"operator to raise --max-capture-bytes"
        )
        raise TooLarge(message)


@dataclass
class _Entry:
    data: bytes
    expires: float
    meta: dict[str, object]
    owner: str


class ActivationStore:
    """Handles to safetensors bytes, with a TTL, a per-request cap and a global budget."""

    def __init__(self, *, ttl_s: float, request_cap: int, budget: int) -> None:
        self.ttl_s = ttl_s
        self.request_cap = request_cap
        self.budget = budget
        self._entries: dict[str, _Entry] = {}

    @property
    def held_bytes(self) -> int:
        self._expire()
        return sum(len(e.data) for e in self._entries.values())

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, e in self._entries.items() if e.expires <= now]:
            del self._entries[key]

    def put(self, data: bytes, meta: dict[str, object], owner: str = "") -> tuple[str, float]:
        """Keep `data` for `owner` (the API key that made it, as `owner_of` names it); return
        its handle and its time to live in seconds."""
        check_request_bytes(len(data), self.request_cap)
        held = self.held_bytes
        if held + len(data) > self.budget:
            message = (
                f"the activation store holds {show_bytes(held)} of its "
                f"{show_bytes(self.budget)} budget and cannot take {show_bytes(len(data))} "
                f"more; fetch or delete earlier captures "
                f"(DELETE /v1/activations/{{id}}), wait for them to expire "
                f"({self.ttl_s:g} s), or capture less"
            )
            raise StoreFull(message)
        handle = "act-" + secrets.token_urlsafe(18)
        self._entries[handle] = _Entry(data, time.monotonic() + self.ttl_s, meta, owner)
        return handle, self.ttl_s

    def _owned(self, handle: str, owner: str) -> _Entry | None:
        # Another key's handle is answered exactly as a missing one: nothing tells them apart.
        self._expire()
        entry = self._entries.get(handle)
        return entry if entry is not None and hmac.compare_digest(entry.owner, owner) else None

    def get(self, handle: str, owner: str = "") -> bytes | None:
        entry = self._owned(handle, owner)
        return None if entry is None else entry.data

    def delete(self, handle: str, owner: str = "") -> bool:
        if self._owned(handle, owner) is None:
            return False
        del self._entries[handle]
        return True


def owner_of(key: bytes | None) -> str:
    """The name a key's captures are kept under: a digest, so the store never holds the key."""
    return "" if not key else hashlib.sha256(key).hexdigest()
