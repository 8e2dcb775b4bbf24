"""The tiny configs of the mixtures of experts: routed MLPs (4 experts, top-2) with dense layers
beside them where the family mixes them, latent (MLA) attention, sparse attention and routed
attention heads.

The same limits and aims as every test family (`interp_testmodels.configs` states them).
"""

from __future__ import annotations

from interp_testmodels.config_parts import (
    DEEPSEEK_V3_MLA_MOE,
    GRANITE_MULTIPLIERS,
    GROUPED_ROUTING,
    LOCAL_EXPERTS,
    MLA_DIRECT_QUERY,
    QWEN_MOE_DENSE_FIRST,
    SLIDING_THREE_TO_ONE,
    FamilySpec,
    decoder,
    experts,
    partial_rotary,
    tiny,
)

__all__ = ["MOE_SPECS"]

MOE_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "mixtral",
        decoder(intermediate_size=128, num_local_experts=4, num_experts_per_tok=2),
        "Every layer a routed mixture: 4 SwiGLU experts of width 128, top-2, softmax router "
        "(Mixtral has no dense layers to mix in).",
        ("gqa", "moe"),
    ),
    FamilySpec(
        "qwen2_moe",
        decoder(
            **QWEN_MOE_DENSE_FIRST,
            shared_expert_intermediate_size=128,
            norm_topk_prob=False,
        ),
        "Layer 0 dense (mlp_only_layers), layers 1-2 routed: 4 experts of 64, top-2 without "
        "renormalising, plus a sigmoid-gated shared expert of 128; q/k/v biases.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "qkv-bias"),
    ),
    FamilySpec(
        "qwen3_moe",
        decoder(**QWEN_MOE_DENSE_FIRST, head_dim=32, norm_topk_prob=True),
        "QK-norm; layer 0 dense (mlp_only_layers), layers 1-2 routed: 4 experts of 64, top-2 "
        "renormalised, no shared expert.",
        ("gqa", "moe", "dense-and-sparse", "qk-norm"),
    ),
    FamilySpec(
        "olmoe",
        decoder(
            num_key_value_heads=4,
            **experts(width="intermediate_size"),
            norm_topk_prob=False,
        ),
        "Every layer routed: 4 experts of 64, top-2 unnormalised; QK-norm over the full width; "
        "multi-head K/V as in OLMoE-1B-7B (OLMoE has no dense layers to mix in).",
        ("moe", "qk-norm"),
    ),
    FamilySpec(
        "granitemoe",
        decoder(**LOCAL_EXPERTS, **GRANITE_MULTIPLIERS),
        "Every layer routed (4 experts of 64, top-2, fused expert weights) with Granite's "
        "multipliers away from 1 (GraniteMoE has no dense layers to mix in).",
        ("gqa", "moe", "multipliers"),
    ),
    FamilySpec(
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
        decoder(
            head_dim=32,
            **LOCAL_EXPERTS,
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
        "phimoe",
        decoder(
            **LOCAL_EXPERTS,
            router_jitter_noise=0.0,
            input_jitter_noise=0.0,
            attention_bias=True,
            lm_head_bias=True,
        ),
        "Phi-3.5-MoE: every layer routed (4 experts of 64, top-2 by sparsemixer), LayerNorms "
        "with bias, q/k/v/o biases and an lm_head bias.",
        ("gqa", "moe", "sparsemixer", "qkv-bias"),
    ),
    FamilySpec(
        "ernie4_5_moe",
        decoder(
            num_hidden_layers=3,
            moe_intermediate_size=64,
            moe_k=2,
            moe_num_experts=4,
            moe_num_shared_experts=1,
            moe_layer_start_index=1,
            moe_layer_end_index=2,
            moe_layer_interval=1,
        ),
        "ERNIE-4.5 MoE: layer 0 dense, layers 1-2 routed (4 experts of 64, top-2, softmax scores "
        "with a selection-only correction bias) plus a shared expert.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "tied"),
    ),
    FamilySpec(
        "glm4_moe",
        decoder(
            num_hidden_layers=3,
            attention_bias=True,
            use_qk_norm=True,
            n_routed_experts=4,
            **GROUPED_ROUTING,
            first_k_dense_replace=1,
            rope_parameters=partial_rotary(0.5),
        ),
        "GLM-4.5: layer 0 dense, layers 1-2 routed (4 experts of 64 in 2 groups, top-2, sigmoid "
        "scores with a correction bias, scaled ×2.5) plus a shared expert; QK-norm, rotary on "
        "half of each head, q/k/v biases.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "grouped-routing", "qk-norm"),
    ),
    FamilySpec(
        "dots1",
        decoder(
            num_hidden_layers=3,
            n_routed_experts=4,
            **GROUPED_ROUTING,
            first_k_dense_replace=1,
            norm_topk_prob=True,
            sliding_window=None,
        ),
        "rednote dots.llm1: DeepSeek-V3's routing (sigmoid, correction bias, groups, shared "
        "expert, dense layer 0) on ordinary GQA attention with per-head QK-norm.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "grouped-routing", "qk-norm"),
    ),
    FamilySpec(
        "deepseek_v2",
        decoder(
            num_hidden_layers=3,
            num_key_value_heads=4,
            **MLA_DIRECT_QUERY,
            head_dim=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            moe_intermediate_size=64,
            first_k_dense_replace=1,
            topk_method="greedy",
            routed_scaling_factor=2.0,
        ),
        "DeepSeek-V2-Lite layout: multi-head latent attention with the query projected directly "
        "(no q low rank), kv through a 64-wide latent plus a 32-wide shared rope key; layer 0 "
        "dense, layers 1-2 routed (4 experts, greedy softmax top-2, scaled ×2) with a shared "
        "expert.",
        ("mla", "moe", "dense-and-sparse", "shared-expert"),
    ),
    FamilySpec(
        "hunyuan_v1_moe",
        decoder(
            head_dim=32,
            intermediate_size=64,
            num_experts=4,
            moe_topk=2,
        ),
        "Hunyuan MoE: every layer routed (4 experts of 64, top-2) plus a shared MLP, QK-norm "
        "after rotary.",
        ("gqa", "moe", "shared-expert", "qk-norm-after-rope"),
    ),
    FamilySpec(
        "cohere2_moe",
        decoder(
            **SLIDING_THREE_TO_ONE,
            head_dim=32,
            mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            **experts(width="intermediate_size"),
            logit_scale=0.5,
        ),
        "Command-A MoE: Cohere-2's parallel blocks (three sliding layers, then a global one "
        "without rotary) with routed MLPs (4 experts of 64, top-2) after a dense layer 0, logits "
        "scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "sliding", "nope-global", "moe", "dense-and-sparse", "logit-scale"),
    ),
    FamilySpec(
        "flex_olmo",
        decoder(**experts(width="intermediate_size")),
        "FlexOlmo: OLMo-2's post-sublayer norms and full-width QK-norm with every layer routed "
        "(4 experts of 64, top-2 unnormalised).",
        ("gqa", "post-norms-only", "qk-norm", "moe"),
    ),
    FamilySpec(
        "llama4",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            # Rotary on layers 0-2, none on layer 3 (every 4th layer in the published models).
            no_rope_layers=[1, 1, 1, 0],
            # The rotary layers attend within chunks of 4 tokens; the NoPE layer attends globally.
            attention_chunk_size=4,
            use_qk_norm=True,
            # The NoPE layer's query temperature grows every 4 positions (8192 published), so a
            # 13-token prompt sees three steps of it.
            attn_temperature_tuning=True,
            floor_scale=4,
            attn_scale=0.5,
            **LOCAL_EXPERTS,
            intermediate_size_mlp=256,
            interleave_moe_layer_step=2,
        ),
        "Text-only Llama-4 (Llama4ForCausalLM, model_type llama4_text): chunked attention "
        "(chunks of 4) with interleaved complex rotary and a weightless L2 QK-norm after it on "
        "layers 0-2, a global NoPE layer 3 with a position-dependent query temperature; dense "
        "MLPs (256) on layers 0 and 2, routed ones on 1 and 3 (4 experts of 64, top-2 by "
        "sigmoid of the top logits, scaling the expert inputs) plus a shared expert of 64.",
        (
            "gqa",
            "chunked",
            "nope-layers",
            "qk-norm-after-rope",
            "moe",
            "dense-and-sparse",
            "shared-expert",
            "query-temperature",
        ),
        model_type="llama4_text",
    ),
    FamilySpec(
        "dbrx",
        tiny(
            d_model=128,
            n_heads=4,
            n_layers=2,
            max_seq_len=128,
            # A clamp that bites on ~8% of the q/k/v entries (8 published); the attention
            # reads rope_theta here, as the published config states it.
            attn_config={"kv_n_heads": 2, "clip_qkv": 2.0, "rope_theta": 500000.0},
            ffn_config={
                "ffn_hidden_size": 64,
                "moe_num_experts": 4,
                "moe_top_k": 2,
                "moe_normalize_expert_weights": 1.0,
            },
        ),
        "Databricks DBRX: one fused Wqkv whose output is clamped to ±2 (clip_qkv), GQA, "
        "LayerNorms without bias nested with the attention in norm_attn_norm, every layer routed "
        "(4 experts of 64, top-2 of a softmax, renormalised to sum 1) with the experts' weights "
        "fused in three [experts·64, 128] matrices, untied.",
        ("gqa", "fused-qkv", "clip-qkv", "moe", "fused-experts"),
    ),
    FamilySpec(
        "jetmoe",
        tiny(
            hidden_size=128,
            num_hidden_layers=2,
            # Mixture of attention heads: each token's 2 routed experts bring 2 query heads each
            # over 2 shared K/V heads, so attention runs 4 heads of 32.
            num_key_value_heads=2,
            kv_channels=32,
            **LOCAL_EXPERTS,
            max_position_embeddings=128,
        ),
        "JetMoE: a mixture of attention heads (per token, the top-2 of 4 experts each project "
        "queries for 2 heads against shared K/V heads from one fused kv_proj, and project their "
        "heads' output back, weighted) and a mixture of MLP experts (top-2 of 4 of 64, softmax "
        "over the top-2 logits), both with an output bias; tied embeddings.",
        ("mixture-of-attention", "fused-kv", "moe", "tied"),
    ),
    FamilySpec(
        "deepseek_v32",
        decoder(
            **DEEPSEEK_V3_MLA_MOE,
            # The lightning indexer: 16 heads of 96 (64 rotated, 32 not) keep the 4 best-scoring
            # visible keys per query, so from the fifth token on each query attends to 4 of them.
            # A key scores exactly 0 when every head's ReLU is 0; with 2 heads that happens to
            # a quarter of the keys and top-k then breaks the ties by memory layout, so a padded
            # batch would pick other keys than the row alone. 16 heads make a tie ~2^-16.
            index_n_heads=16,
            index_head_dim=96,
            index_topk=4,
        ),
        "DeepSeek-V3.2: DeepSeek-V3's multi-head latent attention and routing (q through a "
        "rank-32 bottleneck, a 512-wide kv latent plus a 64-wide shared rope key; layer 0 dense, "
        "layers 1-2 routed: 4 experts of 64 in 2 groups, top-2, sigmoid scores with a correction "
        "bias, one shared expert) with DeepSeek Sparse Attention: a lightning indexer (16 heads) "
        "scores the visible keys and each query attends only to its top 4.",
        ("mla", "sparse-attention", "moe", "dense-and-sparse", "shared-expert", "grouped-routing"),
    ),
)
