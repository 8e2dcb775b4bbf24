"""The static tier's stacked captures, engine-free: every point of a step in one copy, and each
request's rows, collected, exactly those the taps left at its positions.

`keep_stacked` takes the rows of several steps out of tap buffers filled by hand (a chunked
prefill, a batch of two requests capturing different points, a recomputed position) and
`Request.take_rows` with `by_position` must give back, per point, one row per position holding
the value the buffer had at that step; a capture with `rows=` goes back to the general path.
"""

from __future__ import annotations

import torch

from interp_vllm.row_order import by_position
from interp_vllm.static_rows import keep_stacked
from interp_vllm.static_taps import StaticTaps
from interp_vllm.worker_state import Request, Segment, Step

WIDE, NARROW = ("resid_post.0", "resid_post.1"), "_q_rot.0"  # two buffer shapes


def _taps() -> StaticTaps:
    taps = StaticTaps(capacity=16, slots=2)
    cpu = torch.device("cpu")
    shapes = {k: ((6,), torch.float32, cpu) for k in WIDE} | {NARROW: ((2, 3), torch.float32, cpu)}
    taps.allocate(shapes, set(shapes), set())
    return taps


def _request(rid: str, capture: set[str], rows: list[int] | None = None) -> Request:
    wanted = None if rows is None else torch.tensor(rows)
    return Request(rid=rid, capture=capture, writes={}, lens=set(), rows_wanted=wanted)


def _step(taps: StaticTaps, plan: list[tuple[Request, list[int]]], seed: int) -> dict:
    """Fill the buffers for one step laid out as `plan` (request, positions) and keep its rows;
    returns what each (request, key, position) must hold, and the readers left over."""
    generator = torch.Generator().manual_seed(seed)
    n = sum(len(p) for _, p in plan)
    for buffer in taps.reads.values():
        buffer.rows[:n] = torch.randn(buffer.rows[:n].shape, generator=generator)
    segments, expected, start = [], {}, 0
    for request, where in plan:
        segment = Segment(request, start, start + len(where))
        segments.append(segment)
        for key in request.capture:
            for offset, position in enumerate(where):
                row = taps.reads[key].rows[start + offset].clone()
                expected[request.rid, key, position] = row
        start += len(where)
    positions = torch.tensor([p for _, where in plan for p in where])
    readers = {k: [s for s in segments if k in s.request.capture] for k in taps.reads}
    step = Step(positions, segments, readers)
    left = keep_stacked(taps, step, {k: v for k, v in readers.items() if v})
    return {"expected": expected, "left": left}


def test_every_point_of_a_step_leaves_in_one_copy_and_comes_back_by_position() -> None:
    taps = _taps()
    every = _request("a", {*WIDE, NARROW})
    some = _request("b", {WIDE[1]})
    picked = _request("c", {WIDE[0]}, rows=[1])
    expected: dict = {}
    steps = [
        [(every, [0, 1, 2]), (picked, [0, 1])],  # a chunk of a's prompt beside c's prompt
        [(some, [0, 1]), (every, [3, 4])],  # b arrives; a's prompt ends
        [(every, [5]), (some, [2])],  # decode steps
        [(every, [5, 6])],  # a's position 5 recomputed (preemption): the later row wins
    ]
    for seed, plan in enumerate(steps):
        done = _step(taps, plan, seed)
        expected.update(done["expected"])
        if any(r is picked for r, _ in plan):
            # capture(rows=) is not a plain capture: the general path keeps it.
            assert [s.request for s in done["left"][WIDE[0]]] == [picked]
        else:
            assert done["left"] == {}
    assert picked.stacked == {}
    # One stacked entry per step and group of like buffers, not one per point.
    assert [len(v) for v in every.stacked.values()] == [4, 4]
    for request, count in ((every, 7), (some, 3)):
        held = request.take_rows()
        assert sorted(held) == sorted(request.capture)
        for key, chunks in held.items():
            where, rows = by_position(chunks)
            assert where == list(range(count))
            for position in where:
                assert torch.equal(rows[position], expected[request.rid, key, position])
        assert request.take_rows() == {}  # forgotten once taken
