"""The tiny Nemotron-H config (issue 19): one module per layer, each layer a single sublayer.

The same limits and aims as `interp_testmodels.configs` (whose docstring states them). Nemotron-H
differs from the other hybrid trunks in its block: each layer is ONE of a Mamba-2 mixer, softmax
attention, a dense MLP or a mixture of experts, behind one pre-norm and one residual add, so the
four kinds are all present here and the registry's per-layer answers (an attention layer has no
MLP, an MLP layer no mixer, no layer a resid_mid) are exercised. `configs` appends this after
`interp_testmodels.configs_hybrid`.
"""

from __future__ import annotations

from interp_testmodels.config_parts import DROP, FamilySpec, decoder

__all__ = ["NEMOTRON_H_SPECS"]

NEMOTRON_H_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "nemotron_h",
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
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            n_shared_experts=1,
            moe_shared_expert_intermediate_size=96,
            # Nemotron-3's latent MoE: the routed experts work in a 64-wide latent space.
            moe_latent_size=64,
            n_group=2,
            topk_group=1,
            routed_scaling_factor=2.5,
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
