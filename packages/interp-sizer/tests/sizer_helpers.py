"""Paths, resource checks and the GPU list the sizer's test modules share (imported by name: keep
it unique)."""

from __future__ import annotations

from pathlib import Path

from interp_core.testing.resources import require, required

__all__ = ["HERE", "ISSUE_GPUS", "REPO", "require", "required"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

# The GPUs the sizer's issue names: the catalogue must hold exactly these, a report price each.
ISSUE_GPUS = (
    "T4",
    "L4",
    "A10G",
    "A40",
    "L40S",
    "A100-40GB",
    "A100-80GB",
    "H100-PCIe",
    "H100-80GB",
    "H200",
    "B200",
    "RTX-3090",
    "RTX-4090",
    "MI300X",
)
