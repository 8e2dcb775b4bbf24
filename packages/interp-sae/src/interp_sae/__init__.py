"""interp-sae: sparse autoencoders and transcoders at interp-engine's standardized points.

`load_sae(path)` reads an SAE from a local folder (SAELens v6, Gemma Scope, EleutherAI
sparsify), its hook name mapped onto our address through the point registry. The `SAE` encodes,
decodes, and builds steering specs: `steering(feature, strength)` adds the feature's decoder row,
`clamp(feature, value)` sets the feature while keeping the reconstruction error. `features(model,
tokens, saes)` returns feature activations (dense or top-k) from one forward pass.

The hook-name mapping (`interp_sae.hooks`) needs only the core; everything else needs torch,
and is imported on first use, so the docs build can read the mapping table without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from interp_sae.__about__ import __version__
from interp_sae.hooks import UnknownHook, address_for_module, address_for_tl_hook, hook_table

if TYPE_CHECKING:
    from interp_sae.features import FeatureActivations, features, features_sync
    from interp_sae.formats import FORMATS, detect_format, load_sae
    from interp_sae.sae import SAE, TopK, top_features

__all__ = [
    "FORMATS",
    "SAE",
    "FeatureActivations",
    "TopK",
    "UnknownHook",
    "__version__",
    "address_for_module",
    "address_for_tl_hook",
    "detect_format",
    "features",
    "features_sync",
    "hook_table",
    "load_sae",
    "top_features",
]

# name -> the module that defines it (imported when the name is first asked for).
_LAZY = {
    "FeatureActivations": "features",
    "features": "features",
    "features_sync": "features",
    "FORMATS": "formats",
    "detect_format": "formats",
    "load_sae": "formats",
    "SAE": "sae",
    "TopK": "sae",
    "top_features": "sae",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        message = f"module 'interp_sae' has no attribute {name!r}"
        raise AttributeError(message)
    value = getattr(importlib.import_module(f"interp_sae.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
