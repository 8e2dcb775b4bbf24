"""Gemma-3n's weights as the sizer counts them from the config: AltUp, LAuReL and the per-layer
inputs included, checked against the tiny checkpoint's safetensors file (they were left out: the
count came to 0.88 of the file)."""

from __future__ import annotations

from typing import Any

from interp_sizer import resolve_model
from interp_sizer.weights import parameter_count


def test_the_config_count_matches_the_tiny_checkpoint() -> None:
    from safetensors.torch import load_file

    from interp_testmodels.families import build_family

    folder: Any = build_family("gemma3n")
    model = resolve_model(folder, hub=False)
    tensors = load_file(str(folder / "model.safetensors"))
    facts = model.facts
    count = parameter_count(facts)
    assert count.approximate_layers == ()
    assert count.total == sum(t.numel() for t in tensors.values())
    # The AltUp trunk projections: into and out of each of the 3 extra streams, d x d each.
    d, n = facts.d_model, facts.n_streams
    altup = [
        t for name, t in tensors.items() if "altup_projections" in name or "unembed_proj" in name
    ]
    assert sum(t.numel() for t in altup) == 2 * (n - 1) * d * d
