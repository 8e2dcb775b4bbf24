"""The pieces every tiny family config is built from: the spec type and the shared dimensions.

Every `interp_testmodels.configs_*` module (dense, GPT-era, MoE, hybrid, multi-stream) builds
its table from these. Plain data: transformers is imported only when a config object is asked
for.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interp_testmodels.tokenizer import (
    BOS_TOKEN_ID,
    EOS_TOKEN_ID,
    PAD_TOKEN_ID,
    TOKENIZER_VOCAB_SIZE,
)

__all__ = [
    "DEEPSEEK_V3_MLA_MOE",
    "DROP",
    "EXPERTS",
    "GATED_DELTA_NET",
    "IDS",
    "INIT_RANGE",
    "FamilySpec",
    "decoder",
    "gpt",
]

# The spread of the random weights. The transformers default (0.02) leaves query-key products
# near zero at this width, so every attention pattern is almost uniform and a wrong softmax scale
# or a missing softcap changes little; 0.1 gives peaked patterns and logits with a spread of a
# few units while the residual stream stays well scaled through 4 layers.
INIT_RANGE = 0.1


@dataclass(frozen=True)
class FamilySpec:
    """One family's tiny config: the keyword arguments, what it exercises, and the `model_type`
    (the family's name, except for the four text models named after their wrapper)."""

    name: str
    config: Mapping[str, Any]
    notes: str
    traits: tuple[str, ...] = ()
    model_type: str = ""

    def __post_init__(self) -> None:
        if not self.model_type:
            object.__setattr__(self, "model_type", self.name)

    @property
    def config_class_name(self) -> str:
        from transformers import CONFIG_MAPPING

        return CONFIG_MAPPING[self.model_type].__name__

    def make_config(self) -> Any:
        """The transformers config object these keyword arguments build."""
        from transformers import AutoConfig

        # A deep copy: config classes may normalise nested dicts (rope_parameters) in place,
        # which would change this spec, and with it the cache key, after the first build.
        return AutoConfig.for_model(self.model_type, **copy.deepcopy(dict(self.config)))


# Marks a shared key that a family's config must not receive at all.
DROP = object()
IDS = {"bos_token_id": BOS_TOKEN_ID, "eos_token_id": EOS_TOKEN_ID, "pad_token_id": PAD_TOKEN_ID}
# DeepSeek-V3's multi-head latent attention and routing, tiny, shared by deepseek_v3 and
# deepseek_v32 (which adds its indexer): q through a rank-32 bottleneck; DeepSeek-V3's own kv
# latent (512 + 64 rope = 576), wider than the residual stream, because vLLM's CPU MLA kernel is
# compiled for a 576-wide latent only; layer 0 dense, 4 experts of 64 in 2 groups, top-2.
DEEPSEEK_V3_MLA_MOE: dict[str, Any] = {
    "num_hidden_layers": 3,
    "num_key_value_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 64,
    "v_head_dim": 32,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_group": 2,
    "topk_group": 1,
    "n_shared_experts": 1,
    "moe_intermediate_size": 64,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 2.5,
}

# The routed experts most MoE families share: 4 experts of width 64, each token routed to 2.
EXPERTS: dict[str, Any] = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}
# Qwen3-Next's and Qwen3.5's hybrid trunk: gated delta-net (linear attention) on layers 0 and 2,
# softmax attention on 1 and 3. Key and value heads 64 wide, not 32: vLLM's CPU gated-delta-net
# kernel refuses a head width of 32 ("Unexpected head dim size, 32"); 64 runs (bfloat16 only).
GATED_DELTA_NET: dict[str, Any] = {
    "num_hidden_layers": 4,
    "head_dim": 32,
    "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"],
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel_dim": 4,
}


def decoder(**overrides: Any) -> dict[str, Any]:
    """The shared dimensions of the Llama-style families, with per-family overrides."""
    base: dict[str, Any] = {
        "vocab_size": TOKENIZER_VOCAB_SIZE,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 128,
        "initializer_range": INIT_RANGE,
        **IDS,
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not DROP}


def gpt(**overrides: Any) -> dict[str, Any]:
    """The shared dimensions of the GPT-2-era families, which spell them differently."""
    base: dict[str, Any] = {
        "vocab_size": TOKENIZER_VOCAB_SIZE,
        "n_embd": 128,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 128,
        "initializer_range": INIT_RANGE,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        **IDS,
    }
    base.update(overrides)
    return base
