"""Finding a tiny model's decoder layers by looking, independently of any backend.

The test suites check the backends' module resolution against something that does not share
its code: the first non-empty `ModuleList` whose entries' class names read as a decoder layer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["decoder_layers"]


def decoder_layers(model: Any) -> Any:
    """The `torch.nn.ModuleList` of `model`'s decoder layers; AssertionError when none is found."""
    import torch

    for _, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module):
            if type(module[0]).__name__.endswith(("DecoderLayer", "Block", "Layer")):
                return module
    message = f"no decoder layer list in {type(model).__name__}"
    raise AssertionError(message)
