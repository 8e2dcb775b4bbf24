"""Where each family keeps each part: the HF-hooks reference's hand-written module layouts.

The eager backend finds its modules by attribute-name vocabularies; the HF-hooks reference
(`interp_validator.references.hf_hooks`) must not, or it would check the backend against itself.
So every family's layout is written out here by hand, as attribute paths on the HF model, and a
layout that does not fit the model it is applied to is a `LayoutMismatch`, never a guess.
`layout_key(model_type)` names the layout a transformers `model_type` uses.

Plain data: no torch, no transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["LAYOUTS", "Layout", "LayoutMismatch", "attention_chunk", "layout_key", "sliding_window"]


class LayoutMismatch(RuntimeError):
    """A hand-written layout does not fit the model it is applied to (a wrong module name)."""


@dataclass(frozen=True)
class Layout:
    """Where one family keeps each part, as attribute paths (relative to the block unless noted)."""

    blocks: str  # from the root: the ModuleList of decoder blocks
    embed: str  # from the root
    final_norm: str  # from the root
    mixer: str = "self_attn"  # relative to the block, like the norms; may be dotted (DBRX)
    linear_mixer: str | None = None  # hybrid trunks: the linear-attention module's name
    # Hybrid trunks whose linear mixer has the softmax mixer's name (MiniMax, Kimi Linear): the
    # config's `layer_types` names that mark a layer's `mixer` as linear attention.
    linear_layer_types: tuple[str, ...] = ()
    # DeepSeek-V4: the `layer_types` names whose softmax attention reads compressed entries after
    # the window's tokens, so its probabilities have no key-per-token axis (no scores/probs).
    compressed_layer_types: tuple[str, ...] = ()
    q_proj: str | None = "q_proj"  # relative to the mixer, like the next five
    k_proj: str | None = "k_proj"
    v_proj: str | None = "v_proj"
    qkv_proj: str | None = None
    qkv_layout: str | None = None  # "thirds" | "per_head" | "per_kv_group"
    kv_proj: str | None = None  # a fused [keys | values] projection (JetMoE)
    o_proj: str | None = "o_proj"  # None: routed output projections, no z (JetMoE)
    # JetMoE: the heads are routed experts' heads (no fixed head to read scores, probs or z of).
    routed_heads: bool = False
    qk_norm: str | None = None  # "per_head" (norm over head_dim) | "full" (over the whole width)
    q_norm: str = "q_norm"  # the QK-norm modules' names, relative to the mixer
    k_norm: str = "k_norm"
    # A norm on the values after their projection, relative to the mixer (Gemma-3n's and -4's
    # weightless v_norm): the value point is its output. Layers that reuse another's K/V have
    # none.
    v_norm: str | None = None
    # Gemma-3n, -4: a layer may lack k_proj and v_proj (KV sharing); Gemma-4 v_proj alone (keys
    # as values). On every other layout a missing projection is a wrong layout and fails loudly.
    optional_kv_proj: bool = False
    gated_query: bool = False  # Qwen3-Next: q_proj emits [query | gate] per head
    # DBRX: the fused projection's output is clamped (clip_qkv), so no tensor is the value point.
    clip_qkv: bool = False
    attn_adds_residual: bool = False  # BLOOM: the mixer returns residual + o_proj output
    pre_attn_norm: str | None = "input_layernorm"
    pre_mlp_norm: str | None = "post_attention_layernorm"
    post_attn_norm: str | None = None
    post_mlp_norm: str | None = None
    # Parallel blocks: the block's own summation order over "resid", "attn" and "mlp".
    parallel: tuple[str, ...] | None = None
    mlp: str = "mlp"  # "" when the block inlines its MLP (OPT)
    mlp_adds_residual: bool = False  # BLOOM
    pre_proj: str | None = "gate_proj"  # relative to the MLP: the branch the activation reads
    linear_proj: str | None = "up_proj"  # gated MLPs: the linear branch
    gate_up_proj: str | None = None  # fused [gate | up] (Phi-3)
    down_proj: str = "down_proj"
    # The activation module, an attribute of the MLP (of the block for OPT); "F.<name>" where the
    # MLP calls torch.nn.functional.<name> instead of holding a module (LFM2).
    act: str = "act_fn"
    router: str = "gate"  # relative to the MLP of a sparse layer
    # Gemma-4: the router and experts sit on the block beside a dense MLP (`mlp`); the router
    # returns (probabilities, weights, indices) and its logits are its `proj` output.
    block_router: bool = False
    router_fields: tuple[int, int, int] = (0, 1, 2)  # logits, weights, indices in its output
    # "softmax-top-k": the router is a bare linear layer returning logits only (Jamba); the
    # reference ranks them itself (float32 softmax, top-k, weights cast back, no renormalising).
    # "sigmoid-top-k": the router returns (dense scores, logits) (Llama-4); the reference takes
    # the top-k logits and their float32 sigmoid. "softmax-top-k-pnorm": a bare logits router
    # (DBRX) whose softmax top-k weights are divided by their p-norm (ffn_config's
    # moe_normalize_expert_weights). "top-k-softmax" (JetMoE): the router's logits come last in
    # its output; the top-k logits, softmaxed among themselves, weigh the experts.
    router_rule: str | None = None
    streams: bool = False  # DeepSeek-V4's hyper-connection trunk
    # MiniMax: each sublayer leaves alpha*norm(x) + beta*out, so there is no resid_mid and no
    # *_out_post (nothing is added to a residual).
    normed_skip: bool = False
    # Falcon-H1: a Mamba-2 mixer (this attribute of the block) beside the attention, the two
    # outputs scaled and summed inside the block; the attention reads its normed input times
    # attention_in_multiplier, so attn_in is the attention module's own input.
    ssm_beside: str | None = None
    # Nemotron-H: each block is ONE sublayer, the module `mixer` names, behind the one norm that
    # both pre_attn_norm and pre_mlp_norm name; the config's `layers_block_type` says whether it
    # is a mixer (Mamba-2 or attention), the MLP (`mlp`) or the experts (`moe`).
    single_block: bool = False
    # Gemma-3n: a stack of AltUp streams [n, b, s, d] between blocks, LAuReL beside attention
    # (no resid_mid, no *_out_post), the config's last num_kv_shared_layers layers without k/v
    # projections, and gaussian top-k on the gate of layers with activation sparsity (no mlp_pre).
    altup: bool = False


_LLAMA = Layout(blocks="model.layers", embed="model.embed_tokens", final_norm="model.norm")
_SANDWICH = replace(
    _LLAMA,
    post_attn_norm="post_attention_layernorm",
    pre_mlp_norm="pre_feedforward_layernorm",
    post_mlp_norm="post_feedforward_layernorm",
)

# Fields that several families set alike, named once so that each layout below says only how it
# differs from them.
_NO_QKV = dict(q_proj=None, k_proj=None, v_proj=None)  # fused or low-rank (MLA) projections
# The BLOOM/NeoX/Falcon names: a fused query_key_value, dense out, and a dense_h_to_4h MLP.
_QUERY_KEY_VALUE = dict(
    _NO_QKV,
    qkv_proj="query_key_value",
    o_proj="dense",
    pre_proj="dense_h_to_4h",
    linear_proj=None,
    down_proj="dense_4h_to_h",
)
_BLOOM_ROOT = dict(
    blocks="transformer.h",
    embed="transformer.word_embeddings",
    final_norm="transformer.ln_f",
    mixer="self_attention",
)
_GATE_UP = dict(pre_proj=None, linear_proj=None, gate_up_proj="gate_up_proj", act="activation_fn")
_UP_ONLY = dict(pre_proj="up_proj", linear_proj=None)  # ungated MLPs named up/down
# Post-norm blocks (OLMo-2's): each sublayer's output is normed before it joins the residual.
_POST_NORMS = dict(
    pre_attn_norm=None,
    pre_mlp_norm=None,
    post_attn_norm="post_attention_layernorm",
    post_mlp_norm="post_feedforward_layernorm",
)
# The Mamba hybrids' names (Bamba, Jamba, Falcon-H1).
_FEED_FORWARD = dict(
    final_norm="model.final_layernorm", pre_mlp_norm="pre_ff_layernorm", mlp="feed_forward"
)

_GPT = Layout(
    blocks="transformer.h",
    embed="transformer.wte",
    final_norm="transformer.ln_f",
    mixer="attn",
    **_NO_QKV,
    qkv_proj="c_attn",
    qkv_layout="thirds",
    o_proj="c_proj",
    pre_attn_norm="ln_1",
    pre_mlp_norm="ln_2",
    pre_proj="c_fc",
    linear_proj=None,
    down_proj="c_proj",
    act="act",
)
_MLA = replace(_LLAMA, **_NO_QKV)
_QWEN3 = replace(_LLAMA, qk_norm="per_head")
_QWEN3_NEXT = replace(_QWEN3, linear_mixer="linear_attn", gated_query=True)
_OLMO2 = replace(_LLAMA, qk_norm="full", **_POST_NORMS)
_COHERE2 = replace(_LLAMA, pre_mlp_norm=None, parallel=("resid", "attn", "mlp"))

LAYOUTS: dict[str, Layout] = {
    "gpt2": _GPT,
    # MQA: c_attn is [q (d) | k (head_dim) | v (head_dim)], i.e. thirds with one K/V head.
    "gpt_bigcode": _GPT,
    "gpt_neox": Layout(
        blocks="gpt_neox.layers",
        embed="gpt_neox.embed_in",
        final_norm="gpt_neox.final_layer_norm",
        mixer="attention",
        **_QUERY_KEY_VALUE,
        qkv_layout="per_head",
        parallel=("mlp", "attn", "resid"),
        act="act",
    ),
    "gptj": replace(
        _GPT,
        q_proj="q_proj",
        k_proj="k_proj",
        v_proj="v_proj",
        qkv_proj=None,
        qkv_layout=None,
        o_proj="out_proj",
        pre_mlp_norm=None,  # the MLP reads ln_1's output too
        parallel=("attn", "mlp", "resid"),
        pre_proj="fc_in",
        down_proj="fc_out",
    ),
    "opt": Layout(
        blocks="model.decoder.layers",
        embed="model.decoder.embed_tokens",
        final_norm="model.decoder.final_layer_norm",
        o_proj="out_proj",
        pre_attn_norm="self_attn_layer_norm",
        pre_mlp_norm="final_layer_norm",
        mlp="",
        pre_proj="fc1",
        linear_proj=None,
        down_proj="fc2",
        act="activation_fn",
    ),
    "bloom": Layout(
        **_BLOOM_ROOT,
        **_QUERY_KEY_VALUE,
        qkv_layout="per_head",
        attn_adds_residual=True,
        mlp_adds_residual=True,
        act="gelu_impl",
    ),
    "falcon": Layout(
        **_BLOOM_ROOT,
        **_QUERY_KEY_VALUE,
        qkv_layout="per_kv_group",
        pre_attn_norm="ln_attn",
        pre_mlp_norm="ln_mlp",
        parallel=("mlp", "attn", "resid"),
        act="act",
    ),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _LLAMA,
    "qwen2": _LLAMA,
    "qwen2_moe": _LLAMA,
    "qwen3": _QWEN3,
    "qwen3_moe": _QWEN3,
    "qwen3_next": _QWEN3_NEXT,
    "gemma": _LLAMA,
    "gemma2": _SANDWICH,
    "gemma3": replace(_SANDWICH, qk_norm="per_head"),
    "phi": replace(
        _LLAMA,
        final_norm="model.final_layernorm",
        o_proj="dense",
        pre_mlp_norm=None,
        parallel=("attn", "mlp", "resid"),
        pre_proj="fc1",
        linear_proj=None,
        down_proj="fc2",
        act="activation_fn",
    ),
    "phi3": replace(_LLAMA, **_NO_QKV, qkv_proj="qkv_proj", qkv_layout="thirds", **_GATE_UP),
    "olmo": _LLAMA,
    "olmo2": _OLMO2,
    "olmoe": replace(_LLAMA, qk_norm="full"),
    "cohere": replace(_COHERE2, qk_norm="per_head"),
    "cohere2": _COHERE2,
    "granite": _LLAMA,
    "granitemoe": replace(_LLAMA, mlp="block_sparse_moe", router="router", router_fields=(2, 1, 0)),
    "stablelm": _LLAMA,
    "starcoder2": replace(_LLAMA, pre_proj="c_fc", linear_proj=None, down_proj="c_proj", act="act"),
    # MLA: no per-head q/k/v projections; z is still o_proj's input.
    "deepseek_v3": _MLA,
    "gpt_oss": replace(_LLAMA, router="router"),
    # Shared-KV attention with a grouped low-rank output projection: z enters o_a_proj.
    "deepseek_v4": replace(
        _MLA,
        o_proj="o_a_proj",
        streams=True,
        compressed_layer_types=("compressed_sparse_attention", "heavily_compressed_attention"),
    ),
    # The values pass through a gain-free v_norm after v_proj: the value point is its output.
    "gemma3n": replace(
        _SANDWICH, qk_norm="per_head", v_norm="v_norm", optional_kv_proj=True, altup=True
    ),
    # --- released since the first 32 ---
    "smollm3": _LLAMA,
    "helium": _LLAMA,
    "seed_oss": _LLAMA,
    "ministral3": _LLAMA,
    "ernie4_5": _LLAMA,
    "olmo3": _OLMO2,
    "exaone4": replace(_OLMO2, qk_norm="per_head"),
    "vaultgemma": replace(_LLAMA, pre_mlp_norm="pre_feedforward_layernorm"),
    "apertus": replace(
        _QWEN3,
        pre_attn_norm="attention_layernorm",
        pre_mlp_norm="feedforward_layernorm",
        **_UP_ONLY,
    ),
    "glm4": replace(
        _LLAMA,
        post_attn_norm="post_self_attn_layernorm",
        pre_mlp_norm="post_attention_layernorm",
        post_mlp_norm="post_mlp_layernorm",
        **_GATE_UP,
    ),
    # The QK-norm follows rotary: no QK-norm points to name (query_layernorm is post-RoPE).
    "hunyuan_v1_dense": _LLAMA,
    "hunyuan_v1_moe": _LLAMA,
    "phimoe": replace(_LLAMA, router="router"),
    "ernie4_5_moe": _LLAMA,
    "glm4_moe": _QWEN3,
    "dots1": _QWEN3,
    "deepseek_v2": _MLA,
    "qwen3_5": _QWEN3_NEXT,
    "qwen3_5_moe": _QWEN3_NEXT,
    "ministral": _LLAMA,
    "arcee": replace(_LLAMA, **_UP_ONLY),
    "glm": replace(_LLAMA, **_GATE_UP),
    "flex_olmo": _OLMO2,
    "nemotron": replace(_LLAMA, **_UP_ONLY),
    "lfm2": replace(
        _QWEN3,
        final_norm="model.embedding_norm",
        linear_mixer="conv",
        o_proj="out_proj",
        q_norm="q_layernorm",
        k_norm="k_layernorm",
        pre_attn_norm="operator_norm",
        pre_mlp_norm="ffn_norm",
        mlp="feed_forward",
        pre_proj="w1",
        linear_proj="w3",
        down_proj="w2",
        act="F.silu",
    ),
    "bamba": replace(_LLAMA, **_FEED_FORWARD, linear_mixer="mamba"),
    "jamba": replace(
        _LLAMA, **_FEED_FORWARD, linear_mixer="mamba", router="router", router_rule="softmax-top-k"
    ),
    "cohere2_moe": _COHERE2,
    # --- added in 2026 ---
    "dbrx": Layout(
        blocks="transformer.blocks",
        embed="transformer.wte",
        final_norm="transformer.norm_f",
        mixer="norm_attn_norm.attn",
        **_NO_QKV,
        qkv_proj="Wqkv",
        qkv_layout="thirds",
        o_proj="out_proj",
        clip_qkv=True,
        pre_attn_norm="norm_attn_norm.norm_1",
        pre_mlp_norm="norm_attn_norm.norm_2",
        mlp="ffn",
        router="router",
        router_rule="softmax-top-k-pnorm",
    ),
    "jetmoe": replace(
        _MLA,
        mixer="self_attention",
        kv_proj="kv_proj",
        o_proj=None,
        routed_heads=True,
        router="router",
        router_rule="top-k-softmax",
    ),
    # The L2 QK-norm follows rotary (no QK-norm points); the shared expert sits inside the MoE.
    # Lightning attention sits under self_attn on the layers layer_types calls linear.
    "minimax": replace(_LLAMA, linear_layer_types=("linear_attention",), normed_skip=True),
    "llama4": replace(
        _LLAMA,
        mlp="feed_forward",
        act="activation_fn",
        router="router",
        router_rule="sigmoid-top-k",
    ),
    # --- hybrid recurrent trunks (issue 19) ---
    # The dense members: the MLP is shared_mlp, [gate | up] fused in input_linear.
    "granitemoehybrid": replace(
        _LLAMA,
        linear_mixer="mamba",
        mlp="shared_mlp",
        pre_proj=None,
        linear_proj=None,
        gate_up_proj="input_linear",
        down_proj="output_linear",
        act="activation",
    ),
    "falcon_h1": replace(_LLAMA, **_FEED_FORWARD, ssm_beside="mamba"),
    # Both mixer kinds are `self_attn`: KDA on the config's linear_attention layers, MLA else.
    "kimi_linear": replace(_MLA, linear_layer_types=("linear_attention",)),
    # MLA like DeepSeek-V3; the indexer's top-k reaches the attention as part of its mask.
    "deepseek_v32": _MLA,
    "nemotron_h": replace(
        _LLAMA,
        embed="model.embeddings",
        final_norm="model.norm_f",
        mixer="mixer",
        pre_attn_norm="norm",
        pre_mlp_norm="norm",
        mlp="mixer",
        **_UP_ONLY,
        single_block=True,
    ),
    # Keys double as values on the full layers (no v_proj there) and the KV-sharing layers have
    # neither k_proj nor v_proj: the reference reads whichever projections a layer has.
    "gemma4": replace(
        _SANDWICH,
        qk_norm="per_head",
        v_norm="v_norm",
        optional_kv_proj=True,
        router="router",
        block_router=True,
    ),
}


# transformers model_types whose layout is listed under another key.
_LAYOUT_ALIASES = {
    "gemma3_text": "gemma3",
    "gemma3n_text": "gemma3n",
    "gemma4_text": "gemma4",
    "llama4_text": "llama4",
    "qwen3_5_text": "qwen3_5",
    "qwen3_5_moe_text": "qwen3_5_moe",
}


def layout_key(model_type: str) -> str | None:
    """The key in LAYOUTS for a transformers `model_type`, or None when no layout is written."""
    key = _LAYOUT_ALIASES.get(model_type, model_type)
    return key if key in LAYOUTS else None


def attention_chunk(config: Any, layer: int) -> int | None:
    """The chunk of `layer`'s attention mask (Llama-4's chunked layers), None when unchunked."""
    layer_types = getattr(config, "layer_types", None)
    if layer_types is None or layer_types[layer] != "chunked_attention":
        return None
    return getattr(config, "attention_chunk_size", None)


def sliding_window(config: Any, layer: int) -> int | None:
    """The window of `layer`'s attention mask from the HF config, None for global attention."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return window if layer_types[layer] == "sliding_attention" else None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return window or None
