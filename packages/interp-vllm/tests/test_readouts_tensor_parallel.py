"""The read-outs' tensor-parallel arithmetic, without an engine: what each rank answers, and how
the client puts the answers together.

Under tensor parallelism vLLM shards the embedding and the head by vocabulary, and head- or
neuron-sharded sites by columns. Here two simulated ranks answer from their shards: the weight
rows they own (`_owned`) must assemble to the whole table's rows, and their partial dot products
(`_project`) must sum, before the bias and the ReLU (`_projected`), to the full projection.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from interp_core.readouts import DirectionSet
from interp_vllm.readouts_client import _projected
from interp_vllm.readouts_worker import _owned, _project
from interp_vllm.row_order import by_position
from interp_vllm.tensor_wire import decode_tensor, encode_tensor


def _shard(table: torch.Tensor, start: int, stop: int) -> Any:
    indices = SimpleNamespace(org_vocab_start_index=start, org_vocab_end_index=stop)
    padded = torch.cat([table[start:stop], torch.zeros(3, table.shape[1])])  # vLLM pads shards
    return SimpleNamespace(weight=padded, shard_indices=indices)


def test_vocab_shards_assemble_to_the_tables_rows() -> None:
    torch.manual_seed(0)
    table = torch.randn(10, 4)
    ids = [9, 0, 5, 4, 9]
    out = torch.full((len(ids), 4), float("nan"))
    for module in (_shard(table, 0, 5), _shard(table, 5, 10)):
        where, local = _owned(module, ids)
        for index, row in zip(where, module.weight[local], strict=True):
            out[index] = row
    assert torch.equal(out, table[ids])
    whole = SimpleNamespace(weight=table)  # no shard indices: TP=1, the whole table
    assert _owned(whole, ids) == (list(range(5)), ids)


def test_partial_products_of_column_shards_sum_to_the_projection(monkeypatch: Any) -> None:
    import vllm.distributed as distributed

    torch.manual_seed(1)
    rows, vectors, bias = torch.randn(6, 8), torch.randn(3, 8), torch.randn(3)
    item = DirectionSet("z.0", vectors, bias, "relu")
    wire = [{"key": "z.0", "vectors": encode_tensor(vectors)}]
    answers = []
    for rank in (0, 1):
        monkeypatch.setattr(distributed, "get_tensor_model_parallel_world_size", lambda: 2)
        monkeypatch.setattr(distributed, "get_tensor_model_parallel_rank", lambda r=rank: r)
        shard = rows[:, rank * 4 : (rank + 1) * 4]
        answers.append({"projected": _project({"z.0": (list(range(6)), shard)}, wire)})
        assert answers[-1]["projected"]["0"]["partial"]
    got = _projected(answers, 0, 6, item)
    torch.testing.assert_close(got, (rows @ vectors.T + bias).clamp_min(0))
    one = decode_tensor(*answers[0]["projected"]["0"]["values"])
    assert (one - rows @ vectors.T).abs().max() > 1e-3  # one rank alone is not the answer


def test_a_whole_row_is_projected_by_one_rank_and_a_bad_width_refused(monkeypatch: Any) -> None:
    import vllm.distributed as distributed

    rows, vectors = torch.randn(4, 8), torch.randn(2, 8)
    wire = [{"key": "resid_post.0", "vectors": encode_tensor(vectors)}]
    answer = {"projected": _project({"resid_post.0": ([0, 1, 2, 3], rows)}, wire)}
    assert not answer["projected"]["0"]["partial"]
    got = _projected([answer, answer], 0, 4, DirectionSet("resid_post.0", vectors))
    torch.testing.assert_close(got, rows @ vectors.T)
    monkeypatch.setattr(distributed, "get_tensor_model_parallel_world_size", lambda: 2)
    monkeypatch.setattr(distributed, "get_tensor_model_parallel_rank", lambda: 0)
    with pytest.raises(ValueError, match="cannot be read"):
        _project({"resid_post.0": ([0], torch.randn(1, 3))}, wire)


def test_rows_come_back_in_position_order_latest_wins() -> None:
    chunks = [(torch.tensor([0, 1, 2]), torch.tensor([[0.0], [1.0], [2.0]]))]
    chunks.append((torch.tensor([1]), torch.tensor([[9.0]])))  # position 1 recomputed
    where, rows = by_position(chunks)
    assert where == [0, 1, 2] and rows.flatten().tolist() == [0.0, 9.0, 2.0]
