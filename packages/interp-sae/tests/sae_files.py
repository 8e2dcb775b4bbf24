"""Tiny random SAEs written to disk in each format, exactly as the publishing tools lay them out.

SAELens v6: `cfg.json` (SAEConfig.to_dict(): d_in, d_sae, dtype, device, apply_b_dec_to_input,
normalize_activations, reshape_activations, metadata{hook_name, ...}, architecture, plus the
architecture's own fields) and `sae_weights.safetensors`. Gemma Scope: `params.npz`. sparsify:
`cfg.json` + `sae.safetensors` (encoder.weight [d_sae, d_in], encoder.bias, W_dec, b_dec) in a
folder named for the hookpoint. Weights are drawn so that a fair share of features fire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

__all__ = ["saelens_weights", "write_gemma_scope", "write_saelens", "write_sparsify"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def saelens_weights(
    arch: str, d_in: int, d_sae: int, seed: int = 0, d_out: int | None = None
) -> dict[str, torch.Tensor]:
    g = _gen(seed)
    out = d_out or d_in
    weights = {
        "W_enc": torch.randn(d_in, d_sae, generator=g) * 0.5,
        "W_dec": torch.randn(d_sae, out, generator=g) * 0.3,
        "b_dec": torch.randn(out, generator=g) * 0.1,
    }
    if arch == "gated":
        weights["b_gate"] = torch.randn(d_sae, generator=g) * 0.5
        weights["r_mag"] = torch.randn(d_sae, generator=g) * 0.2
        weights["b_mag"] = torch.randn(d_sae, generator=g) * 0.5
    else:
        weights["b_enc"] = torch.randn(d_sae, generator=g) * 0.5
    if "jumprelu" in arch:
        weights["threshold"] = torch.rand(d_sae, generator=g) * 1.0
    return weights


def write_saelens(
    folder: Path,
    arch: str,
    *,
    d_in: int,
    d_sae: int,
    hook_name: str,
    seed: int = 0,
    apply_b_dec_to_input: bool = True,
    normalize: str = "none",
    k: int | None = None,
    rescale: bool = False,
    hook_name_out: str | None = None,
    d_out: int | None = None,
    reshape: str = "none",
    hook_head_index: int | None = None,
) -> dict[str, torch.Tensor]:
    folder.mkdir(parents=True, exist_ok=True)
    weights = saelens_weights(arch, d_in, d_sae, seed, d_out)
    metadata: dict[str, Any] = {
        "sae_lens_version": "6.54.12",
        "sae_lens_training_version": "6.54.12",
        "model_name": "tiny",
        "hook_name": hook_name,
        "hook_head_index": hook_head_index,
    }
    if hook_name_out is not None:
        metadata["hook_name_out"] = hook_name_out
    cfg: dict[str, Any] = {
        "d_in": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": apply_b_dec_to_input,
        "normalize_activations": normalize,
        "reshape_activations": reshape,
        "metadata": metadata,
        "architecture": arch,
    }
    if arch == "topk":
        cfg.update(k=k, rescale_acts_by_decoder_norm=rescale)
    if "transcoder" in arch:
        cfg["d_out"] = d_out or d_in
    (folder / "cfg.json").write_text(json.dumps(cfg))
    save_file(
        {n: t.contiguous() for n, t in weights.items()}, str(folder / "sae_weights.safetensors")
    )
    return weights


def write_gemma_scope(folder: Path, *, d_in: int, d_sae: int, seed: int = 0) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    params = {
        "W_enc": (rng.standard_normal((d_in, d_sae)) * 0.5).astype(np.float32),
        "W_dec": (rng.standard_normal((d_sae, d_in)) * 0.3).astype(np.float32),
        "b_enc": (rng.standard_normal(d_sae) * 0.5).astype(np.float32),
        "b_dec": (rng.standard_normal(d_in) * 0.1).astype(np.float32),
        "threshold": rng.random(d_sae).astype(np.float32),
    }
    np.savez(folder / "params.npz", **params)
    return params


def write_sparsify(
    folder: Path, *, d_in: int, d_sae: int, k: int, transcode: bool = False, seed: int = 0
) -> dict[str, torch.Tensor]:
    folder.mkdir(parents=True, exist_ok=True)
    g = _gen(seed)
    weights = {
        "encoder.weight": torch.randn(d_sae, d_in, generator=g) * 0.5,
        "encoder.bias": torch.randn(d_sae, generator=g) * 0.2,
        "W_dec": torch.randn(d_sae, d_in, generator=g) * 0.3,
        "b_dec": torch.randn(d_in, generator=g) * 0.1,
    }
    cfg = {
        "activation": "topk",
        "expansion_factor": d_sae // d_in,
        "normalize_decoder": True,
        "num_latents": d_sae,
        "k": k,
        "multi_topk": False,
        "skip_connection": False,
        "transcode": transcode,
        "d_in": d_in,
    }
    (folder / "cfg.json").write_text(json.dumps(cfg))
    save_file(weights, str(folder / "sae.safetensors"))
    return weights
