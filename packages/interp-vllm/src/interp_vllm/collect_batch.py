"""Collect the requests that finish together in one round trip to the workers.

Every interpreted request ends with one RPC (`interp_collect`; a streamed capture drains with
`interp_drain` after each engine output) that travels client → engine core → workers and back.
The engine core serves these calls one at a time between forward steps, so when eight requests
finish in one step the eighth waits behind seven round trips, and a streamed capture of eight
requests pays eight round trips per step. Here the calls made in one pass of the event loop —
the requests whose outputs the engine delivered together — go as one `interp_collect_many` RPC,
and each caller gets its own answers back, exactly what its own call would have returned. One
batch travels at a time; the calls made meanwhile go with the next.

A caller cancelled while its batch is in flight gets nothing, and the rows files the workers
wrote for it are deleted here (`row_transfer.unpack_rows`), as its own call would have left
them to the model's shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from typing import Any

__all__ = ["rpc"]

# Event-loop passes a batch stays open after its first call: the engine's output handler wakes
# every request of one step's outputs in one pass, and each reaches its collect without yielding.
_OPEN_PASSES = 2


class _Batcher:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.pending: dict[str, list[tuple[tuple[Any, ...], asyncio.Future[Any]]]] = {}
        self.flush: asyncio.Task[None] | None = None

    async def call(self, method: str, args: tuple[Any, ...]) -> list[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(method, []).append((args, future))
        if self.flush is None:
            self.flush = asyncio.ensure_future(self._flush())
        return await future

    async def _flush(self) -> None:
        # One batch in flight at a time: the calls made while it travels (requests whose final
        # outputs the engine's output handler reached later) form the next batch, as they
        # would have queued behind it in the engine core anyway.
        try:
            while self.pending:
                for _ in range(_OPEN_PASSES):
                    await asyncio.sleep(0)
                batches, self.pending = self.pending, {}
                await asyncio.gather(*(self._send(m, items) for m, items in batches.items()))
        finally:
            self.flush = None

    async def _send(self, method: str, items: list[tuple[tuple[Any, ...], Any]]) -> None:
        try:
            if len(items) == 1:
                per_call = [await self.engine.collective_rpc(method, args=items[0][0])]
            else:
                calls = [list(args) for args, _ in items]
                per_rank = await self.engine.collective_rpc(
                    "interp_collect_many", args=(method, calls)
                )
                per_call = [list(answers) for answers in zip(*per_rank, strict=True)]
        except BaseException as exc:
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), answers in zip(items, per_call, strict=True):
            if not future.done():
                future.set_result(answers)
            else:  # its caller was cancelled: nobody will read its rows files
                _discard(answers)


def _discard(answers: list[Any]) -> None:
    from interp_vllm.row_transfer import unpack_rows

    for answer in answers:
        with contextlib.suppress(Exception):
            unpack_rows(answer)


_BATCHERS: weakref.WeakKeyDictionary[Any, _Batcher] = weakref.WeakKeyDictionary()


async def rpc(engine: Any, method: str, args: tuple[Any, ...]) -> list[Any]:
    """`engine.collective_rpc(method, args=args)` (one answer per worker), batched with the
    other calls of `method` made in the same pass of the event loop."""
    try:
        batcher = _BATCHERS.get(engine)
        if batcher is None:
            batcher = _BATCHERS[engine] = _Batcher(engine)
    except TypeError:  # an engine that cannot be weakly referenced is called directly
        return await engine.collective_rpc(method, args=args)
    return await batcher.call(method, args)
