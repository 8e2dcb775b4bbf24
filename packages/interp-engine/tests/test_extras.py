"""The umbrella's extras: MXFP4 checkpoints need `[quant]`, which `[vllm]` does not pull in."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _extras() -> dict[str, list[str]]:
    return tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].strip() for r in requirements}


def test_quant_extra_brings_the_hub_kernels_and_accelerate() -> None:
    quant = _extras()["quant"]
    assert _names(quant) == {"kernels", "accelerate"}
    kernels = next(r for r in quant if r.startswith("kernels"))
    assert ">=0.15.2" in kernels and "<0.17.0" in kernels


def test_vllm_extra_does_not_include_quant() -> None:
    assert not _names(_extras()["vllm"]) & {"kernels", "accelerate"}
