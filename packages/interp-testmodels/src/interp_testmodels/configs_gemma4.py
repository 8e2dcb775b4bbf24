"""The tiny config of the text-only Gemma-4 (`gemma4_text`, `Gemma4ForCausalLM`).

The same limits and aims as `interp_testmodels.configs` (whose docstring states them). Every
trait the text model has is switched on at once, so each point meets each of them: sliding and
full layers of different head widths and K/V head counts, keys reused as values on the full
layers, a weightless value norm, late layers that reuse an earlier layer's keys and values,
per-layer inputs gated into the residual, routed experts beside the dense MLP, a doubled MLP on
the sharing layers, and the final-logit softcap. `configs` appends this spec after the others.
"""

from __future__ import annotations

from interp_testmodels.config_parts import FamilySpec, decoder

__all__ = ["GEMMA4_SPECS"]

GEMMA4_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "gemma4",
        "gemma4_text",
        decoder(
            num_hidden_layers=4,
            # Sliding layers: 4 query heads over 2 K/V heads of 32; full layers: heads of 64
            # (global_head_dim; 512 against 256 published) over 1 K/V head, whose key
            # projection doubles as the value projection (attention_k_eq_v).
            head_dim=32,
            global_head_dim=64,
            num_global_key_value_heads=1,
            attention_k_eq_v=True,
            layer_types=[
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
            ],
            sliding_window=4,
            # Layers 2 and 3 compute no keys or values: they reuse those of the last earlier
            # layer of their kind (layers 0 and 1), and their MLPs are twice as wide.
            num_kv_shared_layers=2,
            use_double_wide_mlp=True,
            intermediate_size=64,
            # Per-layer inputs: a 16-wide slice of a per-token table plus a projection of the
            # embedding, gated by each layer's output and added back.
            hidden_size_per_layer_input=16,
            vocab_size_per_layer_input=1000,
            # Routed experts beside the dense MLP in every layer (4 of 32, top-2).
            enable_moe_block=True,
            num_experts=4,
            top_k_experts=2,
            moe_intermediate_size=32,
            final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
        ),
        "Text-only Gemma-4 (Gemma4ForCausalLM): sandwich norms, QK-norm and a weightless value "
        "norm, scale 1; sliding layers (window 4, heads of 32, 2 K/V heads) and full layers "
        "(heads of 64, 1 K/V head whose key projection is also the value projection, "
        "proportional rotary on a quarter of each head); layers 2-3 reuse layers 0-1's keys and "
        "values and have MLPs of twice the width; per-layer inputs gated into the residual "
        "after the MLP; routed experts (4 of 32, top-2) beside the dense MLP, each with its own "
        "norms; a learned per-layer scalar on the block output; final-logit softcap 3.",
        (
            "gqa",
            "sandwich",
            "sliding",
            "qk-norm",
            "v-norm",
            "per-layer-head-width",
            "k-eq-v",
            "kv-shared-layers",
            "per-layer-inputs",
            "moe",
            "dense-beside-experts",
            "layer-scalar",
            "softcap",
            "embed-scale",
            "tied",
        ),
    ),
)
