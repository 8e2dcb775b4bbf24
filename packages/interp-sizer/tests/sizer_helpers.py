"""Paths and resource checks the sizer's test modules share (imported by name: keep it unique)."""

from __future__ import annotations

from pathlib import Path

from interp_core.testing.resources import require, required

__all__ = ["HERE", "REPO", "require", "required"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
