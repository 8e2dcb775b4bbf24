"""A tiny SAELens-layout SAE on disk, and the brute-force dashboard the job must equal: every
token's feature activations held at once (eager captures, one context per forward, then
`SAE.encode`), each statistic computed directly from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from interp_core import sync


def write_sae(
    folder: Path,
    *,
    d_in: int,
    d_sae: int,
    hook_name: str,
    seed: int = 0,
    bias: float = -0.3,
    scale: float = 0.4,
) -> Path:
    """A ReLU SAE (SAELens v6 `standard`) whose features fire on a fair share of tokens."""
    g = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {
        "W_enc": torch.randn(d_in, d_sae, generator=g) * scale,
        "b_enc": (torch.randn(d_sae, generator=g) * 0.3 + bias) * scale / 0.4,
        "W_dec": torch.randn(d_sae, d_in, generator=g) * 0.3,
        "b_dec": torch.randn(d_in, generator=g) * 0.1,
    }
    cfg = {
        "d_in": d_in,
        "d_sae": d_sae,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "reshape_activations": "none",
        "metadata": {"hook_name": hook_name, "model_name": "tiny", "hook_head_index": None},
        "architecture": "standard",
    }
    (folder / "cfg.json").write_text(json.dumps(cfg))
    save_file(weights, str(folder / "sae_weights.safetensors"))
    return folder


def brute_force_acts(
    model: Any, sae: Any, contexts: list[tuple[int, ...]], ignored: tuple[int, ...]
) -> Any:
    """`[contexts, context, d_sae]` feature activations, ignored tokens zero."""
    rows = [sync.capture(model, torch.tensor([c]), [sae.address])[sae.address][0] for c in contexts]
    acts = sae.encode(torch.stack(rows).to(torch.float32))
    ids = torch.tensor(contexts)
    keep = ~torch.isin(ids, torch.tensor(ignored, dtype=torch.long))
    return acts * keep.unsqueeze(-1), keep


def packed_contexts(model: Any, corpus: Path, size: int, count: int) -> list[tuple[int, ...]]:
    """The first `count` contexts the dashboards job packs from `corpus` (BOS at each start)."""
    from interp_harvest import Corpus, PackingPolicy, pack, tokenizer_encoder

    policy = PackingPolicy(size, "context", model.tokenizer.bos_token_id)
    encode = tokenizer_encoder(model.tokenizer)
    return [c.tokens for c in pack(Corpus(corpus), encode, policy, max_contexts=count)]
