"""The tiny configs of the GPT-2-era dense decoders: biases everywhere, LayerNorms, learned or
ALiBi positions, fused or parallel attention.

The same limits and aims as every test family (`interp_testmodels.configs` states them); these
are the families whose layout predates Llama's: GPT-2, GPT-NeoX, GPT-J, GPT-BigCode, OPT, BLOOM,
Falcon, Phi and Starcoder2.
"""

from __future__ import annotations

from interp_testmodels.config_parts import (
    DROP,
    IDS,
    INIT_RANGE,
    FamilySpec,
    decoder,
    gpt,
    partial_rotary,
    tiny,
)
from interp_testmodels.tokenizer import TOKENIZER_VOCAB_SIZE

__all__ = ["GPT_SPECS"]

GPT_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec(
        "gpt2",
        gpt(),
        "LayerNorm with bias, learned absolute positions, fused c_attn (q|k|v) in Conv1D layout, "
        "ungated GELU MLP of 4·d (n_inner left null), tied embeddings.",
        ("learned-positions", "fused-qkv", "conv1d", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "gpt_neox",
        decoder(
            num_key_value_heads=DROP,
            rope_parameters=partial_rotary(0.25),
            use_parallel_residual=True,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
        "Pythia layout: parallel attention + MLP, rotary on 25% of each head, fused "
        "query_key_value interleaved per head, biases everywhere, untied.",
        ("parallel", "partial-rotary", "fused-qkv", "ungated-mlp"),
    ),
    FamilySpec(
        "gptj",
        gpt(rotary_dim=16),
        "Parallel attention + MLP sharing one LayerNorm, interleaved rotary on 16 of 32 dims, "
        "separate q/k/v without bias, MLP of 4·d, untied lm_head with bias.",
        ("parallel", "partial-rotary", "ungated-mlp"),
    ),
    FamilySpec(
        "gpt_bigcode",
        gpt(multi_query=True),
        "Multi-query attention (one K/V head) with a fused c_attn of width d + 2·head_dim, "
        "learned positions, tied embeddings.",
        ("mqa", "learned-positions", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "opt",
        {
            "vocab_size": TOKENIZER_VOCAB_SIZE,
            "hidden_size": 128,
            "ffn_dim": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "max_position_embeddings": 128,
            "word_embed_proj_dim": 128,
            "do_layer_norm_before": True,
            "dropout": 0.0,
            "init_std": INIT_RANGE,
            **IDS,
        },
        "OPT-125m layout: pre-LayerNorm, learned positions offset by 2, ReLU MLP (fc1/fc2), "
        "biases on every projection, tied embeddings.",
        ("learned-positions", "ungated-mlp", "relu", "tied"),
    ),
    FamilySpec(
        "bloom",
        tiny(hidden_size=128, n_layer=2, n_head=4),
        "ALiBi position bias (no rotary, no position embeddings), a LayerNorm right after the "
        "embedding, fused query_key_value interleaved per head, MLP of 4·d, tied embeddings.",
        ("alibi", "embedding-norm", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "falcon",
        tiny(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_kv_heads=2,
            new_decoder_architecture=True,
            parallel_attn=True,
            bias=True,
            alibi=False,
            max_position_embeddings=128,
        ),
        "Falcon-40B decoder (new_decoder_architecture): parallel attention + MLP with two "
        "LayerNorms (ln_attn, ln_mlp), grouped K/V (2 of 4 heads) in a fused query_key_value, "
        "rotary, biases on, MLP of 4·d, tied embeddings.",
        ("parallel", "gqa", "fused-qkv", "ungated-mlp", "tied"),
    ),
    FamilySpec(
        "phi",
        decoder(
            num_key_value_heads=DROP,
            partial_rotary_factor=0.5,
            hidden_act="gelu_new",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attention_dropout=0.0,
        ),
        "Phi-2 layout: parallel attention + MLP sharing one LayerNorm, rotary on 50% of each "
        "head, biases on every projection, ungated fc1/fc2 MLP, lm_head with bias.",
        ("parallel", "partial-rotary", "ungated-mlp"),
    ),
    FamilySpec(
        "starcoder2",
        decoder(
            sliding_window=4,
            use_bias=True,
            hidden_act="gelu_pytorch_tanh",
            residual_dropout=0.0,
            embedding_dropout=0.0,
            attention_dropout=0.0,
        ),
        "Sliding window 4 on every layer, GQA, LayerNorm with bias, biases on every "
        "projection, ungated c_fc/c_proj MLP, tied embeddings.",
        ("gqa", "sliding", "ungated-mlp", "tied"),
    ),
)
