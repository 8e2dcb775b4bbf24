"""How the server runs a model: bounded concurrency, a bounded queue, deadlines, cancellation.

Every work call goes through `Engine`. At most `max_concurrency` calls run at once; up to
`max_queue` more wait; one more is refused at once (`Overloaded`, HTTP 429 with Retry-After)
rather than queued without bound. A call past its deadline is answered `RequestTimeout` (504).

Where a call runs depends on the model. A model whose async resources belong to the loop that
first awaited it (`binds_event_loop`, vLLM) is awaited on the server's loop, where it overlaps
requests itself; cancelling the task (the client went away, the deadline passed) aborts its
engine request. Any other model (eager) computes inside its async methods without yielding, so
each call runs on a worker thread with a loop of its own, keeping the server's loop free for
health checks, queueing and streaming; a stream whose client left stops at its next token, and a
call whose client left while it was queued never starts (checked when it gets its slot).
A worker's slot is released only when the thread has really finished, so the concurrency bound
holds even after a deadline answered early.

An error the backend reports as the death of its engine (vLLM's `EngineDeadError`) marks the
engine dead: every later call is refused with `EngineDead` (503) and `/health` says why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from interp_core.protocol import InterpModel
from interp_serve.errors import ClientGone, EngineDead, Overloaded, RequestTimeout

__all__ = ["Engine"]

# Exception class names by which backends report that their engine is gone for good.
_DEATH_NAMES = frozenset({"EngineDeadError", "EngineGenerateError", "EngineDied"})


def _is_death(error: BaseException) -> bool:
    return any(cls.__name__ in _DEATH_NAMES for cls in type(error).__mro__)


class Engine:
    """The model behind the server, with its concurrency, queue, deadline and health."""

    def __init__(
        self, model: InterpModel, *, max_concurrency: int, max_queue: int, timeout_s: float
    ) -> None:
        self.model = model
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.on_loop = bool(getattr(model, "binds_event_loop", False))
        self.dead: str | None = None
        self.running = 0
        self.waiting = 0
        self.aborted_streams = 0
        self.cancelled = 0  # calls whose client disconnected before they finished
        self.steps_produced = 0  # tokens the engine produced for streams, consumed or not
        self._slots: asyncio.Semaphore | None = None
        # A thread-run model (eager) computes one call at a time under its own lock, so a single
        # worker runs them in arrival order; more threads would only contend for the lock and
        # the GIL. A loop-bound model needs the pool only for warmup and shutdown.
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="interp-serve"
        )

    # --- slots ----------------------------------------------------------------------------------
    async def _acquire(self) -> None:
        if self.dead is not None:
            raise self._dead_error()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        if self._slots.locked() and self.waiting >= self.max_queue:
            message = (
                f"the server is at capacity: {self.running} requests running (the limit is "
                f"{self.max_concurrency}) and {self.waiting} queued (the queue holds "
                f"{self.max_queue}); retry after the Retry-After interval"
            )
            raise Overloaded(message, retry_after=1)
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1

    def _release(self) -> None:
        self.running -= 1
        assert self._slots is not None
        self._slots.release()

    def _dead_error(self) -> EngineDead:
        message = (
            f"the model's engine died ({self.dead}); this server cannot serve until it is "
            f"restarted, and /health reports it dead so a supervisor can restart it"
        )
        return EngineDead(message)

    def _note(self, error: BaseException) -> BaseException:
        if _is_death(error) and self.dead is None:
            self.dead = f"{type(error).__name__}: {error}"
        return self._dead_error() if self.dead is not None and _is_death(error) else error

    def _timeout(self, what: str) -> RequestTimeout:
        message = (
            f"{what} ran past this server's per-request deadline of {self.timeout_s:g} s; send "
            f"a smaller request (fewer tokens, points or layers), or ask the operator to raise "
            f"--request-timeout"
        )
        return RequestTimeout(message)

    # --- calls ----------------------------------------------------------------------------------
    async def call(
        self,
        what: str,
        make: Callable[[], Awaitable[Any]],
        gone: Callable[[], Awaitable[bool]] | None = None,
    ) -> Any:
        """Run `make()` (a call of one of the model's async methods) under the limits.

        `gone` says whether the client has disconnected; it is polled while the call runs, and
        a call whose client left is cancelled (`ClientGone`).
        """
        await self._acquire()
        # The slot is released here on every way out (a disconnect check that raises, a `make`
        # that fails before it returns its awaitable, a cancellation while waiting), except
        # once a worker thread holds it: that thread frees it when it really ends.
        held_by_thread = False
        try:
            if gone is not None and await gone():
                # Its client left while it waited for a slot: it never starts.
                self.cancelled += 1
                message = (
                    f"the client disconnected while {what} waited for a slot; it never started"
                )
                raise ClientGone(message)
            if self.on_loop:
                task: asyncio.Future[Any] = asyncio.ensure_future(make())
                try:
                    return await self._outcome(what, task, gone)
                finally:
                    if not task.done():
                        task.cancel()  # a vLLM request is aborted when its task is cancelled
            loop = asyncio.get_running_loop()
            future = loop.run_in_executor(self._pool, lambda: asyncio.run(_awaited(make)))
            # The thread cannot be interrupted; its slot is freed when it really ends.
            future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
            held_by_thread = True
            return await self._outcome(what, future, gone)
        finally:
            if not held_by_thread:
                self._release()

    async def _outcome(
        self, what: str, work: asyncio.Future[Any], gone: Callable[[], Awaitable[bool]] | None
    ) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                work.cancel()  # a call still waiting for the worker never starts
                raise self._timeout(what)
            done, _ = await asyncio.wait({work}, timeout=min(left, _POLL_S))
            if done:
                try:
                    return work.result()
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    raise self._note(error) from error
            if gone is not None and await gone():
                work.cancel()
                self.cancelled += 1
                message = f"the client disconnected before {what} finished; it was cancelled"
                raise ClientGone(message)

    async def stream(self, what: str, make: Callable[[], AsyncIterator[Any]]) -> AsyncIterator[Any]:
        """Iterate `make()` (a model's `generate_stream`) under the limits; closing stops it."""
        await self._acquire()
        deadline = time.monotonic() + self.timeout_s
        finished = False
        try:
            if self.on_loop:
                iterator = make()
                try:
                    while True:
                        left = deadline - time.monotonic()
                        try:
                            step = await asyncio.wait_for(anext(iterator), max(left, 0.001))
                        except StopAsyncIteration:
                            finished = True
                            return
                        except TimeoutError:
                            raise self._timeout(what) from None
                        except Exception as error:
                            raise self._note(error) from error
                        self._count_step()
                        yield step
                finally:
                    await _close(iterator)
            else:
                async for step in self._threaded_stream(what, make, deadline):
                    if step is _END:
                        finished = True
                        return
                    yield step
        finally:
            if not finished:
                self.aborted_streams += 1
            if self.on_loop:
                self._release()

    def _count_step(self) -> None:
        self.steps_produced += 1

    async def _threaded_stream(
        self, what: str, make: Callable[[], AsyncIterator[Any]], deadline: float
    ) -> AsyncIterator[Any]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        async def drive() -> None:
            iterator = make()
            try:
                async for step in iterator:
                    loop.call_soon_threadsafe(self._count_step)
                    if stop.is_set():
                        return
                    put("step", step)
            finally:
                await _close(iterator)

        def work() -> None:
            try:
                asyncio.run(drive())
            except BaseException as error:  # handed to the loop, raised there
                put("error", error)
            else:
                put("end", None)

        future = loop.run_in_executor(self._pool, work)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    kind, value = await asyncio.wait_for(queue.get(), max(left, 0.001))
                except TimeoutError:
                    raise self._timeout(what) from None
                if kind == "step":
                    yield value
                elif kind == "error":
                    raise self._note(value)
                else:
                    yield _END
                    return
        finally:
            # The worker checks this before handing over each step, so it stops within one token.
            stop.set()

    async def warmup(self) -> None:
        await self._outside_limits(self.model.warmup)

    async def shutdown(self) -> None:
        await self._outside_limits(self.model.shutdown)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _outside_limits(self, make: Callable[[], Awaitable[Any]]) -> None:
        # A lifecycle call takes no slot: on the server's loop for a loop-bound model, else on
        # the worker thread with a loop of its own.
        if self.on_loop:
            await make()
        else:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._pool, lambda: asyncio.run(make()))


_END = object()
# How often a running call checks that its client is still there.
_POLL_S = 0.1


async def _awaited(make: Callable[[], Awaitable[Any]]) -> Any:
    return await make()


async def _close(iterator: Any) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()
