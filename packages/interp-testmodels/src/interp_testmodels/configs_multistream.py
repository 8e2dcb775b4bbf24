"""The tiny configs of the trunks with more than one residual stream or widths that vary by
layer: DeepSeek-V4 (hyper-connections, compressed attention), Gemma-3n (AltUp, LAuReL, KV
sharing, per-layer inputs) and Gemma-4 (per-layer head widths, KV sharing, per-layer inputs,
experts beside the dense MLP), every trait switched on at once.

The same limits and aims as every test family (`interp_testmodels.configs` states them).
Gemma-3n differs from Gemma-3 in five ways, all on here: AltUp (the trunk carries 4 residual
streams, each layer predicts all of them, runs attention and MLP on the active one and corrects
the rest), LAuReL (a rank-16 branch beside attention, summed with it and scaled by 1/sqrt(2)),
per-layer inputs (a per-layer embedding gated into streams 1-3 after each block), KV sharing
(layers 2 and 3 reuse the keys and values of layers 0 and 1) and gaussian top-k activation
sparsity (layers 0 and 1). Gemma-4's sliding and full layers have different head widths and K/V
head counts, keys double as values on the full layers, and a doubled MLP sits on the sharing
layers.
"""

from __future__ import annotations

from interp_testmodels.config_parts import DROP, GEMMA_KV_SHARING, FamilySpec, decoder
from interp_testmodels.tokenizer import TOKENIZER_VOCAB_SIZE

__all__ = ["MULTISTREAM_SPECS"]

MULTISTREAM_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
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
    FamilySpec(
        "gemma3n",
        decoder(
            **GEMMA_KV_SHARING,
            # Stated per layer, as the published configs do.
            intermediate_size=[256, 256, 256, 256],
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
        model_type="gemma3n_text",
    ),
    FamilySpec(
        "gemma4",
        decoder(
            # Sliding layers: 4 query heads over 2 K/V heads of 32; full layers: heads of 64
            # (global_head_dim; 512 against 256 published) over 1 K/V head, whose key
            # projection doubles as the value projection (attention_k_eq_v).
            **GEMMA_KV_SHARING,
            global_head_dim=64,
            num_global_key_value_heads=1,
            attention_k_eq_v=True,
            # The K/V-sharing layers 2 and 3 have MLPs twice as wide.
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
        model_type="gemma4_text",
    ),
)
