"""The engine's slots, queue and cancellation, on a model the test gates (no server, no race).

A gated model's call waits until the test opens its gate, so "running" and "queued" are states
the test holds for as long as it likes instead of windows it must catch: the request-lifecycle
rules (a queued call whose client left never starts, a running one is cancelled, a full queue
is refused) are checked on both ways the engine runs a call, on the loop and on its worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from interp_serve.engine import Engine
from interp_serve.errors import ClientGone, Overloaded


class Gated:
    """A model whose `hold` call returns only once `open()` is called; `run` counts its runs."""

    def __init__(self, on_loop: bool) -> None:
        self.binds_event_loop = on_loop
        self.gate = threading.Event()
        self.runs = 0

    async def hold(self) -> str:
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return "held"

    async def run(self) -> str:
        self.runs += 1
        return "ran"

    async def shutdown(self) -> None:
        return None


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the engine never reached the expected state")


def _flag() -> tuple[asyncio.Event, Callable[[], Any]]:
    left = asyncio.Event()

    async def gone() -> bool:
        return left.is_set()

    return left, gone


@pytest.mark.parametrize("on_loop", [True, False], ids=["on-loop", "worker-thread"])
def test_a_queued_call_whose_client_left_never_runs(on_loop: bool) -> None:
    async def scenario() -> None:
        model = Gated(on_loop)
        engine = Engine(model, max_concurrency=1, max_queue=1, timeout_s=30)
        holder = asyncio.ensure_future(engine.call("the holder", model.hold))
        await _until(lambda: engine.running == 1)
        left, gone = _flag()
        queued = asyncio.ensure_future(engine.call("the queued call", model.run, gone))
        await _until(lambda: engine.waiting == 1)
        # The queue is full now: one more is refused at once, not queued.
        with pytest.raises(Overloaded):
            await engine.call("one too many", model.run)
        left.set()  # the queued call's client leaves while it waits
        model.gate.set()
        assert await holder == "held"
        with pytest.raises(ClientGone, match="never started"):
            await queued
        assert model.runs == 0 and engine.cancelled == 1
        await _until(lambda: engine.running == 0 and engine.waiting == 0)
        assert await engine.call("a later call", model.run) == "ran"  # the slot came back
        await engine.shutdown()

    asyncio.run(scenario())


@pytest.mark.parametrize("on_loop", [True, False], ids=["on-loop", "worker-thread"])
def test_a_running_call_whose_client_left_is_cancelled(on_loop: bool) -> None:
    async def scenario() -> None:
        model = Gated(on_loop)
        engine = Engine(model, max_concurrency=1, max_queue=1, timeout_s=30)
        left, gone = _flag()
        running = asyncio.ensure_future(engine.call("the call", model.hold, gone))
        await _until(lambda: engine.running == 1)
        left.set()  # the gate stays shut: the call cannot finish before the engine notices
        with pytest.raises(ClientGone, match="before the call finished"):
            await running
        assert engine.cancelled == 1
        model.gate.set()  # a worker thread cannot be interrupted; its slot frees when it ends
        await _until(lambda: engine.running == 0)
        assert await engine.call("a later call", model.run) == "ran"
        await engine.shutdown()

    asyncio.run(scenario())


class _Broken(RuntimeError):
    pass


@pytest.mark.parametrize("on_loop", [True, False], ids=["on-loop", "worker-thread"])
@pytest.mark.parametrize("where", ["disconnect-check", "make", "cancelled-waiting"])
def test_every_way_out_of_a_call_gives_its_slot_back(on_loop: bool, where: str) -> None:
    # One slot: a call that leaks it leaves every later call queued forever, so the later call
    # below times out instead of answering "ran". Each way out leaked before.
    async def scenario() -> None:
        model = Gated(on_loop)
        engine = Engine(model, max_concurrency=1, max_queue=1, timeout_s=30)

        async def broken_gone() -> bool:
            raise _Broken("the disconnect check itself failed")

        def broken_make() -> Any:
            raise _Broken("the call could not even be made")

        if where == "disconnect-check":
            with pytest.raises(_Broken):
                await engine.call("a call", model.run, broken_gone)
        elif where == "make":
            with pytest.raises(_Broken):
                await engine.call("a call", broken_make)
        else:
            # Cancelled while it waits on the gate (a server shutting down cancels its tasks).
            task = asyncio.ensure_future(engine.call("a call", model.hold))
            await _until(lambda: engine.running == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            model.gate.set()  # a worker thread frees its slot when it really ends
        await _until(lambda: engine.running == 0)
        later = engine.call("a later call", model.run)
        assert await asyncio.wait_for(later, timeout=10) == "ran"
        await engine.shutdown()

    asyncio.run(scenario())
