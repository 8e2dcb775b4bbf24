"""The "hf" reference engine: every standardized point read from HF modules named by hand.

The eager backend finds its modules with attribute-name vocabularies (`interp_eager.tree`) and
maps points to hook sites (`interp_eager.taps`). Checking it against itself would prove nothing,
so this module never imports either: every family's layout is written out below by hand, the
tensors come from plain forward hooks on those named modules, `output_hidden_states`, the
logits, or are recomputed here from the model's own inputs to its attention function (the
attention scores) and from its parameters (DeepSeek-V4's hyper-connection coefficients). It
imports only torch and the core's `Address`.

`reference_points(hf_model, family, ids)` runs one forward pass and returns every point it can
name for that family, plus what the invariant tests need (probabilities, masks, windows). The
validator's "hf" engine (`interp_validator.hf_engine`) runs it in-process on every model of a
sweep; the eager backend's own suite compares against it bit for bit. `layout_key(model_type)`
names the layout a transformers `model_type` uses.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from interp_core.address import Address

__all__ = [
    "LAYOUTS",
    "Layout",
    "LayoutMismatch",
    "Reference",
    "layout_key",
    "reference_points",
    "reference_scores",
    "sliding_window",
    "split_qkv",
]


class LayoutMismatch(RuntimeError):
    """A hand-written layout does not fit the model it is applied to (a wrong module name)."""


@dataclass(frozen=True)
class Layout:
    """Where one family keeps each part, as attribute paths (relative to the block unless noted)."""

    blocks: str  # from the root: the ModuleList of decoder blocks
    embed: str  # from the root
    final_norm: str  # from the root
    mixer: str = "self_attn"
    linear_mixer: str | None = None  # hybrid trunks: the linear-attention module's name
    q_proj: str | None = "q_proj"  # relative to the mixer, like the next five
    k_proj: str | None = "k_proj"
    v_proj: str | None = "v_proj"
    qkv_proj: str | None = None
    qkv_layout: str | None = None  # "thirds" | "per_head" | "per_kv_group"
    o_proj: str = "o_proj"
    qk_norm: str | None = None  # "per_head" (norm over head_dim) | "full" (over the whole width)
    gated_query: bool = False  # Qwen3-Next: q_proj emits [query | gate] per head
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
    act: str = "act_fn"  # the activation module, an attribute of the MLP (of the block for OPT)
    router: str = "gate"  # relative to the MLP of a sparse layer
    router_fields: tuple[int, int, int] = (0, 1, 2)  # logits, weights, indices in its output
    streams: bool = False  # DeepSeek-V4's hyper-connection trunk


_LLAMA = Layout(blocks="model.layers", embed="model.embed_tokens", final_norm="model.norm")
_SANDWICH = replace(
    _LLAMA,
    post_attn_norm="post_attention_layernorm",
    pre_mlp_norm="pre_feedforward_layernorm",
    post_mlp_norm="post_feedforward_layernorm",
)
_GPT = Layout(
    blocks="transformer.h",
    embed="transformer.wte",
    final_norm="transformer.ln_f",
    mixer="attn",
    q_proj=None,
    k_proj=None,
    v_proj=None,
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

LAYOUTS: dict[str, Layout] = {
    "gpt2": _GPT,
    # MQA: c_attn is [q (d) | k (head_dim) | v (head_dim)], i.e. thirds with one K/V head.
    "gpt_bigcode": _GPT,
    "gpt_neox": Layout(
        blocks="gpt_neox.layers",
        embed="gpt_neox.embed_in",
        final_norm="gpt_neox.final_layer_norm",
        mixer="attention",
        q_proj=None,
        k_proj=None,
        v_proj=None,
        qkv_proj="query_key_value",
        qkv_layout="per_head",
        o_proj="dense",
        parallel=("mlp", "attn", "resid"),
        pre_proj="dense_h_to_4h",
        linear_proj=None,
        down_proj="dense_4h_to_h",
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
        blocks="transformer.h",
        embed="transformer.word_embeddings",
        final_norm="transformer.ln_f",
        mixer="self_attention",
        q_proj=None,
        k_proj=None,
        v_proj=None,
        qkv_proj="query_key_value",
        qkv_layout="per_head",
        o_proj="dense",
        attn_adds_residual=True,
        mlp_adds_residual=True,
        pre_proj="dense_h_to_4h",
        linear_proj=None,
        down_proj="dense_4h_to_h",
        act="gelu_impl",
    ),
    "falcon": Layout(
        blocks="transformer.h",
        embed="transformer.word_embeddings",
        final_norm="transformer.ln_f",
        mixer="self_attention",
        q_proj=None,
        k_proj=None,
        v_proj=None,
        qkv_proj="query_key_value",
        qkv_layout="per_kv_group",
        o_proj="dense",
        pre_attn_norm="ln_attn",
        pre_mlp_norm="ln_mlp",
        parallel=("mlp", "attn", "resid"),
        pre_proj="dense_h_to_4h",
        linear_proj=None,
        down_proj="dense_4h_to_h",
        act="act",
    ),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _LLAMA,
    "qwen2": _LLAMA,
    "qwen2_moe": _LLAMA,
    "qwen3": replace(_LLAMA, qk_norm="per_head"),
    "qwen3_moe": replace(_LLAMA, qk_norm="per_head"),
    "qwen3_next": replace(_LLAMA, linear_mixer="linear_attn", qk_norm="per_head", gated_query=True),
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
    "phi3": replace(
        _LLAMA,
        q_proj=None,
        k_proj=None,
        v_proj=None,
        qkv_proj="qkv_proj",
        qkv_layout="thirds",
        pre_proj=None,
        linear_proj=None,
        gate_up_proj="gate_up_proj",
        act="activation_fn",
    ),
    "olmo": _LLAMA,
    "olmo2": replace(
        _LLAMA,
        qk_norm="full",
        pre_attn_norm=None,
        pre_mlp_norm=None,
        post_attn_norm="post_attention_layernorm",
        post_mlp_norm="post_feedforward_layernorm",
    ),
    "olmoe": replace(_LLAMA, qk_norm="full"),
    "cohere": replace(
        _LLAMA, qk_norm="per_head", pre_mlp_norm=None, parallel=("resid", "attn", "mlp")
    ),
    "cohere2": replace(_LLAMA, pre_mlp_norm=None, parallel=("resid", "attn", "mlp")),
    "granite": _LLAMA,
    "granitemoe": replace(_LLAMA, mlp="block_sparse_moe", router="router", router_fields=(2, 1, 0)),
    "stablelm": _LLAMA,
    "starcoder2": replace(_LLAMA, pre_proj="c_fc", linear_proj=None, down_proj="c_proj", act="act"),
    # MLA: no per-head q/k/v projections; z is still o_proj's input.
    "deepseek_v3": replace(_LLAMA, q_proj=None, k_proj=None, v_proj=None),
    "gpt_oss": replace(_LLAMA, router="router"),
    # Shared-KV attention with a grouped low-rank output projection: z enters o_a_proj.
    "deepseek_v4": replace(
        _LLAMA, q_proj=None, k_proj=None, v_proj=None, o_proj="o_a_proj", streams=True
    ),
}


# transformers model_types whose layout is listed under another key.
_LAYOUT_ALIASES = {"gemma3_text": "gemma3"}


def layout_key(model_type: str) -> str | None:
    """The key in LAYOUTS for a transformers `model_type`, or None when no layout is written."""
    key = _LAYOUT_ALIASES.get(model_type, model_type)
    return key if key in LAYOUTS else None


def sliding_window(config: Any, layer: int) -> int | None:
    """The window of `layer`'s attention mask from the HF config, None for global attention."""
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return window if layer_types[layer] == "sliding_attention" else None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return window or None


