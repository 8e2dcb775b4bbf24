"""Engine-free: the worker's `rows=` selection and the client's chunk assembly.

`Request.row_pick` keeps exactly the chosen positions of a step (the others never reach the host
copy); `rows_cache` puts the worker's position-ordered rows back in the caller's order and refuses
a payload missing one; the stream's row buffer hands out contiguous position ranges only, never a
position twice.
"""

from __future__ import annotations

import pytest
import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_vllm.capture_stream import _Rows, check_capture_rows, rows_cache
from interp_vllm.worker_state import parse_request


def test_row_pick_keeps_the_chosen_positions() -> None:
    request = parse_request({"id": "r", "capture": ["resid_post.0"], "rows": [1, 4]})
    where = torch.arange(3, 6)  # a decode chunk holding positions 3, 4, 5
    pick = request.row_pick(where)
    assert pick is not None and where[pick].tolist() == [4]
    rows = torch.arange(6.0).reshape(3, 2)
    request.keep("resid_post.0", where, rows, rows[pick], pick)
    kept_where, kept_rows = request.rows["resid_post.0"][0]
    assert kept_where.tolist() == [4] and kept_rows.tolist() == [[2.0, 3.0]]
    assert parse_request({"id": "s", "capture": ["x"]}).row_pick(where) is None


def test_rows_cache_restores_the_callers_order() -> None:
    address = Address("resid_post", 0)
    payload = {
        "captured": {"resid_post.0": torch.tensor([[0.0], [5.0], [9.0]])},
        "positions": {"resid_post.0": [0, 5, 9]},
    }
    got = rows_cache([address], payload, (9, 0, 5))[address]
    assert got.shape == (1, 3, 1) and got.flatten().tolist() == [9.0, 0.0, 5.0]
    with pytest.raises(CapabilityUnsupported, match="expected"):
        rows_cache([address], payload, (9, 0, 4))
    with pytest.raises(CapabilityUnsupported, match="rebuilt"):
        check_capture_rows([1], 4, [Address("attn_scores", 0)])


def test_row_buffer_hands_out_contiguous_ranges_once() -> None:
    held = _Rows(["k"])
    held.add(
        {"captured": {"k": torch.tensor([[0.0], [1.0], [3.0]])}, "positions": {"k": [0, 1, 3]}}, 0
    )
    assert held.ready(0, 10) == 2  # position 2 has not arrived: 3 waits
    first = held.take(0, 2)["k"]
    assert first.flatten().tolist() == [0.0, 1.0]
    # A recomputed 1 (already handed out) is dropped; 2 arrives and 3 becomes ready.
    held.add({"captured": {"k": torch.tensor([[7.0], [2.0]])}, "positions": {"k": [1, 2]}}, 2)
    assert held.ready(2, 10) == 4 and held.ready(2, 3) == 3
    assert held.take(2, 4)["k"].flatten().tolist() == [2.0, 3.0]
