"""Which tiny config stands for each architecture family in the tests?

Family names are the transformers `model_type` of the family's text model, with four
exceptions named after their multimodal wrapper's type, which is not a causal LM of its own:
`gemma3` is the text-only Gemma-3 (`model_type` `gemma3_text`, `Gemma3ForCausalLM`), `qwen3_5`
and `qwen3_5_moe` the text-only Qwen3.5 and Qwen3.5-MoE (`qwen3_5_text`, `qwen3_5_moe_text`),
`llama4` the text-only Llama-4 (`llama4_text`, `Llama4ForCausalLM`). The configs live in
modules named for what they hold, and `FAMILY_NAMES` lists them in that order:
`configs_gpt` (the GPT-2-era dense decoders), `configs_dense` (the Llama-style dense decoders),
`configs_moe` (mixtures of experts), `configs_hybrid` (recurrent and linear-attention mixers
beside softmax attention) and `configs_multistream` (several residual streams or widths that
vary by layer). The pieces several families share (base dimensions, expert counts, DeepSeek's
latent attention and routing, Mamba-2 mixers, layer patterns, multipliers) are in
`interp_testmodels.config_parts`.

Each config is chosen to exercise what makes its family different, within limits every backend
can run on a CPU:

- residual width 128, 2-4 layers, vocabulary 1000 (the tokenizer's), 128 positions;
- per-head width at least 32 wherever the config lets it be chosen (vLLM's CPU attention has no
  kernel for 16), grouped K/V heads where the family has them;
- sliding windows of 4-6 tokens, shorter than the 12-token `TEST_PROMPT`, so masking is tested;
- mixtures of 4 experts routing each token to 2, with dense layers alongside wherever the family
  can mix them; multipliers, softcaps and logit scales away from 1 so that forgetting one shows;
- `initializer_range` raised so attention patterns are far from uniform and logits far from
  flat (what the builder then does to constant-initialised parameters is in
  `interp_testmodels.families`).

These modules are data: they hold each config as a plain mapping and import transformers only
when a config object is asked for, so the docs generator reads them for free.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from interp_testmodels.config_parts import INIT_RANGE, FamilySpec
from interp_testmodels.configs_dense import DENSE_SPECS
from interp_testmodels.configs_gpt import GPT_SPECS
from interp_testmodels.configs_hybrid import HYBRID_SPECS
from interp_testmodels.configs_moe import MOE_SPECS
from interp_testmodels.configs_multistream import MULTISTREAM_SPECS

__all__ = ["FAMILIES", "FAMILY_NAMES", "INIT_RANGE", "UNAVAILABLE", "FamilySpec"]

FAMILIES: Mapping[str, FamilySpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (*GPT_SPECS, *DENSE_SPECS, *MOE_SPECS, *HYBRID_SPECS, *MULTISTREAM_SPECS)
    }
)
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)

# Families the installed transformers cannot build or run on this CPU, with the exact error, and
# the substitute standing in for each. Empty: all 70 run with transformers 5.19 on torch 2.13 CPU.
UNAVAILABLE: Mapping[str, str] = MappingProxyType({})
