"""The tiny configs of the hybrid trunks: softmax attention beside recurrent, linear-attention,
Mamba-2 or convolution mixers, always with both kinds of layer present.

The same limits and aims as every test family (`interp_testmodels.configs` states them); having
every layer kind present exercises the registry's per-layer answers (which points a recurrent
layer has, and why it lacks the rest). Nemotron-H differs from the other hybrids in its block:
each layer is ONE of a Mamba-2 mixer, softmax attention, a dense MLP or a mixture of experts,
behind one pre-norm and one residual add.
"""

from __future__ import annotations

from interp_testmodels.config_parts import (
    DROP,
    EXPERTS,
    GATED_DELTA_NET,
    GROUPED_ROUTING,
    LOCAL_EXPERTS,
    MAMBA2,
    MLA_DIRECT_QUERY,
    FamilySpec,
    decoder,
    experts,
    partial_rotary,
)

__all__ = ["HYBRID_SPECS"]

HYBRID_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "qwen3_next",
        decoder(
            **GATED_DELTA_NET,
            **EXPERTS,
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
        "qwen3_5",
        decoder(**GATED_DELTA_NET),
        "Text-only Qwen3.5 (Qwen3_5ForCausalLM, model_type qwen3_5_text): Qwen3-Next's hybrid "
        "trunk with dense MLPs - gated delta-net on layers 0 and 2, gated softmax attention "
        "(output gate, QK-norm, partial rotary 25%) on 1 and 3; the delta-net's q/k/v come from "
        "one fused projection. Norms store weight - 1.",
        ("gqa", "linear-attention", "gated-attn-output", "qk-norm", "gated-mlp"),
        model_type="qwen3_5_text",
    ),
    FamilySpec(
        "qwen3_5_moe",
        decoder(
            **GATED_DELTA_NET,
            intermediate_size=DROP,
            **EXPERTS,
            shared_expert_intermediate_size=64,
        ),
        "Text-only Qwen3.5-MoE: the Qwen3.5 hybrid trunk with every layer routed (4 experts of "
        "64, top-2, renormalised) plus a sigmoid-gated shared expert of 64.",
        ("gqa", "linear-attention", "gated-attn-output", "qk-norm", "moe", "shared-expert"),
        model_type="qwen3_5_moe_text",
    ),
    FamilySpec(
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
        decoder(attn_layer_indices=[1], **MAMBA2, rope_parameters=partial_rotary(0.5)),
        "IBM Bamba: a Mamba-2 mixer on layer 0 and softmax attention (rotary on half of each "
        "head) on layer 1, a SwiGLU MLP after each; Mamba chunks of 8 so the 13-token prompt "
        "spans two.",
        ("gqa", "mamba", "partial-rotary", "gated-mlp"),
    ),
    FamilySpec(
        "jamba",
        decoder(
            num_hidden_layers=4,
            attn_layer_period=2,
            attn_layer_offset=1,
            expert_layer_period=2,
            expert_layer_offset=0,
            **experts(width="intermediate_size"),
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
    FamilySpec(
        "minimax",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            # Lightning (linear) attention on layers 0 and 2, softmax attention on 1 and 3 (the
            # published model: seven lightning layers to one softmax layer).
            layer_types=[
                "linear_attention",
                "full_attention",
                "linear_attention",
                "full_attention",
            ],
            # Blocks of 4 tokens (256 published), so a 13-token prompt crosses the intra/inter
            # block split three times.
            block_size=4,
            **LOCAL_EXPERTS,
            # The skip path carries the normed input times alpha, the sublayer's output times
            # beta (DeepNorm-style; the published alphas are 3.5566, the betas 1): distinct
            # values, so a swapped or missing factor shows.
            full_attn_alpha_factor=1.5,
            full_attn_beta_factor=0.75,
            linear_attn_alpha_factor=1.25,
            linear_attn_beta_factor=0.5,
            mlp_alpha_factor=1.75,
            mlp_beta_factor=0.625,
        ),
        "MiniMax-Text-01: lightning attention (linear attention with per-head exponential decay, "
        "computed in blocks of 4, a SiLU on the fused q/k/v, an RMSNorm over the heads and a "
        "sigmoid output gate) on layers 0 and 2, GQA softmax attention on 1 and 3; every layer "
        "routed (4 experts of 64, top-2 of a softmax, renormalised). Each sublayer replaces the "
        "residual with alpha times its normed input plus beta times its output, with alpha and "
        "beta per mixer kind and for the MLP.",
        ("gqa", "linear-attention", "moe", "scaled-normed-residual"),
    ),
    FamilySpec(
        "granitemoehybrid",
        decoder(
            layer_types=["linear_attention", "full_attention"],
            # The dense members (Granite-4.0-H-1B, -350M): no routed experts, the MLP is the
            # shared_mlp of `shared_intermediate_size`; `intermediate_size` is left to the class
            # default (11008) so that reading it for the MLP width would show.
            num_local_experts=0,
            intermediate_size=DROP,
            shared_intermediate_size=256,
            position_embedding_type="nope",
            embedding_multiplier=12.0,
            attention_multiplier=0.125,
            residual_multiplier=0.22,
            logits_scaling=4.0,
            **MAMBA2,
        ),
        "IBM Granite-4.0-H (dense members): a Mamba-2 mixer on layer 0 and softmax attention "
        "without positions (NoPE) on layer 1, each followed by a SwiGLU MLP with a fused "
        "input_linear ([gate | up]) named shared_mlp; Granite's four multipliers (embedding ×12, "
        "attention scale 0.125, residual writes ×0.22, logits ÷4). Mamba chunks of 8 so the "
        "13-token prompt spans two.",
        ("gqa", "mamba", "nope", "multipliers", "fused-gate-up", "gated-mlp"),
    ),
    FamilySpec(
        "falcon_h1",
        decoder(
            mamba_d_ssm=256,
            **MAMBA2,
            # The gated RMSNorm on the mixer output, gating first as the published checkpoints
            # state it (the class default normalises first).
            mamba_rms_norm=True,
            mamba_norm_before_gate=False,
            # Falcon-H1's µP multipliers, each away from 1 so that forgetting one shows.
            embedding_multiplier=5.0,
            lm_head_multiplier=0.25,
            mlp_multipliers=[0.9, 0.6],
            key_multiplier=0.5,
            attention_in_multiplier=0.8,
            attention_out_multiplier=0.7,
            ssm_in_multiplier=1.2,
            ssm_out_multiplier=0.5,
            ssm_multipliers=[1.0, 0.9, 1.1, 0.8, 1.2],
        ),
        "TII Falcon-H1: every layer runs a Mamba-2 mixer (gated RMSNorm, chunks of 8 so the "
        "13-token prompt spans two) and GQA softmax attention side by side on the same normed "
        "input and adds both to the residual, then a SwiGLU MLP; µP multipliers everywhere: "
        "embeddings ×5, logits ×0.25, keys ×0.5, attention in ×0.8 / out ×0.7, SSM in ×1.2 / "
        "out ×0.5 and per-section on its input projection, MLP gate ×0.9 and output ×0.6.",
        ("gqa", "mamba", "parallel-mixers", "multipliers", "gated-mlp"),
    ),
    FamilySpec(
        "kimi_linear",
        decoder(
            num_hidden_layers=3,
            num_key_value_heads=4,
            # Spelled as the published config spells it (vLLM reads these lists): Kimi Delta
            # Attention on layers 1 and 3 counted from 1 (0 and 2), 4 heads of 32; MLA on 2.
            linear_attn_config={
                "head_dim": 32,
                "num_heads": 4,
                "short_conv_kernel_size": 4,
                "kda_layers": [1, 3],
                "full_attn_layers": [2],
            },
            first_k_dense_replace=1,
            # MLA on layer 1, the query projected directly as on the published model.
            **MLA_DIRECT_QUERY,
            num_local_experts=4,
            **GROUPED_ROUTING,
        ),
        "Moonshot Kimi Linear: Kimi Delta Attention (a gated delta rule with per-channel "
        "forgetting and short convolutions) on layers 0 and 2, multi-head latent attention on "
        "layer 1; layer 0 dense, layers 1-2 routed (4 experts of 64 in 2 groups, top-2, "
        "sigmoid scores with a correction bias, scaled ×2.5) plus a shared expert.",
        ("linear-attention", "mla", "moe", "dense-and-sparse", "shared-expert"),
    ),
    FamilySpec(
        "nemotron_h",
        decoder(
            # The count is the block list's length (the class has no `num_hidden_layers` field);
            # published configs spell the list as `hybrid_override_pattern` "M*-E", which the
            # class accepts only as a legacy keyword, so the list is stated here.
            num_hidden_layers=DROP,
            layers_block_type=["linear_attention", "full_attention", "mlp", "moe"],
            head_dim=32,
            mamba_num_heads=4,
            mamba_head_dim=32,
            n_groups=1,
            ssm_state_size=16,
            conv_kernel=4,
            chunk_size=8,
            use_conv_bias=True,
            # No Mamba-2 projection biases (`use_bias`), as on the published models: HF zeroes
            # padded positions before in_proj, so a bias there feeds them into the convolution
            # under left padding (measured: HF's own logits then move by 0.3).
            use_bias=False,
            mlp_bias=True,
            mlp_hidden_act="relu2",
            n_routed_experts=4,
            **GROUPED_ROUTING,
            moe_shared_expert_intermediate_size=96,
            # Nemotron-3's latent MoE: the routed experts work in a 64-wide latent space.
            moe_latent_size=64,
            tie_word_embeddings=False,
        ),
        "NVIDIA Nemotron-H: every layer is one sublayer behind one RMSNorm and one residual add "
        "(pattern M*-E): a Mamba-2 mixer (chunks of 8 so the 13-token prompt spans two) on "
        "layer 0, softmax attention without positions (NoPE) on layer 1, a plain squared-ReLU "
        "MLP on layer 2, and on layer 3 a latent mixture of experts (4 experts of 64 in a "
        "64-wide latent, 2 groups, top-2, sigmoid scores with a correction bias, ×2.5) plus a "
        "shared squared-ReLU expert; biases on the MLPs and the experts' latent projections "
        "(the Mamba-2 projections have none, as published).",
        ("gqa", "mamba", "nope", "single-sublayer", "moe", "shared-expert", "ungated-mlp"),
    ),
)
