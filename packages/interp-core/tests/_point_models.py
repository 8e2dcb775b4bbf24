"""Hand-built model facts for the registry and shape tests, one per architectural trait.

Small, distinct numbers on purpose: a width rule that reads the wrong fact (d_model instead of
n_heads*head_dim, n_heads instead of n_kv_heads) produces a different number and fails.
"""

from __future__ import annotations

from interp_core.facts import MLAFacts, ModelFacts, MoEFacts

LLAMA = ModelFacts(
    architecture="LlamaForCausalLM",
    model_type="llama",
    n_layers=4,
    d_model=64,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    d_mlp=172,
    vocab_size=1000,
)

# Explicit head_dim 32 with d_model 64: q_width 128 differs from d_model, kv_width 64.
QWEN3 = ModelFacts(
    architecture="Qwen3ForCausalLM",
    model_type="qwen3",
    n_layers=3,
    d_model=64,
    n_heads=4,
    n_kv_heads=2,
    head_dim=32,
    d_mlp=160,
    vocab_size=900,
    qk_norm=True,
)

# Layer 0 dense, layers 1-3 routed (DeepSeek-style dense prefix).
MOE_PREFIX = ModelFacts(
    architecture="MoePrefixForCausalLM",
    model_type="moe_prefix",
    n_layers=4,
    d_model=64,
    n_heads=4,
    n_kv_heads=4,
    head_dim=16,
    d_mlp=200,
    vocab_size=800,
    moe=MoEFacts(n_experts=8, experts_per_token=2, d_expert=48, sparse_layers=(1, 2, 3)),
)

ALL_SPARSE = ModelFacts(
    architecture="Qwen3MoeForCausalLM",
    model_type="qwen3_moe",
    n_layers=2,
    d_model=64,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    d_mlp=0,
    vocab_size=1000,
    qk_norm=True,
    moe=MoEFacts(n_experts=6, experts_per_token=3, d_expert=40, sparse_layers=(0, 1)),
)

# q/k heads are nope 16 + rope 8 = 24 wide, values 12: z is 4*12 = 48, q is 4*24 = 96.
MLA = ModelFacts(
    architecture="DeepseekV3ForCausalLM",
    model_type="deepseek_v3",
    n_layers=3,
    d_model=64,
    n_heads=4,
    n_kv_heads=4,
    head_dim=24,
    d_mlp=144,
    vocab_size=700,
    mla=MLAFacts(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12),
)

PARALLEL = ModelFacts(
    architecture="GPTNeoXForCausalLM",
    model_type="gpt_neox",
    n_layers=2,
    d_model=64,
    n_heads=4,
    n_kv_heads=4,
    head_dim=16,
    d_mlp=256,
    vocab_size=1000,
    parallel_attn_mlp=True,
    gated_mlp=False,
)

GPT2 = ModelFacts(
    architecture="GPT2LMHeadModel",
    model_type="gpt2",
    n_layers=2,
    d_model=48,
    n_heads=3,
    n_kv_heads=3,
    head_dim=16,
    d_mlp=192,
    vocab_size=500,
    gated_mlp=False,
    tied_embeddings=True,
)

# Qwen3-Next-like: three linear-attention layers, then one gated softmax-attention layer.
HYBRID = ModelFacts(
    architecture="Qwen3NextForCausalLM",
    model_type="qwen3_next",
    n_layers=4,
    d_model=64,
    n_heads=4,
    n_kv_heads=2,
    head_dim=32,
    d_mlp=128,
    vocab_size=1000,
    layer_kinds=("linear_attention", "linear_attention", "linear_attention", "full"),
    qk_norm=True,
    gated_attn_output=True,
)

MAMBA = ModelFacts(
    architecture="MambaForCausalLM",
    model_type="mamba",
    n_layers=2,
    d_model=64,
    n_heads=4,
    n_kv_heads=4,
    head_dim=16,
    d_mlp=128,
    vocab_size=1000,
    layer_kinds=("mamba", "mamba"),
)

HYPER = ModelFacts(
    architecture="DeepseekV4ForCausalLM",
    model_type="deepseek_v4",
    n_layers=3,
    d_model=64,
    n_heads=4,
    n_kv_heads=4,
    head_dim=16,
    d_mlp=96,
    vocab_size=1000,
    n_streams=4,
)

GEMMA2 = ModelFacts(
    architecture="Gemma2ForCausalLM",
    model_type="gemma2",
    n_layers=2,
    d_model=64,
    n_heads=4,
    n_kv_heads=2,
    head_dim=16,
    d_mlp=128,
    vocab_size=1000,
    layer_kinds=("sliding", "full"),
    sandwich_norms=True,
    embedding_multiplier=8.0,
    attn_logit_softcap=50.0,
    final_logit_softcap=30.0,
)

ALL_MODELS = {
    "llama": LLAMA,
    "qwen3": QWEN3,
    "moe_prefix": MOE_PREFIX,
    "all_sparse": ALL_SPARSE,
    "mla": MLA,
    "parallel": PARALLEL,
    "gpt2": GPT2,
    "hybrid": HYBRID,
    "mamba": MAMBA,
    "hyper": HYPER,
    "gemma2": GEMMA2,
}
