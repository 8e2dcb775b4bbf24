"""Config mappings shaped like published checkpoints, for the tests that read facts from them.

The facts tests (interp-core) and the sizing tests (interp-sizer) both price and read the same
families from their published widths; the widths live here once so the two suites read one
shape. Each function returns the text model's keys as the published config spells them, with
the caller's overrides (layer counts, layer kinds, sharing) on top; `config_file` does the same
for a config the suites keep as a JSON file beside their tests. Plain data, stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["GEMMA3N_KINDS", "config_file", "deepseek_v4", "gemma3n_text", "gemma4_text"]


def config_file(path: str | Path, section: str | None = None, **overrides: Any) -> dict[str, Any]:
    """The config.json mapping stored at `path`, `overrides` on top: on its top level, or inside
    its nested `section` (a wrapper's `text_config`, DBRX's `attn_config`)."""
    config: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    (config if section is None else config[section]).update(overrides)
    return config


def deepseek_v4(**overrides: Any) -> dict[str, Any]:
    """DeepSeek-V4's trunk widths (one K/V head of 512, 256 routed experts, 4 streams)."""
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "num_hidden_layers": 5,
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "head_dim": 512,
        "vocab_size": 129280,
        "n_routed_experts": 256,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 2048,
        "hc_mult": 4,
        "sliding_window": 128,
        "index_head_dim": 128,
        **overrides,
    }


def gemma4_text(**overrides: Any) -> dict[str, Any]:
    """A small Gemma-4 member's text widths: sliding layers of 2 K/V heads × 256, full layers of
    one K/V head × 512 whose keys are its values."""
    return {
        "model_type": "gemma4_text",
        "hidden_size": 1536,
        "intermediate_size": 6144,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "global_head_dim": 512,
        "num_global_key_value_heads": 1,
        "attention_k_eq_v": True,
        "vocab_size": 262144,
        "sliding_window": 512,
        **overrides,
    }


# Gemma-3n E4B: every fifth of its 30 layers attends globally, the rest within the window.
GEMMA3N_KINDS = tuple(
    "full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(30)
)


def gemma3n_text(**overrides: Any) -> dict[str, Any]:
    """Gemma-3n E4B's text widths: 30 layers, the last 10 reading the K/V of earlier ones."""
    return {
        "model_type": "gemma3n_text",
        "hidden_size": 2048,
        "num_hidden_layers": 30,
        "intermediate_size": [8192] * 30,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "vocab_size": 262400,
        "layer_types": list(GEMMA3N_KINDS),
        "sliding_window": 512,
        "num_kv_shared_layers": 10,
        **overrides,
    }
