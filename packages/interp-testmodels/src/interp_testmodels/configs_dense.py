"""The tiny configs of the Llama-style dense decoders: one softmax attention and one dense MLP
per layer, each family's own twist (QK-norm, sandwich norms, windows, multipliers) switched on.

The same limits and aims as every test family (`interp_testmodels.configs` states them).
"""

from __future__ import annotations

from interp_testmodels.config_parts import (
    GEMMA2_ATTENTION,
    GRANITE_MULTIPLIERS,
    SLIDING_THREE_TO_ONE,
    FamilySpec,
    decoder,
    partial_rotary,
)

__all__ = ["DENSE_SPECS"]

DENSE_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "llama",
        decoder(),
        "The reference decoder: RMSNorm, rotary, GQA (2 K/V heads for 4), SwiGLU MLP, untied.",
        ("gqa", "gated-mlp"),
    ),
    FamilySpec(
        "mistral",
        decoder(sliding_window=4),
        "Llama with a 4-token sliding window on every layer.",
        ("gqa", "gated-mlp", "sliding"),
    ),
    FamilySpec(
        "qwen2",
        decoder(use_sliding_window=False),
        "Llama with biases on q/k/v (Qwen2 always has them) and none on o_proj.",
        ("gqa", "gated-mlp", "qkv-bias"),
    ),
    FamilySpec(
        "qwen3",
        decoder(head_dim=32, use_sliding_window=False),
        "Llama with per-head RMSNorm on q and k (QK-norm) and an explicit head_dim.",
        ("gqa", "gated-mlp", "qk-norm"),
    ),
    FamilySpec(
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
        decoder(**GEMMA2_ATTENTION),
        "Sandwich norms (pre and post around both sublayers), sliding window 4 on layer 0 and "
        "global on layer 1, attention scaled by 24**-0.5 rather than head_dim**-0.5, both "
        "softcaps set low enough (5 and 3) to bend these models' scores and logits.",
        ("gqa", "sandwich", "sliding", "softcap", "embed-scale", "zero-centred-norm", "tied"),
    ),
    FamilySpec(
        "gemma3",
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
        model_type="gemma3_text",
    ),
    FamilySpec(
        "phi3",
        decoder(sliding_window=6, resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0),
        "Fused qkv_proj (q|k|v with GQA) and fused gate_up_proj, sliding window 6 on every "
        "layer (Phi-3-mini states one too).",
        ("gqa", "fused-qkv", "fused-gate-up", "sliding"),
    ),
    FamilySpec(
        "olmo",
        decoder(clip_qkv=None),
        "LayerNorm without any parameters (nothing to perturb there), otherwise Llama-like with "
        "GQA; clip_qkv left off.",
        ("gqa", "parameter-free-norm", "gated-mlp"),
    ),
    FamilySpec(
        "olmo2",
        decoder(),
        "Norms only after each sublayer (no pre-norms), QK-norm over the whole q and k width "
        "(not per head).",
        ("gqa", "post-norms-only", "qk-norm", "gated-mlp"),
    ),
    FamilySpec(
        "cohere",
        decoder(logit_scale=0.5, use_qk_norm=True),
        "Parallel attention + MLP sharing one LayerNorm without bias, interleaved rotary, "
        "per-head LayerNorm on q and k (Command-R+), logits scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "qk-norm", "logit-scale", "tied"),
    ),
    FamilySpec(
        "cohere2",
        decoder(**SLIDING_THREE_TO_ONE, logit_scale=0.5),
        "Parallel attention + MLP, three sliding layers (window 4, rotary) then one global layer "
        "without rotary, logits scaled by 0.5, tied embeddings.",
        ("gqa", "parallel", "sliding", "nope-global", "logit-scale", "tied"),
    ),
    FamilySpec(
        "granite",
        decoder(**GRANITE_MULTIPLIERS),
        "Llama with Granite's four multipliers away from 1: embeddings ×4, each residual write "
        "×0.5, attention scores ×0.05 (instead of head_dim**-0.5), logits ÷2.",
        ("gqa", "gated-mlp", "multipliers"),
    ),
    FamilySpec(
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
        "smollm3",
        decoder(no_rope_layers=[1, 0], use_sliding_window=False),
        "SmolLM3 layout: Llama with rotary switched off on some layers (NoPE: here layer 1, "
        "every 4th in the published model), tied embeddings.",
        ("gqa", "gated-mlp", "nope-layers", "tied"),
    ),
    FamilySpec(
        "helium",
        decoder(head_dim=32),
        "Kyutai's Helium: a Llama-style decoder (GQA, SwiGLU, RMSNorm) with an explicit head "
        "width and untied embeddings.",
        ("gqa", "gated-mlp"),
    ),
    FamilySpec(
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
        decoder(head_dim=32, use_bias=True),
        "ERNIE-4.5 dense: Llama-style with interleaved rotary and biases on every linear layer "
        "(use_bias), tied embeddings.",
        ("gqa", "gated-mlp", "qkv-bias", "tied"),
    ),
    FamilySpec(
        "olmo3",
        decoder(**SLIDING_THREE_TO_ONE),
        "OLMo-3: OLMo-2's norms only after each sublayer and full-width QK-norm, plus three "
        "sliding layers (window 4) for each global one.",
        ("gqa", "post-norms-only", "qk-norm", "sliding", "gated-mlp"),
    ),
    FamilySpec(
        "exaone4",
        decoder(**SLIDING_THREE_TO_ONE),
        "EXAONE-4.0: norms only after each sublayer, per-head QK-norm, three sliding layers "
        "(window 4, rotary) then a global layer without rotary (NoPE).",
        ("gqa", "post-norms-only", "qk-norm", "sliding", "nope-global", "gated-mlp"),
    ),
    FamilySpec(
        "vaultgemma",
        decoder(**GEMMA2_ATTENTION, layer_types=["sliding_attention", "full_attention"]),
        "VaultGemma: Gemma-2's attention (sliding then global, scores scaled by 24**-0.5, both "
        "softcaps low) with only pre-norms (no sandwich), embedding scaled by sqrt(d), "
        "zero-centred norms, tied embeddings.",
        ("gqa", "sliding", "softcap", "embed-scale", "zero-centred-norm", "tied"),
    ),
    FamilySpec(
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
        decoder(
            head_dim=32,
            attention_bias=True,
            rope_parameters=partial_rotary(0.5),
        ),
        "GLM-4: sandwich norms under GLM's own names (post_self_attn_layernorm after attention, "
        "post_attention_layernorm before the MLP, post_mlp_layernorm after it), fused "
        "gate_up_proj, interleaved rotary on half of each head, q/k/v biases.",
        ("gqa", "sandwich", "fused-gate-up", "partial-rotary", "qkv-bias"),
    ),
    FamilySpec(
        "hunyuan_v1_dense",
        decoder(head_dim=32),
        "Hunyuan dense: per-head RMSNorm on q and k applied after rotary (query_layernorm, "
        "key_layernorm), otherwise Llama-like.",
        ("gqa", "gated-mlp", "qk-norm-after-rope"),
    ),
    FamilySpec(
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
        decoder(head_dim=32),
        "Arcee AFM: Llama attention with an ungated MLP (up_proj -> ReLU² -> down_proj).",
        ("gqa", "ungated-mlp", "relu2"),
    ),
    FamilySpec(
        "glm",
        decoder(head_dim=32, attention_bias=True),
        "GLM-4 (first release): fused gate_up_proj, interleaved rotary on half of each head, "
        "q/k/v biases, pre-norms only.",
        ("gqa", "fused-gate-up", "partial-rotary", "qkv-bias"),
    ),
    FamilySpec(
        "nemotron",
        decoder(
            # Half the usual spread: squared-ReLU neurons of INIT_RANGE grow the residual to
            # ~150, past what the suites' steering vectors (norm ~70) can move.
            initializer_range=0.05,
            rope_parameters=partial_rotary(0.5),
        ),
        "Nemotron-4 / Minitron: LayerNorm1P (LayerNorm with bias whose gain is stored minus 1), "
        "ungated MLP with squared ReLU, rotary on half of each head.",
        ("gqa", "ungated-mlp", "relu2", "zero-centred-norm", "partial-rotary"),
    ),
)
