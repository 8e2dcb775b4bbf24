"""Family conventions: what a published config leaves unsaid, keyed by `model_type`.

`interp_core.facts` reads a config literally where it speaks; these tables hold only what it
does not say for itself (the config class's defaults, traits the modelling code hard-wires).
Wherever a config states a fact, the config wins. Plain data, standard library only.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ALTUP_TYPES",
    "ALWAYS_PARALLEL_TYPES",
    "BIASED_TYPES",
    "CLASS_DEFAULTS",
    "COMPRESS_RATIO_KINDS",
    "DENSE_BESIDE_EXPERTS_TYPES",
    "DENSE_MLP_NAMES",
    "DENSE_MLP_WIDTH_KEYS",
    "GATED_ATTN_OUTPUT_TYPES",
    "GLOBAL_HEAD_TYPES",
    "INDEXED_ATTENTION_TYPES",
    "INLINE_SHARED_MLP_TYPES",
    "LAST_LAYER_FULL_TYPES",
    "LAYER_TYPE_NAMES",
    "LAYER_TYPE_NAMES_BY_FAMILY",
    "LEARNED_POSITION_TYPES",
    "LEGACY_COMPRESS_RATE_KEYS",
    "NESTED_CONFIG_KEYS",
    "NORMED_SKIP_TYPES",
    "PARALLEL_BY_DEFAULT",
    "PARALLEL_SSM_TYPES",
    "PER_LAYER_INPUT_TYPES",
    "POST_NORM_ONLY_TYPES",
    "QK_NORM_AFTER_ROPE_TYPES",
    "QK_NORM_TYPES",
    "ROUTED_ATTENTION_TYPES",
    "ROUTER_LOGITS_MODULES",
    "ROUTER_OUTPUT_LAYOUTS",
    "SANDWICH_NORM_TYPES",
    "SHARED_KEY_VALUE_TYPES",
    "SHARED_MLP_TYPES",
    "SINGLE_SUBLAYER_PATTERN_LETTERS",
    "SINGLE_SUBLAYER_TYPES",
    "SPARSE_MLP_NAMES",
    "SQRT_EMBED_SCALE_TYPES",
    "UNGATED_MLP_TYPES",
    "UNTIED_BY_DEFAULT",
    "VALUE_NORM_TYPES",
    "WINDOW_FROM_MAX_LAYERS_TYPES",
]

# Tables of family conventions, keyed by `model_type`. They hold only what a config does not say
# for itself; wherever a config states a fact, the config wins.

# What the transformers config class assumes for keys a published config may leave out. Only
# families whose published configs actually omit them are listed; everything else must state its
# dimensions.
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    # Gemma-3 multimodal checkpoints name only the keys that differ from Gemma3TextConfig().
    "gemma3_text": {
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    "gemma2": {
        "head_dim": 256,
        "sliding_window": 4096,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
    },
    "gemma3n_text": {
        "head_dim": 256,
        "sliding_window": 512,
        "final_logit_softcapping": 30.0,
        "altup_num_inputs": 4,
        "altup_active_idx": 0,
        "num_kv_shared_layers": 15,
        "laurel_rank": 64,
    },
    "gpt_oss": {"sliding_window": 128},
    "qwen3_next": {"full_attention_interval": 4},
    "deepseek_v32": {"index_topk": 2048},
    # DeepSeek-V4's published configs give per-layer `compress_ratios` and no `compress_rates`.
    "deepseek_v4": {
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
    },
    # Gemma4TextConfig's defaults for the keys its own traits are read from.
    "gemma4_text": {
        "head_dim": 256,
        "global_head_dim": 512,
        "sliding_window": 512,
        "hidden_size_per_layer_input": 256,
        "num_kv_shared_layers": 0,
        "attention_k_eq_v": False,
        "enable_moe_block": False,
        "use_double_wide_mlp": False,
    },
}

# `tie_word_embeddings` when the config leaves it out is the config class's own default; families
# not listed inherit PretrainedConfig's True.
UNTIED_BY_DEFAULT = frozenset(
    {
        "apertus",
        "arcee",
        "bamba",
        "codegen",
        "dbrx",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "dots1",
        "exaone4",
        "falcon_h1",
        "flex_olmo",
        "glm",
        "glm4",
        "glm4_moe",
        "gpt_neox",
        "gpt_oss",
        "gptj",
        "granite",
        "granitemoe",
        "granitemoehybrid",
        "helium",
        "hunyuan_v1_dense",
        "hunyuan_v1_moe",
        "jamba",
        "kimi_linear",
        "llama",
        "llama4_text",
        "minimax",
        "ministral",
        "ministral3",
        "mistral",
        "mixtral",
        "nemotron",
        "nemotron_h",
        "olmo2",
        "olmo3",
        "phi",
        "phi3",
        "phimoe",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_5_moe_text",
        "qwen3_5_text",
        "qwen3_moe",
        "qwen3_next",
        "seed_oss",
    }
)

# Linear layers with biases and LayerNorms with a bias beside the gain (the GPT-2 era); the other
# families use bias-free linears and RMSNorm (a config's `attention_bias` adds q/k/v biases only).
BIASED_TYPES = frozenset(
    {
        "bloom",
        "codegen",
        "falcon",
        "gpt2",
        "gpt_bigcode",
        "gpt_neo",
        "gpt_neox",
        "gptj",
        "opt",
        "phi",
        "starcoder2",
    }
)

# A learned absolute position embedding added to the token embeddings; the rest use rotary or
# ALiBi positions, which have no table.
LEARNED_POSITION_TYPES = frozenset({"codegen", "gpt2", "gpt_bigcode", "gpt_neo", "opt"})

# Plain fc -> act -> proj MLPs; every other family multiplies a gate into the up projection.
UNGATED_MLP_TYPES = frozenset(
    {
        "apertus",
        "arcee",
        "bloom",
        "codegen",
        "falcon",
        "gpt2",
        "gpt_bigcode",
        "gpt_neo",
        "gpt_neox",
        "gptj",
        "mpt",
        "nemotron",
        "nemotron_h",
        "opt",
        "persimmon",
        "phi",
        "starcoder2",
    }
)

# Attention and MLP read the same resid_pre in every layer, with no config switch to say so.
ALWAYS_PARALLEL_TYPES = frozenset({"codegen", "cohere", "cohere2", "cohere2_moe", "gptj", "phi"})

# Families whose parallel switch defaults to on when the config leaves it out.
PARALLEL_BY_DEFAULT = frozenset({"falcon", "gpt_neox"})

# RMSNorm on the queries and keys before attention, with no config switch to say so.
QK_NORM_TYPES = frozenset(
    {
        "apertus",
        "dots1",
        "exaone4",
        "flex_olmo",
        "gemma3",
        "lfm2",
        "gemma3_text",
        "gemma3n_text",
        "gemma4_text",
        "olmo2",
        "olmo3",
        "olmoe",
        "qwen3",
        "qwen3_moe",
        "qwen3_next",
        "qwen3_5_moe_text",
        "qwen3_5_text",
    }
)

# A per-head norm on the queries and keys applied after rotary embedding (Hunyuan; Llama-4's
# weightless L2 norm, whose `use_qk_norm` says only that it runs), where the QK-norm points are
# defined before it: the norm exists, but not at those points.
QK_NORM_AFTER_ROPE_TYPES = frozenset({"hunyuan_v1_dense", "hunyuan_v1_moe", "llama4_text"})

# One shared MLP of `intermediate_size` beside the routed experts on every sparse layer, with no
# config key to say so (Hunyuan-MoE's shared_mlp, Llama-4's shared_expert).
SHARED_MLP_TYPES = frozenset({"hunyuan_v1_moe", "llama4_text"})

# Routers whose output is not (logits, weights, indices) and whose experts module receives no
# routing tensors, so the choices are read from the router's output, by its layout:
# "scores-logits" (Llama-4): dense per-expert scores, zero off the top-k, then the logits (the
# experts read inputs already scaled by the scores); "sorted" (JetMoE's ScatterMoE gating): the
# token-expert pairs sorted by expert (order, token of each, weight of each, tokens per expert),
# then the logits.
ROUTER_OUTPUT_LAYOUTS: dict[str, str] = {"llama4_text": "scores-logits", "jetmoe": "sorted"}

# A mixture of attention heads (JetMoE): each token's routed experts bring their own query and
# output projections, so attention head h is a different expert's head at each token.
ROUTED_ATTENTION_TYPES = frozenset({"jetmoe"})

# Each layer is ONE sublayer behind one pre-norm and one residual add (Nemotron-H): a Mamba-2
# mixer, softmax attention, a dense MLP or a mixture of experts, as the per-layer block list
# (`layers_block_type`, or the older `hybrid_override_pattern` string) names it. No layer has
# both a mixer and an MLP, and none has a second residual add.
SINGLE_SUBLAYER_TYPES = frozenset({"nemotron_h"})
# The letters of Nemotron-H's `hybrid_override_pattern`, as the block-list names they stand for.
SINGLE_SUBLAYER_PATTERN_LETTERS: dict[str, str] = {
    "M": "linear_attention",
    "*": "full_attention",
    "-": "mlp",
    "E": "moe",
}

# Families whose sparse layers sum the routed experts and a shared MLP inline in the decoder block
# (Granite-4.0-H: `block_sparse_moe(x) + shared_mlp(x)`), so no module returns the MLP's output.
INLINE_SHARED_MLP_TYPES = frozenset({"granitemoehybrid"})

# The key holding the dense MLP's width where it is not `intermediate_size`: Granite-4.0-H's
# dense members build only `shared_mlp`, of `shared_intermediate_size`, and leave
# `intermediate_size` (the routed experts' width) at a value no layer uses.
DENSE_MLP_WIDTH_KEYS: dict[str, str] = {"granitemoehybrid": "shared_intermediate_size"}

# Norms on the sublayer outputs, inside the residual branch.
SANDWICH_NORM_TYPES = frozenset(
    {
        "exaone4",
        "flex_olmo",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gemma3n_text",
        "gemma4_text",
        "glm4",
        "olmo2",
        "olmo3",
    }
)
POST_NORM_ONLY_TYPES = frozenset({"exaone4", "flex_olmo", "olmo2", "olmo3"})

# Families that multiply the embedding output by sqrt(d_model).
SQRT_EMBED_SCALE_TYPES = frozenset(
    {"gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n_text", "gemma4_text", "vaultgemma"}
)

# Full-attention layers with their own head width (`global_head_dim`) and, where keys double as
# values, their own K/V head count (Gemma-4); read by `interp_core.layer_widths`.
GLOBAL_HEAD_TYPES = frozenset({"gemma4_text"})

# Families whose config class makes the last layer full attention even when `layer_types` says
# otherwise (Gemma-4).
LAST_LAYER_FULL_TYPES = frozenset({"gemma4_text"})

# A per-layer input (a slice of a per-token table plus a projection of the embedding) gated by
# each block's output and added to the residual after the MLP (Gemma-4; Gemma-3n adds it to
# the AltUp streams other than the active one).
PER_LAYER_INPUT_TYPES = frozenset({"gemma3n_text", "gemma4_text"})

# Routed experts beside a dense MLP in the same layer, each read through its own norm from
# resid_mid and the two outputs normed and summed inside the block (Gemma-4): the dense MLP's
# neurons exist on every layer, but no module returns the sum, and no single tensor is the input.
DENSE_BESIDE_EXPERTS_TYPES = frozenset({"gemma4_text"})

# Values normalised after their projection (Gemma-3n's and Gemma-4's weightless v_norm): the
# value point is the norm's output, which attention mixes, not v_proj's.
VALUE_NORM_TYPES = frozenset({"gemma3n_text", "gemma4_text"})

# Routers that return probabilities instead of logits, with the child module whose output is
# the raw logits (Gemma-4's router: norm, scale, `proj`, softmax, top-k).
ROUTER_LOGITS_MODULES: dict[str, str] = {"gemma4_text": "proj"}

# An output gate multiplies the attention result before o_proj.
GATED_ATTN_OUTPUT_TYPES = frozenset({"qwen3_5_moe_text", "qwen3_5_text", "qwen3_next"})
# DeepSeek Sparse Attention: a lightning indexer scores every visible key and each query attends
# only to the `index_topk` best (DeepSeek-V3.2), on every layer.
INDEXED_ATTENTION_TYPES = frozenset({"deepseek_v32"})
# Attention whose keys and values are one projected tensor (K = V), so no value projection exists.
SHARED_KEY_VALUE_TYPES = frozenset({"deepseek_v4"})
# AltUp trunks (Gemma-3n): `altup_num_inputs` residual streams, predicted and corrected around
# each block, with attention and MLP on the active one; LAuReL beside attention, per-layer inputs,
# KV sharing and activation sparsity come with them.
ALTUP_TYPES = frozenset({"gemma3n_text"})

# A Mamba-2 mixer beside the attention in every layer, reading the same normed input, the two
# outputs scaled and summed inside the block before the residual add (Falcon-H1).
PARALLEL_SSM_TYPES = frozenset({"falcon_h1"})

# Families that slide only from `max_window_layers` on, and only with `use_sliding_window`; every
# other family that states a window slides on every layer (Mistral, Phi-3, Starcoder2).
WINDOW_FROM_MAX_LAYERS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})

# Blocks whose skip path carries the sublayer's normed input rather than the residual: each
# sublayer leaves alpha * norm(x) + beta * sublayer(norm(x)) (MiniMax, DeepNorm-style factors
# per mixer kind and for the MLP), so no state is "the residual plus a write".
NORMED_SKIP_TYPES = frozenset({"minimax"})

# Sub-mappings whose keys are read as if stated at the top (DBRX keeps its attention and MoE
# settings in `attn_config` and `ffn_config`).
NESTED_CONFIG_KEYS: dict[str, tuple[str, ...]] = {"dbrx": ("attn_config", "ffn_config")}

# Names configs use in `layer_types`, mapped to LAYER_KINDS.
LAYER_TYPE_NAMES: dict[str, str] = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    # DeepSeek-V3.2's sparse attention: causal softmax attention over the keys its lightning
    # indexer keeps (`ModelFacts.index_topk` of them); the cache holds every token, as "full".
    "indexed_attention": "full",
    "linear_attention": "linear_attention",
    "recurrent": "recurrent",
    "mamba": "mamba",
    "mamba2": "mamba",
    "conv": "conv",
    "short_conv": "conv",
}

# Where a family's `layer_types` name means something narrower than LAYER_TYPE_NAMES says:
# transformers 5 spells Granite-4.0-H's Mamba-2 layers `linear_attention`.
# Nemotron-H's block list says `linear_attention` for its Mamba-2 layers too, and names its two
# mixerless kinds (a dense MLP, a mixture of experts), both of kind "mlp".
LAYER_TYPE_NAMES_BY_FAMILY: dict[str, dict[str, str]] = {
    "granitemoehybrid": {"linear_attention": "mamba"},
    "nemotron_h": {"linear_attention": "mamba", "mlp": "mlp", "moe": "mlp"},
    # DeepSeek-V4: a sliding window of tokens plus compressed entries, one per
    # `compress_rates[name]` tokens; CSA keeps each query's indexer top-k of them, HCA all.
    "deepseek_v4": {
        "compressed_sparse_attention": "compressed_sparse",
        "heavily_compressed_attention": "heavily_compressed",
    },
}

# DeepSeek-V4's per-layer `compress_ratios` (published configs), read by value as transformers
# reads them; and the older scalar key that overrides each compressed kind's rate.
COMPRESS_RATIO_KINDS = {0: "sliding", 4: "compressed_sparse", 128: "heavily_compressed"}
LEGACY_COMPRESS_RATE_KEYS = {
    "compressed_sparse_attention": "compress_rate_csa",
    "heavily_compressed_attention": "compress_rate_hca",
}

# Names configs use in `mlp_layer_types`.
SPARSE_MLP_NAMES = frozenset({"sparse", "moe", "hash_moe"})
DENSE_MLP_NAMES = frozenset({"dense", "mlp"})
