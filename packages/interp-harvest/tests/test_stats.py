"""The statistics job: streamed mean, variance and norms equal the same statistics computed at
once in float64 from eager captures of the same packed contexts; BOS positions can be left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from harvest_helpers import eager_rows
from interp_harvest import (
    Corpus,
    PackingPolicy,
    harvest_stats,
    pack,
    tokenizer_encoder,
    write_stats,
)
from safetensors.torch import load_file

from interp_core.errors import PointUnsupported

POINTS = ["resid_post.1", "attn_out.0"]


def _contexts(model: Any, corpus: Path, count: int) -> list[tuple[int, ...]]:
    policy = PackingPolicy(16, "context", model.tokenizer.bos_token_id)
    contexts = pack(Corpus(corpus), tokenizer_encoder(model.tokenizer), policy, max_contexts=count)
    return [c.tokens for c in contexts]


@pytest.mark.parametrize("exclude_bos", [False, True])
def test_streamed_statistics_equal_the_whole_corpus_at_once(
    eager_model: Any, corpus_file: Path, tmp_path: Path, exclude_bos: bool
) -> None:
    stats = harvest_stats(
        eager_model,
        corpus_file,
        points=POINTS,
        tokens=7 * 16,
        context_size=16,
        batch_size=3,  # 3 + 3 + 1: merges of unequal batches
        exclude_bos=exclude_bos,
    )
    contexts = _contexts(eager_model, corpus_file, 7)
    ids = torch.tensor(contexts).reshape(-1)
    keep = (
        ids != eager_model.tokenizer.bos_token_id
        if exclude_bos
        else torch.ones_like(ids, dtype=bool)
    )
    assert 0 < int(keep.sum()) < ids.numel() or not exclude_bos
    for point in POINTS:
        rows = eager_rows(eager_model, contexts, point).double().reshape(ids.numel(), -1)[keep]
        got = stats[next(a for a in stats if str(a) == point)]
        assert got.count == rows.shape[0]
        torch.testing.assert_close(got.mean, rows.mean(0), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(got.var, rows.var(0, correction=0), atol=1e-6, rtol=1e-5)
        norms = rows.norm(dim=1)
        assert got.norm_mean == pytest.approx(float(norms.mean()), rel=1e-6)
        assert got.norm_max == pytest.approx(float(norms.max()), rel=1e-6)
    path = write_stats(stats, tmp_path / "stats.safetensors")
    stored = load_file(path)
    assert int(stored["resid_post.1.count"]) == stats[next(iter(stats))].count
    assert torch.equal(stored["resid_post.1.mean"], stats[next(iter(stats))].mean)


def test_attention_matrices_are_refused(eager_model: Any, corpus_file: Path) -> None:
    with pytest.raises(PointUnsupported, match="attention matrix"):
        harvest_stats(eager_model, corpus_file, points=["attn_probs.0"], tokens=32, context_size=16)
