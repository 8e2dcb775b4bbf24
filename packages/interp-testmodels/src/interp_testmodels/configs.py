"""Which tiny config stands for each architecture family in the tests?

Family names are the transformers `model_type` of the family's text model, with four
exceptions named after their multimodal wrapper's type, which is not a causal LM of its own:
`gemma3` is the text-only Gemma-3 (`model_type` `gemma3_text`, `Gemma3ForCausalLM`), `qwen3_5`
and `qwen3_5_moe` the text-only Qwen3.5 and Qwen3.5-MoE (`qwen3_5_text`, `qwen3_5_moe_text`),
`llama4` the text-only Llama-4 (`llama4_text`, `Llama4ForCausalLM`). `FAMILY_NAMES` lists them
in a fixed order: the first 32 here, then those released since
(`interp_testmodels.configs_recent`), then those added in 2026
(`interp_testmodels.configs_2026`).

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

This module is data: it holds each config as a plain mapping and imports transformers only when
a config object is asked for, so the docs generator reads it for free.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from interp_testmodels.config_parts import (
    DEEPSEEK_V3_MLA_MOE,
    DROP,
    IDS,
    INIT_RANGE,
    FamilySpec,
    decoder,
    gpt,
)
from interp_testmodels.configs_2026 import SPECS_2026
from interp_testmodels.configs_gemma3n import GEMMA3N_SPECS
from interp_testmodels.configs_gemma4 import GEMMA4_SPECS
from interp_testmodels.configs_hybrid import HYBRID_SPECS
from interp_testmodels.configs_nemotron_h import NEMOTRON_H_SPECS
from interp_testmodels.configs_recent import RECENT_SPECS
from interp_testmodels.tokenizer import TOKENIZER_VOCAB_SIZE

__all__ = ["FAMILIES", "FAMILY_NAMES", "INIT_RANGE", "UNAVAILABLE", "FamilySpec"]

_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "gpt2",
        "gpt2",
        gpt(),
        "LayerNorm with bias, learned absolute positions, fused c_attn (q|k|v) in Conv1D layout, "
        "ungated GELU MLP of 4·d (n_inner left null), tied embeddings.",
        ("learned-positions", "fused-qkv", "conv1d", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "gpt_neox",
        "gpt_neox",
        decoder(
            num_key_value_heads=DROP,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
            },
            use_parallel_residual=True,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
        "Pythia layout: parallel attention + MLP, rotary on 25% of each head, fused "
        "query_key_value interleaved per head, biases everywhere, untied.",
        ("parallel", "partial-rotary", "fused-qkv", "ungated-mlp"),
    ),
    FamilySpec(
        "gptj",
        "gptj",
        gpt(rotary_dim=16),
        "Parallel attention + MLP sharing one LayerNorm, interleaved rotary on 16 of 32 dims, "
        "separate q/k/v without bias, MLP of 4·d, untied lm_head with bias.",
        ("parallel", "partial-rotary", "ungated-mlp"),
    ),
    FamilySpec(
        "gpt_bigcode",
        "gpt_bigcode",
        gpt(multi_query=True),
        "Multi-query attention (one K/V head) with a fused c_attn of width d + 2·head_dim, "
        "learned positions, tied embeddings.",
        ("mqa", "learned-positions", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "opt",
        "opt",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "hidden_size": 128,
            "ffn_dim": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "word_embed_proj_dim": 128,
            "do_layer_norm_before": True,
            "dropout": 0.0,
            "init_std": INIT_RANGE,
            **IDS,
        },
        "OPT-125m layout: pre-LayerNorm, learned positions offset by 2, ReLU MLP (fc1/fc2), "
        "biases on every projection, tied embeddings.",
        ("learned-positions", "ungated-mlp", "relu", "tied"),
    ),
    FamilySpec(
        "bloom",
        "bloom",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "hidden_size": 128,
            "n_layer": 2,
            "n_head": 4,
            "initializer_range": INIT_RANGE,
            **IDS,
        },
        "ALiBi position bias (no rotary, no position embeddings), a LayerNorm right after the "
        "embedding, fused query_key_value interleaved per head, MLP of 4·d, tied embeddings.",
        ("alibi", "embedding-norm", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "falcon",
        "falcon",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "hidden_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_kv_heads": 2,
            "new_decoder_architecture": True,
            "parallel_attn": True,
            "bias": True,
            "alibi": False,
            "max_position_embeddings": 128,
            "initializer_range": INIT_RANGE,
            **IDS,
        },
        "Falcon-40B decoder (new_decoder_architecture): parallel attention + MLP with two "
        "LayerNorms (ln_attn, ln_mlp), grouped K/V (2 of 4 heads) in a fused query_key_value, "
        "rotary, biases on, MLP of 4·d, tied embeddings.",
        ("parallel", "gqa", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "llama",
        "llama",
        decoder(),
        "The reference decoder: RMSNorm, rotary, GQA (2 K/V heads for 4), SwiGLU MLP, untied.",
        ("gqa", "gated-mlp"),
    ),
    FamilySpec(
        "mistral",
        "mistral",
        decoder(sliding_window=4),
        "Llama with a 4-token sliding window on every layer.",
        ("gqa", "gated-mlp", "sliding"),
    ),
    FamilySpec(
        "mixtral",
        "mixtral",
        decoder(intermediate_size=128, num_local_experts=4, num_experts_per_tok=2),
        "Every layer a routed mixture: 4 SwiGLU experts of width 128, top-2, softmax router "
        "(Mixtral has no dense layers to mix in).",
        ("gqa", "moe"),
    ),
    FamilySpec(
        "qwen2",
        "qwen2",
        decoder(use_sliding_window=False),
        "Llama with biases on q/k/v (Qwen2 always has them) and none on o_proj.",
        ("gqa", "gated-mlp", "qkv-bias"),
    ),
    FamilySpec(
        "qwen2_moe",
        "qwen2_moe",
        decoder(
            num_hidden_layers=3,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=128,
            decoder_sparse_step=1,
            mlp_only_layers=[0],
            norm_topk_prob=False,
            use_sliding_window=False,
        ),
        "Layer 0 dense (mlp_only_layers), layers 1-2 routed: 4 experts of 64, top-2 without "
        "renormalising, plus a sigmoid-gated shared expert of 128; q/k/v biases.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "qkv-bias"),
    ),
    FamilySpec(
        "qwen3",
        "qwen3",
        decoder(head_dim=32, use_sliding_window=False),
        "Llama with per-head RMSNorm on q and k (QK-norm) and an explicit head_dim.",
        ("gqa", "gated-mlp", "qk-norm"),
    ),
    FamilySpec(
        "qwen3_moe",
        "qwen3_moe",
        decoder(
            num_hidden_layers=3,
            head_dim=32,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            decoder_sparse_step=1,
            mlp_only_layers=[0],
            norm_topk_prob=True,
            use_sliding_window=False,
        ),
        "QK-norm; layer 0 dense (mlp_only_layers), layers 1-2 routed: 4 experts of 64, top-2 "
        "renormalised, no shared expert.",
        ("gqa", "moe", "dense-and-sparse", "qk-norm"),
    ),
    FamilySpec(
        "qwen3_next",
        "qwen3_next",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            layer_types=[
                "linear_attention",
                "full_attention",
                "linear_attention",
                "full_attention",
            ],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            # 64, not 32: vLLM's CPU gated-delta-net kernel refuses a head width of 32
            # ("Unexpected head dim size, 32"); 64 runs (bfloat16 only, see the notes).
            linear_key_head_dim=64,
            linear_value_head_dim=64,
            linear_conv_kernel_dim=4,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=64,
            decoder_sparse_step=1,
            mlp_only_layers=[0, 1],
            norm_topk_prob=True,
        ),
        "Hybrid trunk: gated delta-net (linear attention) on layers 0 and 2, gated softmax "
        "attention (output gate, QK-norm, partial rotary 25%) on 1 and 3; layers 0-1 dense, "
        "2-3 routed (4 experts of 64, top-2, shared expert), so each mixer meets each MLP kind. "
        "Norms store weight - 1 (zero-centred). Delta-net heads: 2 key and 4 value heads of "
        "64. vLLM's CPU delta-net kernel runs only in bfloat16: build with dtype='bfloat16' "
        "there.",
        ("gqa", "linear-attention", "gated-attn-output", "qk-norm", "moe", "dense-and-sparse"),
    ),
    FamilySpec(
        "gemma",
        "gemma",
        decoder(
            num_key_value_heads=1,
            head_dim=32,
            hidden_act="gelu_pytorch_tanh",
        ),
        "Gemma-2B layout: multi-query attention (1 K/V head), embedding scaled by sqrt(d), "
        "RMSNorm storing weight - 1, GeGLU MLP, tied embeddings.",
        ("mqa", "embed-scale", "zero-centred-norm", "gated-mlp", "tied"),
    ),
    FamilySpec(
        "gemma2",
        "gemma2",
        decoder(
            head_dim=32,
            sliding_window=4,
            query_pre_attn_scalar=24,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
        ),
        "Sandwich norms (pre and post around both sublayers), sliding window 4 on layer 0 and "
        "global on layer 1, attention scaled by 24**-0.5 rather than head_dim**-0.5, both "
        "softcaps set low enough (5 and 3) to bend these models' scores and logits.",
        ("gqa", "sandwich", "sliding", "softcap", "embed-scale", "zero-centred-norm", "tied"),
    ),
    FamilySpec(
        "gemma3",
        "gemma3_text",
        decoder(
            num_hidden_layers=3,
            head_dim=32,
            sliding_window=4,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            query_pre_attn_scalar=32,
            hidden_activation="gelu_pytorch_tanh",
        ),
        "Text-only Gemma-3 (Gemma3ForCausalLM): sandwich norms, QK-norm, two sliding layers "
        "(window 4, local rotary base) then a global one (global rotary base).",
        ("gqa", "sandwich", "sliding", "qk-norm", "embed-scale", "zero-centred-norm", "tied"),
    ),
    FamilySpec(
        "phi",
        "phi",
        decoder(
            num_key_value_heads=DROP,
            partial_rotary_factor=0.5,
            hidden_act="gelu_new",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attention_dropout=0.0,
        ),
        "Phi-2 layout: parallel attention + MLP sharing one LayerNorm, rotary on 50% of each "
        "head, biases on every projection, ungated fc1/fc2 MLP, lm_head with bias.",
        ("parallel", "partial-rotary", "ungated-mlp"),
    ),
    FamilySpec(
        "phi3",
        "phi3",
        decoder(sliding_window=6, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0),
        "Fused qkv_proj (q|k|v with GQA) and fused gate_up_proj, sliding window 6 on every "
        "layer (Phi-3-mini states one too).",
        ("gqa", "fused-qkv", "fused-gate-up", "sliding"),
    ),
    FamilySpec(
        "olmo",
        "olmo",
        decoder(clip_qkv=None),
        "LayerNorm without any parameters (nothing to perturb there), otherwise Llama-like with "
        "GQA; clip_qkv left off.",
        ("gqa", "parameter-free-norm", "gated-mlp"),
    ),
    FamilySpec(
        "olmo2",
        "olmo2",
        decoder(),
        "Norms only after each sublayer (no pre-norms), QK-norm over the whole q and k width "
        "(not per head).",
        ("gqa", "post-norms-only", "qk-norm", "gated-mlp"),
    ),
    FamilySpec(
        "olmoe",
        "olmoe",
        decoder(
            num_key_value_heads=4,
            intermediate_size=64,
            num_experts=4,
            num_experts_per_tok=2,
            norm_topk_prob=False,
        ),
        "Every layer routed: 4 experts of 64, top-2 unnormalised; QK-norm over the full width; "
        "multi-head K/V as in OLMoE-1B-7B (OLMoE has no dense layers to mix in).",
        ("moe", "qk-norm"),
    ),
    FamilySpec(
        "cohere",
        "cohere",
        decoder(logit_scale=0.5, use_qk_norm=True),
        "Parallel attention + MLP sharing one LayerNorm without bias, interleaved rotary, "
        "per-head LayerNorm on q and k (Command-R+), logits scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "qk-norm", "logit-scale", "tied"),
    ),
    FamilySpec(
        "cohere2",
        "cohere2",
        decoder(
            num_hidden_layers=4,
            sliding_window=4,
            layer_types=[
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            logit_scale=0.5,
        ),
        "Parallel attention + MLP, three sliding layers (window 4, rotary) then one global layer "
        "without rotary, logits scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "sliding", "nope-global", "logit-scale", "tied"),
    ),
    FamilySpec(
        "granite",
        "granite",
        decoder(
            embedding_multiplier=4.0,
            residual_multiplier=0.5,
            attention_multiplier=0.05,
            logits_scaling=2.0,
        ),
        "Llama with Granite's four multipliers away from 1: embeddings ×4, each residual write "
        "×0.5, attention scores ×0.05 (instead of head_dim**-0.5), logits ÷2.",
        ("gqa", "gated-mlp", "multipliers"),
    ),
    FamilySpec(
        "granitemoe",
        "granitemoe",
        decoder(
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            embedding_multiplier=4.0,
            residual_multiplier=0.5,
            attention_multiplier=0.05,
            logits_scaling=2.0,
        ),
        "Every layer routed (4 experts of 64, top-2, fused expert weights) with Granite's "
        "multipliers away from 1 (GraniteMoE has no dense layers to mix in).",
        ("gqa", "moe", "multipliers"),
    ),
    FamilySpec(
        "stablelm",
        "stablelm",
        decoder(
            partial_rotary_factor=0.25,
            use_qkv_bias=True,
            qk_layernorm=False,
            use_parallel_residual=False,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
        "StableLM-2 layout: LayerNorm with bias, rotary on 25% of each head, q/k/v biases, "
        "sequential blocks, GQA.",
        ("gqa", "partial-rotary", "qkv-bias", "gated-mlp"),
    ),
    FamilySpec(
        "starcoder2",
        "starcoder2",
        decoder(
            sliding_window=4,
            use_bias=True,
            hidden_act="gelu_pytorch_tanh",
            residual_dropout=0.0,
            embedding_dropout=0.0,
            attention_dropout=0.0,
        ),
        "Sliding window 4 on every layer, GQA, LayerNorm with bias, biases on every "
        "projection, ungated c_fc/c_proj MLP, tied embeddings.",
        ("gqa", "sliding", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "deepseek_v3",
        "deepseek_v3",
        decoder(
            **DEEPSEEK_V3_MLA_MOE,
            # What transformers always does for V3, stated as the published config states it:
            # vLLM reads these two and otherwise routes with softmax and no correction bias.
            topk_method="noaux_tc",
            scoring_func="sigmoid",
        ),
        "Multi-head latent attention (q through a rank-32 bottleneck, kv through DeepSeek-V3's "
        "512-wide latent plus a 64-wide shared rope key, each with its own norm; q/k heads of "
        "32 nope + 64 rope = 96, v heads of 32); layer 0 dense (first_k_dense_replace), layers "
        "1-2 routed: 4 experts of 64 in 2 groups (1 group kept), top-2, sigmoid scores with a "
        "randomised correction bias, one shared expert.",
        ("mla", "moe", "dense-and-sparse", "shared-expert", "grouped-routing"),
    ),
    FamilySpec(
        "gpt_oss",
        "gpt_oss",
        decoder(
            head_dim=32,
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 150000.0,
                "factor": 4.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 32,
            },
        ),
        "Learned attention sinks per head (randomised with N(0,1)), alternating sliding "
        "(window 4) and global layers, q/k/v/o biases, every layer routed (4 experts of 64, "
        "top-2, clamped SwiGLU with biases), YaRN rotary scaled ×4 from 32 positions.",
        ("gqa", "sinks", "sliding", "moe", "yarn"),
    ),
    FamilySpec(
        "deepseek_v4",
        "deepseek_v4",
        decoder(
            # V4 maps intermediate_size onto moe_intermediate_size: it has no dense MLP width.
            intermediate_size=DROP,
            num_key_value_heads=1,
            head_dim=64,
            partial_rotary_factor=0.5,
            q_lora_rank=32,
            o_groups=2,
            o_lora_rank=32,
            hc_mult=4,
            hc_sinkhorn_iters=20,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            moe_intermediate_size=64,
            num_hidden_layers=3,
            layer_types=[
                "sliding_attention",
                "compressed_sparse_attention",
                "heavily_compressed_attention",
            ],
            mlp_layer_types=["hash_moe", "moe", "moe"],
            # Small rates so the 13-token test prompt compresses: 6 CSA entries (of which the
            # indexer keeps each query's top 4) and 3 HCA entries.
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            sliding_window=4,
            index_n_heads=2,
            index_head_dim=32,
            index_topk=4,
        ),
        "Manifold-constrained hyper-connections: a trunk of 4 residual streams mixed in and out "
        "of each layer (Sinkhorn-normalised), collapsed by a hyper head before the final norm. "
        "Shared-KV attention (one head read as key and value) with sinks, window 4, grouped "
        "low-rank output projection; layer 0 sliding-only, layer 1 compressed sparse attention "
        "(an entry per 2 tokens, indexer top-4), layer 2 heavily compressed attention (an entry "
        "per 4 tokens); layer 0 hash-routed (a randomised token→expert table), layers 1-2 top-2 "
        "routed, one shared expert.",
        (
            "hyper-connections",
            "mqa",
            "sinks",
            "sliding",
            "compressed-attention",
            "moe",
            "hash-routing",
        ),
    ),
)

FAMILIES: Mapping[str, FamilySpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            *_SPECS,
            *RECENT_SPECS,
            *SPECS_2026,
            *HYBRID_SPECS,
            *NEMOTRON_H_SPECS,
            *GEMMA3N_SPECS,
            *GEMMA4_SPECS,
        )
    }
)
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)

# Families the installed transformers cannot build or run on this CPU, with the exact error, and
# the substitute standing in for each. Empty: all 70 run with transformers 5.19 on torch 2.13 CPU.
UNAVAILABLE: Mapping[str, str] = MappingProxyType({})
