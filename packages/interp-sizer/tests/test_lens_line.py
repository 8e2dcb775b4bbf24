"""The sizer's fitted-lens line: n_layers × d_model² × dtype bytes per resident set, on every GPU
that decodes (J_bar is replicated per tensor-parallel rank, on the last pipeline stage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts
from interp_sizer import size
from interp_testmodels.families import build_family


@pytest.fixture(scope="module")
def llama() -> str:
    return str(build_family("llama"))


def _lens(fit: object) -> list[object]:
    return [t for t in fit.terms if t.key == "lens"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["eager", "vllm", "vllm-static"])
def test_each_set_is_n_layers_d_model_squared_dtype(llama: str, backend: str) -> None:
    plain = size(llama, backend=backend, gpu="H100-80GB")
    assert not _lens(plain.selected)
    report = size(llama, backend=backend, gpu="H100-80GB", lens_sets=3, lens_dtype="bfloat16")
    (term,) = _lens(report.selected)
    config = json.loads((Path(llama) / "config.json").read_text())
    facts = ModelFacts.from_config(config)
    n, d = facts.n_layers, facts.d_model
    assert term.bytes == 3 * n * d * d * 2
    assert term.side == ("card" if backend == "eager" else "margin")
    assert "3 set(s)" in term.note


def test_tensor_parallel_replicates_and_the_count_is_checked(llama: str) -> None:
    one = size(llama, backend="vllm", gpu="H100-80GB", lens_sets=1, num_gpus=1)
    two = size(llama, backend="vllm", gpu="H100-80GB", lens_sets=1, num_gpus=2)
    assert _lens(one.selected)[0].bytes == _lens(two.selected)[0].bytes  # per GPU, not split
    with pytest.raises(InvalidArgument, match="lens_sets"):
        size(llama, backend="vllm", lens_sets=-1)