@dataclass
class Reference:
    points: dict[Address, torch.Tensor] = field(default_factory=dict)
    logits: torch.Tensor | None = None  # the model's own logits (multiplier / softcap applied)
    sinks: dict[int, torch.Tensor] = field(default_factory=dict)  # per-head sink logits
    mlp_modules: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # (act, down) dense
    sparse_layers: set[int] = field(default_factory=set)
    attention_layers: set[int] = field(default_factory=set)


# --- hooks ---------------------------------------------------------------------------------------
def _first_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return kwargs["hidden_states"]
    for value in args:
        if isinstance(value, torch.Tensor):
            return value
    message = "a hooked module received no tensor input, so its layout entry names the wrong module"
    raise LayoutMismatch(message)


def _clone(value: Any) -> Any:
    # Clone at hook time: some blocks update tensors in place afterwards (Falcon's MLP output).
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, tuple | list):
        return type(value)(_clone(v) for v in value)
    return value


class _Hooks:
    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.outputs: dict[str, Any] = {}
        self.inputs: dict[str, torch.Tensor] = {}

    def output(self, key: str, module: Any) -> None:
        def hook(mod: Any, args: Any, out: Any) -> None:
            self.outputs[key] = _clone(out)

        self.handles.append(module.register_forward_hook(hook))

    def input(self, key: str, module: Any) -> None:
        def hook(mod: Any, args: Any, kwargs: Any) -> None:
            self.inputs[key] = _first_tensor(args, kwargs).detach().clone()

        self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


