"""The "hf" reference engine: plain transformers with hooks on hand-named modules, in-process.

It needs nothing beyond what the subject backends already use (torch and transformers), so it
runs in the validator's own process rather than in a pinned environment. Each job's model is
loaded from its folder with eager attention in float32, run once on the job's tokens through
`references.hf_hooks.reference_points`, and every requested address is either returned as a
tensor or reported as not expressible (the hand-written layout names no module for it). A model
type without a hand-written layout is unsupported, with the reason.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp_core.address import to_address
from interp_validator.references.hf_hooks import layout_key, reference_points

__all__ = ["ENGINE", "run_hf"]

ENGINE = "hf"


def _versions() -> dict[str, str]:
    found = {}
    for dist in ("torch", "transformers"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover - both are required
            found[dist] = "not installed"
    return found


def _model_type(model_dir: str) -> str:
    config = json.loads((Path(model_dir) / "config.json").read_text())
    text = config.get("text_config")
    if isinstance(text, dict) and text.get("model_type"):
        return str(text["model_type"])
    return str(config.get("model_type", ""))


def _read(job: Any) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    model_type = _model_type(job.model_dir)
    family = layout_key(model_type)
    if family is None:
        return {
            "unsupported": (
                f"the HF-hooks reference has no hand-written layout for model_type "
                f"{model_type!r}; add one to interp_validator.references.hf_layouts.LAYOUTS"
            )
        }
    with warnings.catch_warnings():
        # transformers' GPT-BigCode module calls torch.jit.script at import (deprecated).
        warnings.filterwarnings(
            "ignore", message=".*torch.jit.script.*", category=DeprecationWarning
        )
        model = AutoModelForCausalLM.from_pretrained(
            job.model_dir, attn_implementation="eager", dtype=torch.float32
        ).eval()
    ids = torch.tensor([list(job.tokens)], dtype=torch.long)
    reference = reference_points(model, family, ids)
    tensors: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for text in job.points:
        address = to_address(text)
        tensor = reference.points.get(address)
        if tensor is None:
            missing[text] = (
                f"the hand-written {family} layout names no module for {address.name} here"
            )
        else:
            tensors[text] = tensor.detach().cpu()
    del model
    return {"tensors": tensors, "not_expressible": missing}


def run_hf(jobs: Sequence[Any]) -> dict[str, Any]:
    """One `Reading` per job key, computed in this process; a failing job is unsupported."""
    from interp_validator.references import Reading

    versions = _versions()
    readings: dict[str, Any] = {}
    for job in jobs:
        started = time.perf_counter()
        try:
            found = _read(job)
        except Exception as exc:  # a crash is reported on the job, never hidden
            found = {"unsupported": f"the HF-hooks reference failed: {type(exc).__name__}: {exc}"}
        tensors = found.get("tensors", {})
        readings[job.key] = Reading(
            engine=ENGINE,
            key=job.key,
            tensors=tensors,
            conventions=dict.fromkeys(tensors, "raw"),
            not_expressible=found.get("not_expressible", {}),
            unsupported=found.get("unsupported"),
            versions=versions,
            seconds=time.perf_counter() - started,
        )
    return readings
