"""The tiny configs of the families added in 2026 (issue #19's second batch).

The same limits and the same aims as `interp_testmodels.configs` (whose docstring states them):
residual width 128, 2-4 layers, head widths of 32 or more, windows and chunks shorter than the
test prompt, 4 experts routing each token to 2 with dense layers beside them where the family
mixes them, and each family's distinctive trait switched on. `configs` appends these after
`configs_recent.RECENT_SPECS`, so `FAMILY_NAMES` lists them last, in this order.
"""

from __future__ import annotations

from interp_testmodels.config_parts import IDS, INIT_RANGE, FamilySpec, decoder
from interp_testmodels.tokenizer import TOKENIZER_VOCAB_SIZE

__all__ = ["SPECS_2026"]

SPECS_2026: tuple[FamilySpec, ...] = (
    FamilySpec(
        "llama4",
        "llama4_text",
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
            intermediate_size=64,
            intermediate_size_mlp=256,
            num_local_experts=4,
            num_experts_per_tok=2,
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
    ),
    FamilySpec(
        "dbrx",
        "dbrx",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "d_model": 128,
            "n_heads": 4,
            "n_layers": 2,
            "max_seq_len": 128,
            "initializer_range": INIT_RANGE,
            # A clamp that bites on ~8% of the q/k/v entries (8 published); the attention
            # reads rope_theta here, as the published config states it.
            "attn_config": {"kv_n_heads": 2, "clip_qkv": 2.0, "rope_theta": 500000.0},
            "ffn_config": {
                "ffn_hidden_size": 64,
                "moe_num_experts": 4,
                "moe_top_k": 2,
                "moe_normalize_expert_weights": 1.0,
            },
            **IDS,
        },
        "Databricks DBRX: one fused Wqkv whose output is clamped to ±2 (clip_qkv), GQA, "
        "LayerNorms without bias nested with the attention in norm_attn_norm, every layer routed "
        "(4 experts of 64, top-2 of a softmax, renormalised to sum 1) with the experts' weights "
        "fused in three [experts·64, 128] matrices, untied.",
        ("gqa", "fused-qkv", "clip-qkv", "moe", "fused-experts"),
    ),
    FamilySpec(
        "jetmoe",
        "jetmoe",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "hidden_size": 128,
            "num_hidden_layers": 2,
            # Mixture of attention heads: each token's 2 routed experts bring 2 query heads each
            # over 2 shared K/V heads, so attention runs 4 heads of 32.
            "num_key_value_heads": 2,
            "kv_channels": 32,
            "intermediate_size": 64,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 128,
            "initializer_range": INIT_RANGE,
            **IDS,
        },
        "JetMoE: a mixture of attention heads (per token, the top-2 of 4 experts each project "
        "queries for 2 heads against shared K/V heads from one fused kv_proj, and project their "
        "heads' output back, weighted) and a mixture of MLP experts (top-2 of 4 of 64, softmax "
        "over the top-2 logits), both with an output bias; tied embeddings.",
        ("mixture-of-attention", "fused-kv", "moe", "tied"),
    ),
    FamilySpec(
        "minimax",
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
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
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
)