@contextmanager
def _patched(namespace: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(namespace, name)
    setattr(namespace, name, make(original))
    try:
        yield
    finally:
        setattr(namespace, name, original)


@dataclass
class _AttentionCall:
    query: torch.Tensor | None  # [b, heads, q, d] after RoPE (BLOOM: filled from its qkv output)
    key: torch.Tensor | None  # [b, kv_heads, k, d] after RoPE
    mask: torch.Tensor | None
    scaling: float  # the factor (or, with `divide`, the divisor) applied to q·kᵀ
    softcap: float | None = None
    divide: bool = False  # GPT-J and Falcon divide by sqrt(d) rather than multiply by its inverse
    baddbmm_bias: torch.Tensor | None = None  # BLOOM's ALiBi, added through baddbmm


@contextmanager
def _attention_calls(hf_model: Any, mixers: dict[int, Any]) -> Iterator[dict[int, _AttentionCall]]:
    """Record, per layer, the inputs of the attention-score computation as the model runs it."""
    calls: dict[int, _AttentionCall] = {}
    layer_of = {id(mixer): layer for layer, mixer in mixers.items()}
    modeling = sys.modules[type(hf_model).__module__]
    stack: list[Any] = []
    hooks: list[Any] = []

    if hasattr(modeling, "eager_attention_forward"):

        def make(original: Any) -> Any:
            def eager(module: Any, query: Any, key: Any, value: Any, mask: Any, **kwargs: Any):
                if id(module) in layer_of:
                    scaling = kwargs.get("scaling")
                    if scaling is None:  # GPT-2 and Gemma-2's own default
                        scaling = query.shape[-1] ** -0.5
                    calls[layer_of[id(module)]] = _AttentionCall(
                        query.detach().clone(),
                        key.detach().clone(),
                        mask,
                        scaling,
                        kwargs.get("softcap"),
                    )
                return original(module, query, key, value, mask, **kwargs)

            return eager

        stack.append(_patched(modeling, "eager_attention_forward", make))
    elif hasattr(modeling, "GPTJAttention"):
        # GPT-J computes attention in a method; wrap it per instance.
        for layer, mixer in mixers.items():

            def make_attn(original: Any, layer: int = layer, mixer: Any = mixer) -> Any:
                def attn(query: Any, key: Any, value: Any, attention_mask: Any = None) -> Any:
                    calls[layer] = _AttentionCall(
                        query.detach().clone().float(),
                        key.detach().clone().float(),
                        attention_mask,
                        mixer.scale_attn,
                        divide=True,
                    )
                    return original(query, key, value, attention_mask)

                return attn

            stack.append(_patched(mixer, "_attn", make_attn))
    elif hasattr(modeling, "FalconAttention"):
        current: dict[str, int] = {}

        def make_rope(original: Any) -> Any:
            def rope(q: Any, k: Any, cos: Any, sin: Any, *args: Any, **kwargs: Any) -> Any:
                q_embed, k_embed = original(q, k, cos, sin, *args, **kwargs)
                layer = current["layer"]
                calls[layer] = _AttentionCall(
                    q_embed.detach().clone(),
                    k_embed.detach().clone(),
                    current_mask[layer],
                    math.sqrt(q.shape[-1]),
                    divide=True,
                )
                return q_embed, k_embed

            return rope

        current_mask: dict[int, Any] = {}
        for layer, mixer in mixers.items():

            def enter(mod: Any, args: Any, kwargs: Any, layer: int = layer) -> None:
                current["layer"] = layer
                current_mask[layer] = kwargs.get("attention_mask")

            hooks.append(mixer.register_forward_pre_hook(enter, with_kwargs=True))
        stack.append(_patched(modeling, "apply_rotary_pos_emb", make_rope))
    elif hasattr(modeling, "BloomAttention"):
        for layer, mixer in mixers.items():
            # BLOOM computes scores inline from its fused projection (read after the forward)
            # and the ALiBi bias and mask it is handed.
            def enter(mod: Any, args: Any, kwargs: Any, layer: int = layer) -> None:
                calls[layer] = _AttentionCall(
                    None,
                    None,
                    kwargs["attention_mask"],
                    mod.inv_norm_factor,
                    baddbmm_bias=kwargs["alibi"],
                )

            hooks.append(mixer.register_forward_pre_hook(enter, with_kwargs=True))
    else:
        message = (
            f"no attention recorder for {modeling.__name__}: the HF reference knows how to read "
            "attention scores from eager_attention_forward, GPT-J, Falcon and BLOOM only; add a "
            "recorder for this modeling file"
        )
        raise LayoutMismatch(message)

    for ctx in stack:
        ctx.__enter__()
    try:
        yield calls
    finally:
        for ctx in reversed(stack):
            ctx.__exit__(None, None, None)
        for handle in hooks:
            handle.remove()


def reference_scores(call: _AttentionCall) -> torch.Tensor:
    """Scaled q·kᵀ (softcapped where the family caps) plus the mask: the registry's definition."""
    query, key = call.query, call.key
    assert query is not None and key is not None
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if call.baddbmm_bias is not None:
        # BLOOM: alibi.baddbmm(q, kᵀ, beta=1, alpha=1/sqrt(d)), then the mask.
        q_flat = query.reshape(batch * heads, q_len, dim)
        k_flat = key.reshape(batch * heads, -1, dim).transpose(-1, -2)
        scores = call.baddbmm_bias.baddbmm(
            batch1=q_flat, batch2=k_flat, beta=1.0, alpha=call.scaling
        )
        scores = scores.view(batch, heads, q_len, -1)
        return scores + call.mask if call.mask is not None else scores
    if kv_heads != heads:
        groups = heads // kv_heads
        key = key[:, :, None].expand(batch, kv_heads, groups, key.shape[2], dim)
        key = key.reshape(batch, heads, -1, dim)
    scores = torch.matmul(query, key.transpose(2, 3))
    scores = scores / call.scaling if call.divide else scores * call.scaling
    if call.softcap is not None:
        scores = torch.tanh(scores / call.softcap) * call.softcap
    if call.mask is not None:
        scores = scores + call.mask
    return scores


# --- fused projections ---------------------------------------------------------------------------
def split_qkv(
    fused: torch.Tensor, layout: str, heads: int, kv_heads: int, dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of a fused projection's output `[b, s, width]`, each flattened `[b, s, n*d]`."""
    b, s, _ = fused.shape
    if layout == "thirds":  # [q | k | v]: GPT-2, Phi-3, GPT-BigCode multi-query
        q, k, v = fused.split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
        return q, k, v
    if layout == "per_head":  # [head, (q, k, v), d]: GPT-NeoX, BLOOM
        per_head = fused.view(b, s, heads, 3, dim)
        q, k, v = (per_head[..., i, :].reshape(b, s, heads * dim) for i in range(3))
        return q, k, v
    if layout == "per_kv_group":  # [kv, (q * group, k, v), d]: Falcon's new decoder
        group = heads // kv_heads
        grouped = fused.view(b, s, kv_heads, group + 2, dim)
        q = grouped[:, :, :, :group].reshape(b, s, heads * dim)
        k = grouped[:, :, :, group].reshape(b, s, kv_heads * dim)
        v = grouped[:, :, :, group + 1].reshape(b, s, kv_heads * dim)
        return q, k, v
    message = f"unknown qkv layout {layout!r}: use 'thirds', 'per_head' or 'per_kv_group'"
    raise LayoutMismatch(message)


def _module(root: Any, path: str) -> Any:
    return root.get_submodule(path) if path else root


def _flat(tensor: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
    return tensor.reshape(batch, seq, -1)


# --- the reference forward -----------------------------------------------------------------------
def reference_points(
    hf_model: Any, family: str, ids: torch.Tensor, layout: Layout | None = None
) -> Reference:
    """Every point this module can name for `family`, from one plain forward pass on `ids`."""
    layout = layout or LAYOUTS[family]
    config = hf_model.config
    text_config = getattr(config, "text_config", config)
    batch, seq = ids.shape
    blocks = _module(hf_model, layout.blocks)
    n_layers = len(blocks)
    heads = text_config.num_attention_heads
    kv_heads = getattr(text_config, "num_key_value_heads", None) or heads
    if getattr(text_config, "multi_query", False):  # GPT-BigCode, Falcon-7B: one K/V head
        kv_heads = 1
    if getattr(text_config, "new_decoder_architecture", False):  # Falcon-40B: grouped K/V
        kv_heads = text_config.num_kv_heads
    head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // heads

    ref = Reference()
    hooks = _Hooks()
    mixers: dict[int, Any] = {}
    parts: dict[int, dict[str, Any]] = {}
    for layer, block in enumerate(blocks):
        p: dict[str, Any] = {"block": block}
        mixer = getattr(block, layout.mixer, None)
        if mixer is None and layout.linear_mixer is not None:
            p["linear_mixer"] = getattr(block, layout.linear_mixer)
            hooks.output(f"{layer}.attn_out", p["linear_mixer"])
        else:
            assert mixer is not None, f"{family} layer {layer} has no {layout.mixer}"
            p["mixer"] = mixers[layer] = mixer
            ref.attention_layers.add(layer)
            hooks.output(f"{layer}.mixer", mixer)
            o_proj = getattr(mixer, layout.o_proj)
            hooks.input(f"{layer}.z", o_proj)
            if layout.attn_adds_residual:
                hooks.output(f"{layer}.attn_out", o_proj)
            else:
                hooks.output(f"{layer}.attn_out", mixer)
            for role in ("q_proj", "k_proj", "v_proj", "qkv_proj"):
                name = getattr(layout, role)
                if name is not None:
                    hooks.output(f"{layer}.{role}", getattr(mixer, name))
            if getattr(mixer, "sinks", None) is not None:
                ref.sinks[layer] = mixer.sinks.detach().clone()
        for role in ("pre_attn_norm", "pre_mlp_norm", "post_attn_norm", "post_mlp_norm"):
            name = getattr(layout, role)
            if name is not None:
                hooks.output(f"{layer}.{role}", getattr(block, name))
        if layout.pre_mlp_norm is not None and not layout.streams:
            hooks.input(f"{layer}.resid_mid", getattr(block, layout.pre_mlp_norm))
        mlp = _module(block, layout.mlp)
        p["mlp"] = mlp
        sparse = hasattr(mlp, "experts")
        if sparse:
            ref.sparse_layers.add(layer)
            hooks.output(f"{layer}.router", getattr(mlp, layout.router))
            hooks.output(f"{layer}.mlp_out", mlp)
            hooks.input(f"{layer}.mlp_in", mlp)
        else:
            down = getattr(mlp, layout.down_proj)
            hooks.input(f"{layer}.mlp_act", down)
            if layout.mlp_adds_residual or not layout.mlp:
                hooks.output(f"{layer}.mlp_out", down)  # BLOOM adds the residual; OPT inlines
            else:
                hooks.output(f"{layer}.mlp_out", mlp)
            entry = layout.gate_up_proj or layout.pre_proj
            assert entry is not None
            hooks.input(f"{layer}.mlp_in", getattr(mlp, entry))
            for role in ("pre_proj", "linear_proj", "gate_up_proj"):
                name = getattr(layout, role)
                if name is not None:
                    hooks.output(f"{layer}.{role}", getattr(mlp, name))
            ref.mlp_modules[layer] = (getattr(mlp, layout.act), down)
        if layout.streams:
            hooks.input(f"{layer}.attn_hc", block.attn_hc)
            hooks.input(f"{layer}.mlp_hc", block.ffn_hc)
            hooks.input(f"{layer}.resid_mid", block.ffn_hc)
        parts[layer] = p
    final_norm = _module(hf_model, layout.final_norm)
    last_stack = hf_model.model.hc_head if layout.streams else final_norm
    hooks.input("last_resid_post", last_stack)

    try:
        with torch.no_grad(), _attention_calls(hf_model, mixers) as calls:
            output = hf_model(ids, output_hidden_states=True, use_cache=False)
    finally:
        hooks.remove()

    out, inp = hooks.outputs, hooks.inputs
    hidden = output.hidden_states
    points = ref.points
    ref.logits = output.logits

    def put(name: str, layer: int | None, tensor: torch.Tensor) -> None:
        address = Address(name) if layer is None else Address(name, layer)
        points[address] = tensor

    def first(value: Any) -> torch.Tensor:
        return value[0] if isinstance(value, tuple | list) else value

    # Trunk points.
    embed = _module(hf_model, layout.embed)
    embeddings = torch.nn.functional.embedding(ids, embed.weight)
    if hasattr(embed, "embed_scale"):  # Gemma's scaled embedding module
        embeddings = embeddings * embed.embed_scale.to(embed.weight.dtype)
    multiplier = getattr(text_config, "embedding_multiplier", None)
    if multiplier not in (None, 1.0):  # Granite scales in the model's forward
        embeddings = embeddings * multiplier
    put("embeddings", None, embeddings)
    put("final_norm", None, hidden[-1])
    softcap = getattr(text_config, "final_logit_softcapping", None)
    scale = getattr(text_config, "logit_scale", None)
    divisor = getattr(text_config, "logits_scaling", None)
    if softcap is None and scale in (None, 1.0) and divisor in (None, 1.0):
        put("lm_head", None, output.logits)
    else:
        # The model post-processes its logits; the point is the unembedding's raw output.
        with torch.no_grad():
            put("lm_head", None, hf_model.lm_head(hidden[-1]))

    residual_multiplier = getattr(text_config, "residual_multiplier", None)

    def scaled(tensor: torch.Tensor) -> torch.Tensor:
        return tensor * residual_multiplier if residual_multiplier not in (None, 1.0) else tensor

    for layer in range(n_layers):
        p = parts[layer]
        resid_pre = hidden[layer]
        resid_post = hidden[layer + 1] if layer < n_layers - 1 else inp["last_resid_post"]
        if layout.streams:
            resid_mid = inp[f"{layer}.resid_mid"]
            for k in range(resid_pre.shape[2]):
                points[Address("resid_pre", layer, k)] = resid_pre[:, :, k]
                points[Address("resid_mid", layer, k)] = resid_mid[:, :, k]
                points[Address("resid_post", layer, k)] = resid_post[:, :, k]
            put("resid_streams", layer, resid_post)
            _hyper_connection_points(ref, layer, p["block"], inp)
        else:
            put("resid_pre", layer, resid_pre)
            put("resid_post", layer, resid_post)

        # Attention side.
        if layout.pre_attn_norm is not None:
            put("attn_in", layer, out[f"{layer}.pre_attn_norm"])
        else:
            put("attn_in", layer, resid_pre)  # post-norm-only blocks (OLMo-2)
        attn_out = first(out[f"{layer}.attn_out"])
        put("attn_out", layer, attn_out)
        if layout.post_attn_norm is not None:
            put("attn_out_post", layer, scaled(out[f"{layer}.post_attn_norm"]))
        else:
            put("attn_out_post", layer, scaled(attn_out))
        if layer in ref.attention_layers:
            _attention_points(
                ref, layer, layout, p["mixer"], out, inp, calls, heads, kv_heads, head_dim
            )

        # MLP side.
        if layout.parallel is None and not layout.streams:
            if layout.pre_mlp_norm is not None:
                put("resid_mid", layer, _flat(inp[f"{layer}.resid_mid"], batch, seq))
            else:
                put("resid_mid", layer, inp[f"{layer}.mlp_in"])  # nothing normalises it
        put("mlp_in", layer, _flat(inp[f"{layer}.mlp_in"], batch, seq))
        mlp_out = _flat(first(out[f"{layer}.mlp_out"]), batch, seq)
        put("mlp_out", layer, mlp_out)
        if layout.post_mlp_norm is not None:
            put("mlp_out_post", layer, scaled(out[f"{layer}.post_mlp_norm"]))
        else:
            put("mlp_out_post", layer, scaled(mlp_out))
        if layer in ref.sparse_layers:
            logits_at, weights_at, indices_at = layout.router_fields
            routed = out[f"{layer}.router"]
            put("router_logits", layer, _flat(routed[logits_at], batch, seq))
            put("expert_weights", layer, _flat(routed[weights_at], batch, seq))
            put("expert_indices", layer, _flat(routed[indices_at], batch, seq))
        else:
            if layout.gate_up_proj is not None:
                gate, up = out[f"{layer}.gate_up_proj"].chunk(2, dim=-1)
                put("mlp_pre", layer, gate)
                put("mlp_pre_linear", layer, up)
            else:
                put("mlp_pre", layer, _flat(out[f"{layer}.pre_proj"], batch, seq))
                if layout.linear_proj is not None:
                    put("mlp_pre_linear", layer, _flat(out[f"{layer}.linear_proj"], batch, seq))
            put("mlp_act", layer, _flat(inp[f"{layer}.mlp_act"], batch, seq))
    return ref


def _attention_points(
    ref: Reference,
    layer: int,
    layout: Layout,
    mixer: Any,
    out: dict[str, Any],
    inp: dict[str, torch.Tensor],
    calls: dict[int, _AttentionCall],
    heads: int,
    kv_heads: int,
    head_dim: int,
) -> None:
    points = ref.points
    mixer_out = out[f"{layer}.mixer"]
    probs = mixer_out[1]
    batch, _, seq, _ = probs.shape
    points[Address("attn_probs", layer)] = probs
    call = calls[layer]
    if call.query is None:  # BLOOM: [head, (q, k, v), d] from its fused projection
        per_head = out[f"{layer}.qkv_proj"].view(batch, seq, heads, 3, head_dim)
        call.query = per_head[..., 0, :].transpose(1, 2)
        call.key = per_head[..., 1, :].transpose(1, 2)
    points[Address("attn_scores", layer)] = reference_scores(call)
    points[Address("z", layer)] = _flat(inp[f"{layer}.z"], batch, seq)

    query = key = value = None
    if layout.qkv_proj is not None:
        assert layout.qkv_layout is not None
        query, key, value = split_qkv(
            out[f"{layer}.qkv_proj"], layout.qkv_layout, heads, kv_heads, head_dim
        )
    else:
        if layout.q_proj is not None:
            query = out[f"{layer}.q_proj"]
        if layout.k_proj is not None:
            key = out[f"{layer}.k_proj"]
        if layout.v_proj is not None:
            value = out[f"{layer}.v_proj"]
    if value is not None:
        points[Address("value", layer)] = value
    if layout.gated_query:
        assert query is not None
        # Qwen3-Next: per head, [query (d) | gate (d)].
        query, gate = torch.chunk(query.view(batch, seq, -1, head_dim * 2), 2, dim=-1)
        points[Address("attn_gate", layer)] = gate.reshape(batch, seq, -1)
    if layout.qk_norm is not None:
        assert query is not None and key is not None
        _qk_norm_points(ref, layer, layout, mixer, query, key, head_dim)


def _qk_norm_points(
    ref: Reference,
    layer: int,
    layout: Layout,
    mixer: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    dim: int,
) -> None:
    """The norms' inputs as the projections emit them; their outputs by calling the norms."""
    points = ref.points
    batch, seq = key.shape[:2]
    if layout.qk_norm == "per_head":
        q_in = query.reshape(batch, seq, -1, dim) if not layout.gated_query else query
        k_in = key.view(batch, seq, -1, dim)
    else:
        q_in, k_in = query, key
    with torch.no_grad():
        q_out, k_out = mixer.q_norm(q_in), mixer.k_norm(k_in)
    points[Address("q_norm_in", layer)] = q_in.reshape(batch, seq, -1)
    points[Address("k_norm_in", layer)] = k_in.reshape(batch, seq, -1)
    points[Address("q_norm_out", layer)] = q_out.reshape(batch, seq, -1)
    points[Address("k_norm_out", layer)] = k_out.reshape(batch, seq, -1)


def _hyper_connection_points(
    ref: Reference, layer: int, block: Any, inp: dict[str, torch.Tensor]
) -> None:
    """DeepSeek-V4's stream coefficients, recomputed here from each hyper-connection's weights."""
    for site, module, key in (
        ("attn", block.attn_hc, f"{layer}.attn_hc"),
        ("mlp", block.ffn_hc, f"{layer}.mlp_hc"),
    ):
        write, mix, collapse = hyper_connection(module, inp[key])
        ref.points[Address(f"{site}_stream_write", layer)] = write
        ref.points[Address(f"{site}_stream_mix", layer)] = mix
        ref.points[Address(f"{site}_stream_collapse", layer)] = collapse


def hyper_connection(
    module: Any, streams: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(write, mix, collapse) of one mHC site for `streams` [b, s, n, d], from its parameters."""
    n = module.hc_mult
    eps = module.hc_eps
    with torch.no_grad():
        flat = streams.reshape(*streams.shape[:2], -1).float()
        norm = torch.rsqrt(flat.float().square().mean(-1, keepdim=True) + module.input_norm.eps)
        flat = flat * norm.to(flat.dtype)
        mixed = torch.nn.functional.linear(flat, module.fn.float())
        pre_w, post_w, comb_w = mixed.split([n, n, n * n], dim=-1)
        pre_b, post_b, comb_b = module.base.split([n, n, n * n])
        pre_scale, post_scale, comb_scale = module.scale.unbind(0)
        pre = torch.sigmoid(pre_w * pre_scale + pre_b) + eps
        post = 2 * torch.sigmoid(post_w * post_scale + post_b)
        comb_w = comb_w.view(*comb_w.shape[:-1], n, n)
        comb = torch.softmax(comb_w * comb_scale + comb_b.view(n, n), dim=-1) + eps
        # Sinkhorn: columns first, then rows and columns alternately; columns are last.
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
        for _ in range(module.hc_sinkhorn_iters - 1):
            comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
            comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
        collapse = (pre.unsqueeze(-1) * streams).sum(dim=2).to(streams.dtype)
    return post, comb, collapse
