"""The pieces every tiny family config is built from: the spec type, the shared dimensions and the
parts several families share (expert counts, DeepSeek's routing and latent attention, Mamba-2
mixers, layer patterns, multipliers).

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
    "GEMMA2_ATTENTION",
    "GEMMA_KV_SHARING",
    "GRANITE_MULTIPLIERS",
    "GROUPED_ROUTING",
    "IDS",
    "INIT_RANGE",
    "LOCAL_EXPERTS",
    "MAMBA2",
    "MLA_DIRECT_QUERY",
    "QWEN_MOE_DENSE_FIRST",
    "SLIDING_THREE_TO_ONE",
    "FamilySpec",
    "decoder",
    "experts",
    "gpt",
    "partial_rotary",
    "tiny",
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


def tiny(**keys: Any) -> dict[str, Any]:
    """A config in the family's own spelling (`keys`), with what every tiny family shares: the
    test tokenizer's vocabulary and special ids, and the raised init spread."""
    return {"vocab_size": TOKENIZER_VOCAB_SIZE, **keys, "initializer_range": INIT_RANGE, **IDS}


def experts(count: str = "num_experts", width: str = "moe_intermediate_size") -> dict[str, Any]:
    """The routed experts most MoE families share, 4 of width 64 with each token routed to 2,
    under the family's own names for the expert count and the expert width."""
    return {count: 4, "num_experts_per_tok": 2, width: 64}


def partial_rotary(factor: float) -> dict[str, Any]:
    """`rope_parameters` for default rotary (base 10000) on `factor` of each head's width."""
    return {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor}


# The routed experts most MoE families share: 4 experts of width 64, each token routed to 2.
EXPERTS: dict[str, Any] = experts()
# Mixtral's spelling of the shared experts: the count as num_local_experts, the expert width as
# intermediate_size.
LOCAL_EXPERTS: dict[str, Any] = experts("num_local_experts", "intermediate_size")
# DeepSeek-V3's routing, tiny, as every family that borrows it states it (with its own name for
# the count of 4 routed experts): 2 groups of which 1 is kept, top-2, scaled ×2.5, plus one
# shared expert, all 64 wide.
GROUPED_ROUTING: dict[str, Any] = {
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_intermediate_size": 64,
    "n_group": 2,
    "topk_group": 1,
    "routed_scaling_factor": 2.5,
}
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
    **GROUPED_ROUTING,
    "first_k_dense_replace": 1,
}
# DeepSeek-V2-Lite's latent attention, which Kimi Linear reuses: the query projected directly
# (no q low rank), kv through a 64-wide latent plus a 32-wide shared rope key, heads of 32.
MLA_DIRECT_QUERY: dict[str, Any] = {
    "q_lora_rank": None,
    "kv_lora_rank": 64,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 32,
    "v_head_dim": 32,
}
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
# The Mamba-2 mixer of Bamba, Granite-4.0-H and Falcon-H1, in the spelling they share: 4 heads of
# 64 in one group, state 16, kernel 4, chunks of 8 so the 13-token prompt spans two.
MAMBA2: dict[str, Any] = {
    "mamba_n_heads": 4,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_chunk_size": 8,
}
# Granite's four multipliers away from 1 (Granite and GraniteMoE): embeddings ×4, each residual
# write ×0.5, attention scores ×0.05 (instead of head_dim**-0.5), logits ÷2.
GRANITE_MULTIPLIERS: dict[str, Any] = {
    "embedding_multiplier": 4.0,
    "residual_multiplier": 0.5,
    "attention_multiplier": 0.05,
    "logits_scaling": 2.0,
}
# Three sliding layers (window 4) for each global one, over 4 layers (Cohere-2, OLMo-3,
# EXAONE-4 and Command-A MoE).
SLIDING_THREE_TO_ONE: dict[str, Any] = {
    "num_hidden_layers": 4,
    "sliding_window": 4,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
}
# Gemma-2's attention, which VaultGemma keeps: heads of 32, window 4, scores scaled by 24**-0.5,
# both softcaps low enough (5 and 3) to bend these models' scores and logits.
GEMMA2_ATTENTION: dict[str, Any] = {
    "head_dim": 32,
    "sliding_window": 4,
    "query_pre_attn_scalar": 24,
    "attn_logit_softcapping": 5.0,
    "final_logit_softcapping": 3.0,
    "hidden_activation": "gelu_pytorch_tanh",
}
# Qwen2-MoE's and Qwen3-MoE's layers: layer 0 dense (mlp_only_layers), layers 1-2 routed.
QWEN_MOE_DENSE_FIRST: dict[str, Any] = {
    "num_hidden_layers": 3,
    **EXPERTS,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [0],
    "use_sliding_window": False,
}
# Gemma-3n's and Gemma-4's trunk: 4 layers, sliding (window 4, heads of 32) and full alternating,
# layers 2 and 3 computing no keys or values but reusing those of the last earlier layer of
# their kind (layers 0 and 1).
GEMMA_KV_SHARING: dict[str, Any] = {
    "num_hidden_layers": 4,
    "head_dim": 32,
    "sliding_window": 4,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "hidden_activation": "gelu_pytorch_tanh",
}


def _overridden(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with a family's overrides on top, less the keys they mark `DROP`."""
    merged = {**base, **overrides}
    return {key: value for key, value in merged.items() if value is not DROP}


def decoder(**overrides: Any) -> dict[str, Any]:
    """The shared dimensions of the Llama-style families, with per-family overrides."""
    return _overridden(
        tiny(
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        ),
        overrides,
    )


def gpt(**overrides: Any) -> dict[str, Any]:
    """The shared dimensions of the GPT-2-era families, which spell them differently."""
    return _overridden(
        tiny(
            n_embd=128,
            n_layer=2,
            n_head=4,
            n_positions=128,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        ),
        overrides,
    )
