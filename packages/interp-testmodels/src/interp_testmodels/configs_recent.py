"""The tiny configs of the architectures released since the first 32 families (2025 onwards).

The same limits and the same aims as `interp_testmodels.configs` (whose docstring states them):
residual width 128, 2-4 layers, head widths of 32 or more, windows shorter than the test prompt,
4 experts routing each token to 2 with dense layers beside them where the family mixes them, and
each family's distinctive trait switched on. `configs` appends these to its table, so
`FAMILY_NAMES` lists them after the first 32, in this order.
"""

from __future__ import annotations

from interp_testmodels.config_parts import DROP, FamilySpec, decoder

__all__ = ["RECENT_SPECS"]

RECENT_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "smollm3",
        "smollm3",
        decoder(no_rope_layers=[1, 0], use_sliding_window=False),
        "SmolLM3 layout: Llama with rotary switched off on some layers (NoPE: here layer 1, "
        "every 4th in the published model), tied embeddings.",
        ("gqa", "gated-mlp", "nope-layers", "tied"),
    ),
    FamilySpec(
        "helium",
        "helium",
        decoder(head_dim=32),
        "Kyutai's Helium: a Llama-style decoder (GQA, SwiGLU, RMSNorm) with an explicit head "
        "width and untied embeddings.",
        ("gqa", "gated-mlp"),
    ),
    FamilySpec(
        "seed_oss",
        "seed_oss",
        decoder(
            head_dim=32,
            attention_bias=True,
            attention_out_bias=False,
            attention_dropout=0.0,
            residual_dropout=0.0,
        ),
        "ByteDance Seed-OSS: Llama with biases on q/k/v and none on o_proj (as published), "
        "dropout zeroed.",
        ("gqa", "gated-mlp", "qkv-bias"),
    ),
    FamilySpec(
        "ministral3",
        "ministral3",
        decoder(
            head_dim=32,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                # Llama-4's position-dependent query temperature; the original window is 32
                # positions here, so a 13-token prompt sees it only through the log term.
                "llama_4_scaling_beta": 0.1,
            },
        ),
        "Ministral-3 text decoder: YaRN rotary scaled ×4 from 32 positions and Llama-4's "
        "position-dependent query temperature (llama_4_scaling_beta), GQA, untied.",
        ("gqa", "gated-mlp", "yarn", "query-temperature"),
    ),
    FamilySpec(
        "ernie4_5",
        "ernie4_5",
        decoder(head_dim=32, use_bias=True),
        "ERNIE-4.5 dense: Llama-style with interleaved rotary and biases on every linear layer "
        "(use_bias), tied embeddings.",
        ("gqa", "gated-mlp", "qkv-bias", "tied"),
    ),
    FamilySpec(
        "olmo3",
        "olmo3",
        decoder(
            num_hidden_layers=4,
            sliding_window=4,
            layer_types=[
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
        ),
        "OLMo-3: OLMo-2's norms only after each sublayer and full-width QK-norm, plus three "
        "sliding layers (window 4) for each global one.",
        ("gqa", "post-norms-only", "qk-norm", "sliding", "gated-mlp"),
    ),
    FamilySpec(
        "exaone4",
        "exaone4",
        decoder(
            num_hidden_layers=4,
            sliding_window=4,
            layer_types=[
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
        ),
        "EXAONE-4.0: norms only after each sublayer, per-head QK-norm, three sliding layers "
        "(window 4, rotary) then a global layer without rotary (NoPE).",
        ("gqa", "post-norms-only", "qk-norm", "sliding", "nope-global", "gated-mlp"),
    ),
    FamilySpec(
        "vaultgemma",
        "vaultgemma",
        decoder(
            head_dim=32,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention"],
            query_pre_attn_scalar=24,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
        ),
        "VaultGemma: Gemma-2's attention (sliding then global, scores scaled by 24**-0.5, both "
        "softcaps low) with only pre-norms (no sandwich), embedding scaled by sqrt(d), "
        "zero-centred norms, tied embeddings.",
        ("gqa", "sliding", "softcap", "embed-scale", "zero-centred-norm", "tied"),
    ),
    FamilySpec(
        "apertus",
        "apertus",
        decoder(
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 12000000.0,
                "factor": 8.0,
                "original_max_position_embeddings": 32,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
        ),
        "Swiss AI Apertus: an ungated MLP with the learned xIELU activation (up_proj -> xIELU -> "
        "down_proj), per-head QK-norm, its own norm names (attention_layernorm, "
        "feedforward_layernorm), Llama-3 rotary scaling.",
        ("gqa", "ungated-mlp", "xielu", "qk-norm"),
    ),
    FamilySpec(
        "glm4",
        "glm4",
        decoder(
            head_dim=32,
            attention_bias=True,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        ),
        "GLM-4: sandwich norms under GLM's own names (post_self_attn_layernorm after attention, "
        "post_attention_layernorm before the MLP, post_mlp_layernorm after it), fused "
        "gate_up_proj, interleaved rotary on half of each head, q/k/v biases.",
        ("gqa", "sandwich", "fused-gate-up", "partial-rotary", "qkv-bias"),
    ),
    FamilySpec(
        "hunyuan_v1_dense",
        "hunyuan_v1_dense",
        decoder(head_dim=32),
        "Hunyuan dense: per-head RMSNorm on q and k applied after rotary (query_layernorm, "
        "key_layernorm), otherwise Llama-like.",
        ("gqa", "gated-mlp", "qk-norm-after-rope"),
    ),
    FamilySpec(
        "phimoe",
        "phimoe",
        decoder(
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
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
        "glm4_moe",
        decoder(
            num_hidden_layers=3,
            attention_bias=True,
            use_qk_norm=True,
            moe_intermediate_size=64,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            n_group=2,
            topk_group=1,
            first_k_dense_replace=1,
            routed_scaling_factor=2.5,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        ),
        "GLM-4.5: layer 0 dense, layers 1-2 routed (4 experts of 64 in 2 groups, top-2, sigmoid "
        "scores with a correction bias, scaled ×2.5) plus a shared expert; QK-norm, rotary on "
        "half of each head, q/k/v biases.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "grouped-routing", "qk-norm"),
    ),
    FamilySpec(
        "dots1",
        "dots1",
        decoder(
            num_hidden_layers=3,
            moe_intermediate_size=64,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            n_group=2,
            topk_group=1,
            first_k_dense_replace=1,
            norm_topk_prob=True,
            routed_scaling_factor=2.5,
            sliding_window=None,
        ),
        "rednote dots.llm1: DeepSeek-V3's routing (sigmoid, correction bias, groups, shared "
        "expert, dense layer 0) on ordinary GQA attention with per-head QK-norm.",
        ("gqa", "moe", "dense-and-sparse", "shared-expert", "grouped-routing", "qk-norm"),
    ),
    FamilySpec(
        "deepseek_v2",
        "deepseek_v2",
        decoder(
            num_hidden_layers=3,
            num_key_value_heads=4,
            q_lora_rank=None,
            kv_lora_rank=64,
            qk_nope_head_dim=32,
            qk_rope_head_dim=32,
            v_head_dim=32,
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
        "cohere2_moe",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            sliding_window=4,
            layer_types=[
                "sliding_attention",
                "sliding_attention",
                "sliding_attention",
                "full_attention",
            ],
            mlp_layer_types=["dense", "sparse", "sparse", "sparse"],
            intermediate_size=64,
            num_experts=4,
            num_experts_per_tok=2,
            logit_scale=0.5,
        ),
        "Command-A MoE: Cohere-2's parallel blocks (three sliding layers, then a global one "
        "without rotary) with routed MLPs (4 experts of 64, top-2) after a dense layer 0, logits "
        "scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "sliding", "nope-global", "moe", "dense-and-sparse", "logit-scale"),
    ),
    FamilySpec(
        "qwen3_5",
        "qwen3_5_text",
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
            # 64 as on Qwen3-Next: vLLM's CPU gated-delta-net kernel refuses a width of 32.
            linear_key_head_dim=64,
            linear_value_head_dim=64,
            linear_conv_kernel_dim=4,
        ),
        "Text-only Qwen3.5 (Qwen3_5ForCausalLM, model_type qwen3_5_text): Qwen3-Next's hybrid "
        "trunk with dense MLPs - gated delta-net on layers 0 and 2, gated softmax attention "
        "(output gate, QK-norm, partial rotary 25%) on 1 and 3; the delta-net's q/k/v come from "
        "one fused projection. Norms store weight - 1.",
        ("gqa", "linear-attention", "gated-attn-output", "qk-norm", "gated-mlp"),
    ),
    FamilySpec(
        "qwen3_5_moe",
        "qwen3_5_moe_text",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            intermediate_size=DROP,
            layer_types=[
                "linear_attention",
                "full_attention",
                "linear_attention",
                "full_attention",
            ],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=64,
            linear_value_head_dim=64,
            linear_conv_kernel_dim=4,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            shared_expert_intermediate_size=64,
        ),
        "Text-only Qwen3.5-MoE: the Qwen3.5 hybrid trunk with every layer routed (4 experts of "
        "64, top-2, renormalised) plus a sigmoid-gated shared expert of 64.",
        ("gqa", "linear-attention", "gated-attn-output", "qk-norm", "moe", "shared-expert"),
    ),
    FamilySpec(
        "ministral",
        "ministral",
        decoder(
            num_hidden_layers=3,
            head_dim=32,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        ),
        "Ministral-8B: Llama with interleaved sliding (window 4) and global layers stated per "
        "layer, GQA, untied.",
        ("gqa", "gated-mlp", "sliding"),
    ),
    FamilySpec(
        "arcee",
        "arcee",
        decoder(head_dim=32),
        "Arcee AFM: Llama attention with an ungated MLP (up_proj -> ReLU² -> down_proj).",
        ("gqa", "ungated-mlp", "relu2"),
    ),
    FamilySpec(
        "glm",
        "glm",
        decoder(head_dim=32, attention_bias=True),
        "GLM-4 (first release): fused gate_up_proj, interleaved rotary on half of each head, "
        "q/k/v biases, pre-norms only.",
        ("gqa", "fused-gate-up", "partial-rotary", "qkv-bias"),
    ),
    FamilySpec(
        "flex_olmo",
        "flex_olmo",
        decoder(intermediate_size=64, num_experts=4, num_experts_per_tok=2),
        "FlexOlmo: OLMo-2's post-sublayer norms and full-width QK-norm with every layer routed "
        "(4 experts of 64, top-2 unnormalised).",
        ("gqa", "post-norms-only", "qk-norm", "moe"),
    ),
    FamilySpec(
        "nemotron",
        "nemotron",
        decoder(
            # Half the usual spread: squared-ReLU neurons of INIT_RANGE grow the residual to
            # ~150, past what the suites' steering vectors (norm ~70) can move.
            initializer_range=0.05,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        ),
        "Nemotron-4 / Minitron: LayerNorm1P (LayerNorm with bias whose gain is stored minus 1), "
        "ungated MLP with squared ReLU, rotary on half of each head.",
        ("gqa", "ungated-mlp", "relu2", "zero-centred-norm", "partial-rotary"),
    ),
    FamilySpec(
        "lfm2",
        "lfm2",
        decoder(
            num_hidden_layers=3,
            layer_types=["conv", "full_attention", "conv"],
            conv_L_cache=3,
            block_auto_adjust_ff_dim=True,
            block_ffn_dim_multiplier=1.0,
            block_multiple_of=32,
        ),
        "Liquid LFM2: a hybrid trunk of gated short convolutions (layers 0 and 2, kernel 3) and "
        "softmax attention with per-head QK-norm (layer 1); norms named operator_norm and "
        "ffn_norm, SwiGLU MLP (w1/w3/w2) whose width is derived from the stated one (2/3, "
        "rounded up to 32: 192), final norm named embedding_norm, tied embeddings.",
        ("gqa", "conv-mixer", "qk-norm", "gated-mlp", "tied"),
    ),
    FamilySpec(
        "bamba",
        "bamba",
        decoder(
            attn_layer_indices=[1],
            mamba_n_heads=4,
            mamba_d_head=64,
            mamba_n_groups=1,
            mamba_d_state=16,
            mamba_d_conv=4,
            mamba_chunk_size=8,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
            },
        ),
        "IBM Bamba: a Mamba-2 mixer on layer 0 and softmax attention (rotary on half of each "
        "head) on layer 1, a SwiGLU MLP after each; Mamba chunks of 8 so the 13-token prompt "
        "spans two.",
        ("gqa", "mamba", "partial-rotary", "gated-mlp"),
    ),
    FamilySpec(
        "jamba",
        "jamba",
        decoder(
            num_hidden_layers=4,
            attn_layer_period=2,
            attn_layer_offset=1,
            expert_layer_period=2,
            expert_layer_offset=0,
            num_experts=4,
            num_experts_per_tok=2,
            intermediate_size=64,
            mamba_d_state=16,
            mamba_d_conv=4,
            mamba_expand=2,
            mamba_dt_rank=8,
            use_mamba_kernels=False,
        ),
        "AI21 Jamba: Mamba mixers on layers 0 and 2, softmax attention without positions on 1 "
        "and 3; routed MLPs (4 experts of 64, top-2, a plain linear router) on the Mamba layers "
        "and dense ones on the attention layers, so each mixer meets each MLP kind.",
        ("gqa", "mamba", "nope", "moe", "dense-and-sparse"),
    ),
)
