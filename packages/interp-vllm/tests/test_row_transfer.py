"""The two routes a request's rows take from a worker to the client (no engine needed).

Whatever the route, the client must get exactly the worker's tensors, own them (writable, not
shared with anything it did not make) and leave no file behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from interp_vllm import row_transfer
from interp_vllm.row_transfer import client_route, pack_rows, remove_leftovers, unpack_rows


@pytest.fixture(autouse=True)
def _shm(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A folder of this test's own stands for /dev/shm: nothing here depends on the machine
    having one (the engine test in test_vllm_static.py uses the real one)."""
    monkeypatch.setattr(row_transfer, "SHM", Path(tmp_path))
    row_transfer._here.cache_clear()
    yield
    row_transfer._here.cache_clear()


class _Engine:
    """Stands for an engine object: only its identity names the files."""


def _mine(engine: object) -> list[str]:
    prefix = f"{row_transfer.PREFIX}-{row_transfer.engine_tag(engine)}-"
    return sorted(p.name for p in row_transfer.SHM.iterdir() if p.name.startswith(prefix))


def _rows() -> dict[str, torch.Tensor]:
    # Mixed dtypes and an odd bfloat16 size: the float32 part after it must still be aligned.
    g = torch.Generator().manual_seed(0)
    return {
        "resid_post.0": torch.randn(37, 128, generator=g),
        "attn_z.1": torch.randn(3, 5, generator=g).to(torch.bfloat16),
        "mlp_out.1": torch.randn(129, 129, generator=g),
        "empty.2": torch.empty(0, 64),
    }


def test_same_host_goes_through_one_file_that_the_client_deletes() -> None:
    engine = _Engine()
    rows = _rows()
    answer = pack_rows(rows, client_route(engine))
    assert answer["captured"] == {} and "captured_file" in answer
    assert len(_mine(engine)) == 1
    got = unpack_rows(answer)
    assert _mine(engine) == []
    assert set(got) == set(rows)
    for key, tensor in rows.items():
        assert got[key].dtype == tensor.dtype and got[key].shape == tensor.shape
        assert torch.equal(got[key], tensor), key
    got["resid_post.0"][0, 0] = 123.0  # the client owns what it got
    assert rows["resid_post.0"][0, 0] != 123.0


@pytest.mark.parametrize(
    "change",
    [{"host": "another-node"}, {"boot": "another-boot"}, {"shm": [0, 0]}, None],
    ids=["other-host", "other-boot", "other-shm", "no-route"],
)
def test_anything_but_this_host_and_shm_goes_inline(change: dict | None) -> None:
    engine = _Engine()
    route = None if change is None else {**client_route(engine), **change}  # type: ignore[dict-item]
    rows = _rows()
    answer = pack_rows(rows, route)
    assert "captured_file" not in answer and set(answer["captured"]) == set(rows)
    assert _mine(engine) == []
    got = unpack_rows(answer)
    for key, tensor in rows.items():
        assert torch.equal(got[key], tensor), key


def test_small_answers_stay_inline() -> None:
    engine = _Engine()
    answer = pack_rows({"resid_post.0": torch.ones(2, 8)}, client_route(engine))
    assert "captured_file" not in answer
    assert torch.equal(unpack_rows(answer)["resid_post.0"], torch.ones(2, 8))


def test_a_full_shm_falls_back_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    class Full:
        f_bavail = 0
        f_frsize = 4096

    monkeypatch.setattr(row_transfer.os, "statvfs", lambda _path: Full())
    engine = _Engine()
    answer = pack_rows(_rows(), client_route(engine))
    assert "captured_file" not in answer and _mine(engine) == []


def test_shutdown_removes_only_its_own_engines_unread_files() -> None:
    mine, other = _Engine(), _Engine()
    pack_rows(_rows(), client_route(mine))
    kept = pack_rows(_rows(), client_route(other))
    assert remove_leftovers(mine) == 1
    assert _mine(mine) == [] and len(_mine(other)) == 1
    assert torch.equal(unpack_rows(kept)["mlp_out.1"], _rows()["mlp_out.1"])


def test_a_file_outside_our_names_is_refused(tmp_path: os.PathLike[str]) -> None:
    answer = {"captured": {}, "captured_file": {"path": "/etc/passwd", "size": 4, "parts": {}}}
    with pytest.raises(ValueError, match="not one of ours"):
        unpack_rows(answer)


def test_a_short_file_is_an_error_and_still_deleted() -> None:
    engine = _Engine()
    answer = pack_rows(_rows(), client_route(engine))
    answer["captured_file"]["size"] += 8
    with pytest.raises(ValueError, match="held"):
        unpack_rows(answer)
    assert _mine(engine) == []
