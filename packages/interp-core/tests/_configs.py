"""What config does a facts test start from, and how does it state only what it changes?

Each facts test begins from one family's published config (or a tiny Llama-shaped one) and
replaces a few keys; `configured` makes that copy, so a test never mutates the shared base.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# A Llama-shaped trunk small enough that every count in a test is checkable by hand.
TINY: dict[str, Any] = {
    "num_hidden_layers": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 100,
}


def configured(base: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A deep copy of `base` with `overrides` replacing (or adding) top-level keys."""
    config = copy.deepcopy(dict(base))
    config.update(overrides)
    return config


def tiny(model_type: str, **overrides: Any) -> dict[str, Any]:
    """The tiny trunk as `model_type`, with `overrides` on top."""
    return configured(TINY, model_type=model_type, **overrides)
