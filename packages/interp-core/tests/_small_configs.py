"""The small synthetic decoder config several facts test modules start from.

Four layers of 64 with 4 heads over 2 K/V heads: small enough to read in a line, wide enough
that every width rule gives a distinct number. Each test adds the keys its family reads.
"""

from __future__ import annotations

from typing import Any


def small_decoder(model_type: str = "llama", **overrides: Any) -> dict[str, Any]:
    """A `config.json` mapping of `model_type` at the small size, `overrides` on top."""
    return {
        "model_type": model_type,
        "num_hidden_layers": 4,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        **overrides,
    }
