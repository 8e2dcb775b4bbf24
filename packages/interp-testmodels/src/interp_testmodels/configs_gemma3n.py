"""The tiny config of Gemma-3n's text model (issue 19), every trait of its trunk switched on.

The same limits as `interp_testmodels.configs` (residual width 128, head width 32, a 4-token
window shorter than the test prompt). Gemma-3n differs from Gemma-3 in five ways, all on here:
AltUp (the trunk carries 4 residual streams, each layer predicts all of them, runs attention
and MLP on the active one and corrects the rest), LAuReL (a rank-16 branch beside attention,
summed with it and scaled by 1/sqrt(2)), per-layer inputs (a per-layer embedding gated into
streams 1-3 after each block), KV sharing (layers 2 and 3 reuse the keys and values of layers 0
and 1, the last earlier layer of their own kind) and gaussian top-k activation sparsity (layers
0 and 1). `configs` appends `GEMMA3N_SPECS` after the others.
"""

from __future__ import annotations

from interp_testmodels.config_parts import FamilySpec, decoder
from interp_testmodels.tokenizer import TOKENIZER_VOCAB_SIZE

__all__ = ["GEMMA3N_SPECS"]

GEMMA3N_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "gemma3n",
        "gemma3n_text",
        decoder(
            num_hidden_layers=4,
            head_dim=32,
            # Stated per layer, as the published configs do.
            intermediate_size=[256, 256, 256, 256],
            sliding_window=4,
            layer_types=[
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
            ],
            hidden_activation="gelu_pytorch_tanh",
            num_kv_shared_layers=2,
            # The published 0.95 on the first layers: about 13 of 256 gate units survive.
            activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0],
            altup_num_inputs=4,
            altup_active_idx=0,
            laurel_rank=16,
            hidden_size_per_layer_input=32,
            vocab_size_per_layer_input=TOKENIZER_VOCAB_SIZE,
            final_logit_softcapping=30.0,
        ),
        "Gemma-3n text (Gemma3nForCausalLM): AltUp with 4 residual streams (predict, attention "
        "and MLP on stream 0, correct), LAuReL rank 16 beside attention, per-layer inputs of "
        "width 32, layers 2-3 reusing the keys and values of layers 0-1, gaussian top-k "
        "activation sparsity 0.95 on layers 0-1, sliding (window 4) and full layers alternating, "
        "QK-norm and a scale-free value norm, sandwich norms, streams averaged through unembed "
        "projections before the final norm, final-logit softcap 30.",
        (
            "gqa",
            "sandwich",
            "sliding",
            "qk-norm",
            "embed-scale",
            "tied",
            "altup",
            "laurel",
            "per-layer-inputs",
            "kv-sharing",
            "activation-sparsity",
        ),
    ),
)
