"""The tiny configs of the hybrid recurrent trunks added for issue 19.

The same limits and aims as `interp_testmodels.configs` (whose docstring states them): residual
width 128, 2-4 layers, head widths of 32 or more, and each family's distinctive trait switched
on, here always with both of its layer kinds present so that the registry's per-layer answers
(which points a recurrent layer has, and why it lacks the rest) are exercised. `configs` appends
these after `interp_testmodels.configs_recent`, so `FAMILY_NAMES` lists them in this order.
"""

from __future__ import annotations

from interp_testmodels.config_parts import DEEPSEEK_V3_MLA_MOE, DROP, FamilySpec, decoder

__all__ = ["HYBRID_SPECS"]

HYBRID_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "granitemoehybrid",
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
            mamba_n_heads=4,
            mamba_d_head=64,
            mamba_n_groups=1,
            mamba_d_state=16,
            mamba_d_conv=4,
            mamba_chunk_size=8,
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
        "falcon_h1",
        decoder(
            mamba_d_ssm=256,
            mamba_n_heads=4,
            mamba_d_head=64,
            mamba_n_groups=1,
            mamba_d_state=16,
            mamba_d_conv=4,
            mamba_chunk_size=8,
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
        "deepseek_v32",
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
    FamilySpec(
        "kimi_linear",
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
            q_lora_rank=None,
            kv_lora_rank=64,
            qk_nope_head_dim=32,
            qk_rope_head_dim=32,
            v_head_dim=32,
            num_local_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=1,
            moe_intermediate_size=64,
            n_group=2,
            topk_group=1,
            routed_scaling_factor=2.5,
        ),
        "Moonshot Kimi Linear: Kimi Delta Attention (a gated delta rule with per-channel "
        "forgetting and short convolutions) on layers 0 and 2, multi-head latent attention on "
        "layer 1; layer 0 dense, layers 1-2 routed (4 experts of 64 in 2 groups, top-2, "
        "sigmoid scores with a correction bias, scaled ×2.5) plus a shared expert.",
        ("linear-attention", "mla", "moe", "dense-and-sparse", "shared-expert"),
    ),
)
