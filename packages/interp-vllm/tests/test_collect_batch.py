"""The collect RPCs of requests that finish together travel as one (`interp_vllm.collect_batch`).

Engine-free: a stand-in engine records each `collective_rpc` and answers per rank as two
workers would. The bugs these catch: answers handed to the wrong caller (transposed per rank
the wrong way), a batch that never closes (a caller hangs), one caller's failure hiding the
others' answers, and rows files left behind by a caller cancelled mid-batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interp_vllm import collect_batch
from interp_vllm.worker import InterpWorkerExtension


class TwoRanks:
    """Answers `interp_collect(rid, ...)` with {"rank": r, "rid": rid} from each of two ranks."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, tuple]] = []
        self.fail = fail

    async def collective_rpc(self, method: str, args: tuple = ()) -> list:
        self.calls.append((method, args))
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("engine core died")
        if method == "interp_collect_many":
            inner, calls = args
            return [[{"rank": r, "rid": c[0], "method": inner} for c in calls] for r in (0, 1)]
        return [{"rank": r, "rid": args[0], "method": method} for r in (0, 1)]


def test_calls_in_one_pass_go_as_one_rpc_and_each_gets_its_own_answers() -> None:
    engine = TwoRanks()

    async def main() -> list:
        calls = [
            collect_batch.rpc(engine, "interp_collect", (f"r{i}", None, None)) for i in range(8)
        ]
        return await asyncio.gather(*calls)

    answers = asyncio.run(main())
    assert [m for m, _ in engine.calls] == ["interp_collect_many"]
    for i, per_rank in enumerate(answers):
        assert per_rank == [{"rank": r, "rid": f"r{i}", "method": "interp_collect"} for r in (0, 1)]


def test_a_lone_call_is_the_plain_rpc_and_methods_are_not_mixed() -> None:
    engine = TwoRanks()

    async def main() -> tuple:
        alone = await collect_batch.rpc(engine, "interp_collect", ("a", None, None))
        mixed = await asyncio.gather(
            collect_batch.rpc(engine, "interp_collect", ("b", None, None)),
            collect_batch.rpc(engine, "interp_drain", ("c", None, None)),
        )
        return alone, mixed

    alone, (collected, drained) = asyncio.run(main())
    assert engine.calls[0] == ("interp_collect", ("a", None, None))
    assert sorted(m for m, _ in engine.calls[1:]) == ["interp_collect", "interp_drain"]
    assert alone[1] == {"rank": 1, "rid": "a", "method": "interp_collect"}
    assert collected[0]["rid"] == "b" and drained[0] == {
        "rank": 0,
        "rid": "c",
        "method": "interp_drain",
    }


def test_batches_after_the_first_open_again() -> None:
    engine = TwoRanks()

    async def main() -> None:
        for round_ in range(3):
            got = await asyncio.gather(
                *(collect_batch.rpc(engine, "interp_collect", (f"{round_}-{i}",)) for i in range(3))
            )
            assert [a[0]["rid"] for a in got] == [f"{round_}-{i}" for i in range(3)]

    asyncio.run(main())
    assert [m for m, _ in engine.calls] == ["interp_collect_many"] * 3


def test_a_failed_rpc_reaches_every_caller_of_its_batch() -> None:
    engine = TwoRanks(fail=True)

    async def main() -> list:
        calls = [collect_batch.rpc(engine, "interp_collect", (f"r{i}",)) for i in range(3)]
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RuntimeError) for o in outcomes)


def test_a_cancelled_caller_s_rows_files_are_deleted(tmp_path: Path, monkeypatch) -> None:
    from interp_vllm import row_transfer

    monkeypatch.setattr(row_transfer, "SHM", tmp_path)
    leftover = tmp_path / f"{row_transfer.PREFIX}-test-1"
    leftover.write_bytes(bytes(8))

    class Files(TwoRanks):
        async def collective_rpc(self, method: str, args: tuple = ()) -> list:
            answers = await super().collective_rpc(method, args)
            file = {"path": str(leftover), "size": 8, "parts": {}}
            return [[{**a, "captured_file": file} for a in rank] for rank in answers]

    engine = Files()

    async def main() -> None:
        kept = asyncio.ensure_future(collect_batch.rpc(engine, "interp_collect", ("kept",)))
        gone = asyncio.ensure_future(collect_batch.rpc(engine, "interp_collect", ("gone",)))
        await asyncio.sleep(0.005)  # the batch is in flight
        gone.cancel()
        answers = await kept
        assert answers[0]["rid"] == "kept"

    asyncio.run(main())
    assert not leftover.exists()


class _Worker(InterpWorkerExtension):
    """Only what interp_collect_many touches: the request table and interp_collect."""

    def __init__(self) -> None:
        from interp_vllm.worker_state import WorkerState

        self._interp_state = WorkerState()

    def interp_collect(self, rid: str, lens=None, route=None) -> dict:
        if rid == "bad":
            raise RuntimeError("rows lost")
        return {"captured": {}, "positions": {"k": [0]}, "lens": {}, "errors": [], "rid": rid}


def test_worker_batch_fails_one_request_alone_and_refuses_other_methods() -> None:
    worker = _Worker()
    answers = worker.interp_collect_many("interp_collect", [["a"], ["bad"], ["c"]])
    assert [a.get("rid") for a in answers] == ["a", None, "c"]
    assert answers[1]["errors"] == ["collect: RuntimeError: rows lost"]
    assert answers[0]["errors"] == [] and answers[2]["positions"] == {"k": [0]}
    with pytest.raises(ValueError, match="interp_collect_many batches"):
        worker.interp_collect_many("interp_drop", [["a"]])


def test_calls_made_while_a_batch_travels_go_with_the_next_one_batch_at_a_time() -> None:
    class Counting(TwoRanks):
        in_flight = most = 0

        async def collective_rpc(self, method: str, args: tuple = ()) -> list:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            try:
                return await super().collective_rpc(method, args)
            finally:
                self.in_flight -= 1

    engine = Counting()

    async def main() -> list:
        first = asyncio.ensure_future(collect_batch.rpc(engine, "interp_collect", ("a",)))
        await asyncio.sleep(0.003)  # "a" is on its way
        later = [collect_batch.rpc(engine, "interp_collect", (rid,)) for rid in "bcd"]
        return await asyncio.gather(first, *later)

    answers = asyncio.run(main())
    assert [a[0]["rid"] for a in answers] == ["a", "b", "c", "d"]
    assert [m for m, _ in engine.calls] == ["interp_collect", "interp_collect_many"]
    assert engine.most == 1
