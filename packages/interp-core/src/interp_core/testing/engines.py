"""A model that a test module shares: loaded, warmed up, and shut down when the module is done.

Every backend's suite holds its engines in module- or session-scoped fixtures; this is the one
lifetime they share, so a fixture reads `yield from warmed(path, backend=..., ...)`. The
shutdown runs even when a test fails, so a dead engine's processes never outlive the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from interp_core import sync
from interp_core.backends import load_model

__all__ = ["warmed"]


def warmed(model_id: str, **load_kwargs: Any) -> Iterator[Any]:
    """Load `model_id` with `load_kwargs`, warm it up, yield it, and shut it down afterwards."""
    model = load_model(model_id, **load_kwargs)
    try:
        sync.warmup(model)
        yield model
    finally:
        sync.shutdown(model)
