"""The "hf" reference engine: every standardized point read from HF modules named by hand.

The eager backend finds its modules with attribute-name vocabularies and maps points to hook
sites. Checking it against itself would prove nothing, so this engine never imports the backend:
every family's layout is written out by hand (`hf_layouts`), the tensors come from plain forward
hooks on those named modules, `output_hidden_states`, the logits, or are recomputed here from
the model's own inputs to its attention function (the attention scores, `hf_attention`) and from
its parameters (DeepSeek-V4's hyper-connection coefficients). It imports only torch and the
core's `Address`.

`reference_points(hf_model, family, ids)` runs one forward pass and returns every point it can
name for that family, plus what the invariant tests need (probabilities, masks, windows). The
validator's "hf" engine (`interp_validator.hf_engine`) runs it in-process on every model of a
sweep; the eager backend's own suite compares against it bit for bit. `layout_key(model_type)`
names the layout a transformers `model_type` uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from interp_core.address import Address
from interp_core.family_conventions import conventions_for
from interp_validator.references.hf_attention import (
    AttentionCall,
    attention_calls,
    reference_scores,
    split_qkv,
)
from interp_validator.references.hf_layouts import (
    LAYOUTS,
    Layout,
    LayoutMismatch,
    attention_chunk,
    layout_key,
    sliding_window,
)

__all__ = [
    "LAYOUTS",
    "Layout",
    "LayoutMismatch",
    "Reference",
    "attention_chunk",
    "hyper_connection",
    "layout_key",
    "reference_points",
    "reference_scores",
    "sliding_window",
    "split_qkv",
]


@dataclass
class Reference:
    """What one reference forward read: the points, and what the invariant tests need."""

    points: dict[Address, torch.Tensor] = field(default_factory=dict)
    logits: torch.Tensor | None = None  # the model's own logits (multiplier / softcap applied)
    sinks: dict[int, torch.Tensor] = field(default_factory=dict)  # per-head sink logits
    mlp_modules: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # (act, down) dense
    sparse_layers: set[int] = field(default_factory=set)
    # Gemma-4: the dense MLP's own output beside the experts (no point holds it).
    dense_mlp_out: dict[int, torch.Tensor | None] = field(default_factory=dict)
    attention_layers: set[int] = field(default_factory=set)
    # DeepSeek-V4's compressed layers: z and attn_out only (their keys are window tokens then
    # compressed entries); the model's own [b, heads, q, window + entries] probabilities are kept
    # here, with the keys (= values) its attention function read, for the z invariant.
    compressed_layers: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)


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


def _module(root: Any, path: str) -> Any:
    return root.get_submodule(path) if path else root


def _activation(mlp: Any, name: str) -> Any:
    if name.startswith("F."):
        return getattr(torch.nn.functional, name[2:])
    return getattr(mlp, name)


def _routed(
    routed: Any, layout: Layout, k: int, config: Any, dtype: torch.dtype
) -> tuple[Any, Any, Any]:
    """(logits, weights, indices) of one router call, by the layout's rule."""
    if layout.router_rule == "top-k-softmax":
        # JetMoE: the top-k logits, a softmax among them, cast to the hidden states' dtype.
        logits = routed[-1]
        top, indices = logits.topk(k, dim=1)
        return logits, torch.softmax(top, dim=1).to(dtype), indices
    if layout.router_rule == "softmax-top-k-pnorm":
        # DBRX: a softmax in the logits' dtype, the top-k, divided by their p-norm.
        probs = torch.softmax(routed, dim=1, dtype=routed.dtype)
        weights, indices = torch.topk(probs, k, dim=-1)
        p = config.ffn_config.moe_normalize_expert_weights
        if p is not None:
            weights = weights / torch.norm(weights, p=p, dim=-1, keepdim=True)
        return routed, weights, indices
    if layout.router_rule == "softmax-top-k":
        probs = torch.softmax(routed, dim=-1, dtype=torch.float32)
        weights, indices = torch.topk(probs, k, dim=-1)
        return routed, weights.to(routed.dtype), indices
    if layout.router_rule == "sigmoid-top-k":
        # Llama-4: (dense scores, logits). The top-k logits are scattered into a row of -inf
        # and the whole row goes through a float32 sigmoid, as the router does (a sigmoid over
        # the k values alone can round differently in torch's vectorised tail).
        logits = routed[1]
        top, indices = torch.topk(logits, k, dim=-1)
        dense = torch.full_like(logits, float("-inf")).scatter(-1, indices, top)
        weights = torch.sigmoid(dense.float()).to(logits.dtype).gather(-1, indices)
        return logits, weights, indices
    if layout.router_rule is not None:
        message = f"unknown router rule {layout.router_rule!r} in the layout"
        raise LayoutMismatch(message)
    logits_at, weights_at, indices_at = layout.router_fields
    return routed[logits_at], routed[weights_at], routed[indices_at]


def _dbrx_top_k(config: Any) -> int:
    return config.ffn_config.moe_top_k


def _optional_module(root: Any, path: str) -> Any:
    try:
        return root.get_submodule(path)
    except AttributeError:
        return None


def _per_layer(config: Any, layer: int, key: str, uniform: int) -> int:
    """A layer's width where the config varies it by layer (Gemma-4's per_layer_config)."""
    if not getattr(config, "is_heterogeneous", False):
        return uniform
    return getattr(config.per_layer_config[layer], key)


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
    # A config whose widths vary by layer refuses the global read: layer 0's stand in here, and
    # each attention layer reads its own below.
    widths = (
        text_config.per_layer_config[0]
        if getattr(text_config, "is_heterogeneous", False)
        else text_config
    )
    kv_heads = getattr(widths, "num_key_value_heads", None) or heads
    if getattr(text_config, "multi_query", False):  # GPT-BigCode, Falcon-7B: one K/V head
        kv_heads = 1
    if getattr(text_config, "new_decoder_architecture", False):  # Falcon-40B: grouped K/V
        kv_heads = text_config.num_kv_heads
    head_dim = getattr(widths, "head_dim", None) or text_config.hidden_size // heads

    ref = Reference()
    hooks = _Hooks()
    mixers: dict[int, Any] = {}
    parts: dict[int, dict[str, Any]] = {}
    # Gemma-3n: the last num_kv_shared_layers layers reuse earlier keys and values.
    sparsity = getattr(text_config, "activation_sparsity_pattern", None) or [0.0] * n_layers
    for layer, block in enumerate(blocks):
        p: dict[str, Any] = {"block": block}
        if layout.single_block:
            _hook_single_block(ref, hooks, layout, layer, block, text_config, p, mixers)
            parts[layer] = p
            continue
        if layout.altup:
            hooks.output(f"{layer}.block", block)
        mixer = _optional_module(block, layout.mixer)
        layer_types = getattr(text_config, "layer_types", None) or ()
        kind = layer_types[layer] if layer < len(layer_types) else None
        if kind in layout.linear_layer_types:
            # MiniMax and Kimi Linear keep their linear mixer under the softmax mixer's name;
            # the config's layer_types tells the two apart.
            p["linear_mixer"] = mixer
            hooks.output(f"{layer}.attn_out", mixer)
        elif mixer is None and layout.linear_mixer is not None:
            p["linear_mixer"] = getattr(block, layout.linear_mixer)
            hooks.output(f"{layer}.attn_out", p["linear_mixer"])
        else:
            assert mixer is not None, f"{family} layer {layer} has no {layout.mixer}"
            p["mixer"] = mixers[layer] = mixer
            p["compressed"] = kind in layout.compressed_layer_types
            if not layout.routed_heads and not p["compressed"]:
                ref.attention_layers.add(layer)
            hooks.output(f"{layer}.mixer", mixer)
            if layout.ssm_beside is not None:
                hooks.input(f"{layer}.attn_in", mixer)
            o_proj = getattr(mixer, layout.o_proj) if layout.o_proj else None
            if o_proj is not None:
                hooks.input(f"{layer}.z", o_proj)
            if layout.attn_adds_residual:
                hooks.output(f"{layer}.attn_out", o_proj)
            else:
                hooks.output(f"{layer}.attn_out", mixer)
            for role in ("q_proj", "k_proj", "v_proj", "qkv_proj", "kv_proj"):
                name = getattr(layout, role)
                if name is None:
                    continue
                if layout.optional_kv_proj and getattr(mixer, name, None) is None:
                    continue  # a KV-sharing layer (Gemma-3n, -4), or keys doubling as values
                hooks.output(f"{layer}.{role}", getattr(mixer, name))
            v_norm = getattr(mixer, layout.v_norm, None) if layout.v_norm is not None else None
            if v_norm is not None:  # KV-sharing layers build none
                hooks.output(f"{layer}.v_norm", v_norm)
            if getattr(mixer, "sinks", None) is not None:
                ref.sinks[layer] = mixer.sinks.detach().clone()
        for role in ("pre_attn_norm", "pre_mlp_norm", "post_attn_norm", "post_mlp_norm"):
            name = getattr(layout, role)
            if name is not None:
                hooks.output(f"{layer}.{role}", _module(block, name))
        if layout.pre_mlp_norm is not None and not layout.streams:
            hooks.input(f"{layer}.resid_mid", _module(block, layout.pre_mlp_norm))
        mlp = _module(block, layout.mlp)
        p["mlp"] = mlp
        # JetMoE keeps its experts as stacked projections beside the router, named by its rule.
        sparse = hasattr(mlp, "experts") or (
            layout.router_rule == "top-k-softmax" and hasattr(mlp, layout.router)
        )
        if layout.block_router and getattr(block, layout.router, None) is not None:
            # Gemma-4: experts beside the dense MLP; the dense parts are hooked below as usual.
            ref.sparse_layers.add(layer)
            router = getattr(block, layout.router)
            hooks.output(f"{layer}.router", router)
            family = conventions_for(getattr(text_config, "model_type", ""))
            logits = family.router_logits_module or "proj"
            hooks.output(f"{layer}.router_logits", getattr(router, logits))
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
            if layout.block_router and layer in ref.sparse_layers:
                # Experts beside this dense MLP (Gemma-4): no mlp_out point, so the reference
                # keeps its own copy of the dense MLP's output for the neuron check. A dense
                # Gemma-4 (enable_moe_block off) serves mlp_in and mlp_out as any model does.
                ref.dense_mlp_out[layer] = None
            for role in ("pre_proj", "linear_proj", "gate_up_proj"):
                name = getattr(layout, role)
                if name is not None:
                    hooks.output(f"{layer}.{role}", getattr(mlp, name))
            ref.mlp_modules[layer] = (_activation(mlp, layout.act), down)
        if layout.streams:
            hooks.input(f"{layer}.attn_hc", block.attn_hc)
            hooks.input(f"{layer}.mlp_hc", block.ffn_hc)
            hooks.input(f"{layer}.resid_mid", block.ffn_hc)
        parts[layer] = p
    final_norm = _module(hf_model, layout.final_norm)
    last_stack = hf_model.model.hc_head if layout.streams else final_norm
    hooks.input("last_resid_post", last_stack)
    if layout.altup:
        # Gemma-3n's hidden_states are the stream stacks, with no final-norm entry.
        hooks.output("final_norm", final_norm)

    try:
        with torch.no_grad(), attention_calls(hf_model, mixers) as calls:
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
    final = out["final_norm"] if layout.altup else hidden[-1]
    put("final_norm", None, final)
    softcap = getattr(text_config, "final_logit_softcapping", None)
    scale = getattr(text_config, "logit_scale", None)
    divisor = getattr(text_config, "logits_scaling", None)
    head_multiplier = getattr(text_config, "lm_head_multiplier", None)  # Falcon-H1
    if (
        softcap is None
        and scale in (None, 1.0)
        and divisor in (None, 1.0)
        and head_multiplier in (None, 1.0)
    ):
        put("lm_head", None, output.logits)
    else:
        # The model post-processes its logits; the point is the unembedding's raw output.
        with torch.no_grad():
            put("lm_head", None, hf_model.lm_head(final))

    residual_multiplier = getattr(text_config, "residual_multiplier", None)

    def scaled(tensor: torch.Tensor) -> torch.Tensor:
        return tensor * residual_multiplier if residual_multiplier not in (None, 1.0) else tensor

    for layer in range(n_layers):
        p = parts[layer]
        resid_pre = hidden[layer]
        resid_post = hidden[layer + 1] if layer < n_layers - 1 else inp["last_resid_post"]
        if layout.altup:
            # [n, b, s, d] stacks: the block's own input and output.
            stack_pre = hidden[layer]
            stack_post = out[f"{layer}.block"]
            for k in range(stack_pre.shape[0]):
                points[Address("resid_pre", layer, k)] = stack_pre[k]
                points[Address("resid_post", layer, k)] = stack_post[k]
            put("resid_streams", layer, stack_post.permute(1, 2, 0, 3))
        elif layout.streams:
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
        if layout.single_block:
            # One sublayer, one residual add: its output is the layer's write as it is.
            key = "attn" if p["kind"] in _SINGLE_BLOCK_MIXERS else "mlp"
            put(f"{key}_in", layer, _flat(inp[f"{layer}.{key}_in"], batch, seq))
            write = _flat(first(out[f"{layer}.{key}_out"]), batch, seq)
            put(f"{key}_out", layer, write)
            put(f"{key}_out_post", layer, write)
            if layer in ref.attention_layers:
                _attention_points(
                    ref, layer, layout, p["mixer"], out, inp, calls, heads, kv_heads, head_dim
                )
            elif p["kind"] == "moe":
                k = text_config.num_experts_per_tok
                routed = _routed(out[f"{layer}.router"], layout, k, text_config, write.dtype)
                names = ("router_logits", "expert_weights", "expert_indices")
                for name, tensor in zip(names, routed, strict=True):
                    put(name, layer, _flat(tensor, batch, seq))
            elif p["kind"] == "mlp":
                put("mlp_pre", layer, _flat(out[f"{layer}.pre_proj"], batch, seq))
                put("mlp_act", layer, _flat(inp[f"{layer}.mlp_act"], batch, seq))
            continue

        # Attention side.
        if layout.ssm_beside is not None:
            put("attn_in", layer, inp[f"{layer}.attn_in"])
        elif layout.pre_attn_norm is not None:
            put("attn_in", layer, out[f"{layer}.pre_attn_norm"])
        else:
            put("attn_in", layer, resid_pre)  # post-norm-only blocks (OLMo-2)
        attn_out = first(out[f"{layer}.attn_out"])
        put("attn_out", layer, attn_out)
        if layout.normed_skip or layout.altup:
            pass  # nothing is added to a residual: no attn_out_post
        elif layout.ssm_beside is not None:
            pass  # the block sums attention and Mamba-2 itself: no attn_out_post to name
        elif layout.post_attn_norm is not None:
            put("attn_out_post", layer, scaled(out[f"{layer}.post_attn_norm"]))
        else:
            put("attn_out_post", layer, scaled(attn_out))
        if layout.routed_heads and f"{layer}.kv_proj" in out:
            # Only the shared K/V heads are fixed units: the value half of kv_proj.
            put("value", layer, out[f"{layer}.kv_proj"].chunk(2, dim=-1)[1])
        if p.get("compressed"):
            points[Address("z", layer)] = _flat(inp[f"{layer}.z"], batch, seq)
            ref.compressed_layers[layer] = (out[f"{layer}.mixer"][1], calls[layer].key)
        if layer in ref.attention_layers:
            dim = _per_layer(text_config, layer, "head_dim", head_dim)
            kv = _per_layer(text_config, layer, "num_key_value_heads", kv_heads)
            _attention_points(ref, layer, layout, p["mixer"], out, inp, calls, heads, kv, dim)

        # MLP side.
        if layout.parallel is None and not (layout.streams or layout.normed_skip or layout.altup):
            if layout.pre_mlp_norm is not None:
                put("resid_mid", layer, _flat(inp[f"{layer}.resid_mid"], batch, seq))
            else:
                put("resid_mid", layer, inp[f"{layer}.mlp_in"])  # nothing normalises it
        mlp_out = _flat(first(out[f"{layer}.mlp_out"]), batch, seq)
        if layer in ref.dense_mlp_out:
            # Two MLPs read resid_mid through their own norms and their normed outputs are
            # summed inside the block: no mlp_in, no mlp_out (the registry refuses both).
            ref.dense_mlp_out[layer] = mlp_out
        else:
            put("mlp_in", layer, _flat(inp[f"{layer}.mlp_in"], batch, seq))
            put("mlp_out", layer, mlp_out)
        if layout.normed_skip or layout.altup:
            pass  # resid_post is alpha*mlp_in + beta*mlp_out (AltUp: corrected): no mlp_out_post
        elif layout.post_mlp_norm is not None:
            put("mlp_out_post", layer, scaled(out[f"{layer}.post_mlp_norm"]))
        else:
            put("mlp_out_post", layer, scaled(mlp_out))
        if layout.block_router and layer in ref.sparse_layers:
            # Gemma-4's router returns (probabilities, weights, indices); the logits are its
            # projection's output.
            _, weights, indices = out[f"{layer}.router"]
            put("router_logits", layer, _flat(out[f"{layer}.router_logits"], batch, seq))
            put("expert_weights", layer, _flat(weights, batch, seq))
            put("expert_indices", layer, _flat(indices, batch, seq))
        if layer in ref.sparse_layers and not layout.block_router:
            k = getattr(text_config, "num_experts_per_tok", None) or _dbrx_top_k(text_config)
            dtype = inp[f"{layer}.mlp_in"].dtype
            routed = out[f"{layer}.router"]
            logits, weights, indices = _routed(routed, layout, k, text_config, dtype)
            put("router_logits", layer, _flat(logits, batch, seq))
            put("expert_weights", layer, _flat(weights, batch, seq))
            put("expert_indices", layer, _flat(indices, batch, seq))
        if layer not in ref.sparse_layers or layout.block_router:
            if layout.gate_up_proj is not None:
                gate, up = out[f"{layer}.gate_up_proj"].chunk(2, dim=-1)
                put("mlp_pre", layer, gate)
                put("mlp_pre_linear", layer, up)
            elif sparsity[layer] > 0:
                # Gaussian top-k runs between gate_proj and the activation: no mlp_pre.
                put("mlp_pre_linear", layer, _flat(out[f"{layer}.linear_proj"], batch, seq))
            else:
                put("mlp_pre", layer, _flat(out[f"{layer}.pre_proj"], batch, seq))
                if layout.linear_proj is not None:
                    put("mlp_pre_linear", layer, _flat(out[f"{layer}.linear_proj"], batch, seq))
            put("mlp_act", layer, _flat(inp[f"{layer}.mlp_act"], batch, seq))
    return ref


# Nemotron-H's block-list names of the kinds whose one sublayer is a token mixer.
_SINGLE_BLOCK_MIXERS = ("linear_attention", "full_attention")


def _hook_single_block(
    ref: Reference,
    hooks: _Hooks,
    layout: Layout,
    layer: int,
    block: Any,
    config: Any,
    p: dict[str, Any],
    mixers: dict[int, Any],
) -> None:
    """Hooks on a block that is one sublayer (Nemotron-H), by the kind its config names."""
    kind = p["kind"] = config.layers_block_type[layer]
    module = _module(block, layout.mixer)
    if kind in _SINGLE_BLOCK_MIXERS:
        hooks.input(f"{layer}.attn_in", module)
        hooks.output(f"{layer}.attn_out", module)
        if kind == "full_attention":
            p["mixer"] = mixers[layer] = module
            ref.attention_layers.add(layer)
            hooks.output(f"{layer}.mixer", module)
            hooks.input(f"{layer}.z", getattr(module, layout.o_proj))
            for role in ("q_proj", "k_proj", "v_proj"):
                hooks.output(f"{layer}.{role}", getattr(module, getattr(layout, role)))
        return
    hooks.input(f"{layer}.mlp_in", module)
    hooks.output(f"{layer}.mlp_out", module)
    if kind == "moe":
        ref.sparse_layers.add(layer)
        hooks.output(f"{layer}.router", getattr(module, layout.router))
        return
    down = getattr(module, layout.down_proj)
    hooks.input(f"{layer}.mlp_act", down)
    hooks.output(f"{layer}.pre_proj", getattr(module, layout.pre_proj))
    ref.mlp_modules[layer] = (_activation(module, layout.act), down)


def _attention_points(
    ref: Reference,
    layer: int,
    layout: Layout,
    mixer: Any,
    out: dict[str, Any],
    inp: dict[str, torch.Tensor],
    calls: dict[int, AttentionCall],
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
            key = out.get(f"{layer}.k_proj")  # absent where the layer shares K/V
        if layout.v_proj is not None:
            value = out.get(f"{layer}.v_proj")
    if f"{layer}.v_norm" in out:
        # What attention mixes is the value norm's output (of v_proj, or of k_proj where keys
        # double as values).
        value = _flat(out[f"{layer}.v_norm"], batch, seq)
    elif layout.v_norm is not None:
        value = None  # a KV-sharing layer: no values of its own
    if value is not None and not layout.clip_qkv:
        points[Address("value", layer)] = value
    if layout.gated_query:
        assert query is not None
        # Qwen3-Next: per head, [query (d) | gate (d)].
        query, gate = torch.chunk(query.view(batch, seq, -1, head_dim * 2), 2, dim=-1)
        points[Address("attn_gate", layer)] = gate.reshape(batch, seq, -1)
    if layout.qk_norm is not None:
        assert query is not None
        _qk_norm_points(ref, layer, layout, mixer, query, key, head_dim)


def _qk_norm_points(
    ref: Reference,
    layer: int,
    layout: Layout,
    mixer: Any,
    query: torch.Tensor,
    key: torch.Tensor | None,
    dim: int,
) -> None:
    """The norms' inputs as the projections emit them; their outputs by calling the norms.

    A layer without keys of its own (Gemma-3n's and Gemma-4's KV sharing: `key` is None) has
    the query norm only.
    """
    points = ref.points
    batch, seq = query.shape[:2]
    q_norm = getattr(mixer, layout.q_norm)
    if layout.qk_norm == "per_head":
        q_in = query.reshape(batch, seq, -1, dim) if not layout.gated_query else query
        k_in = key.view(batch, seq, -1, dim) if key is not None else None
    else:
        q_in, k_in = query, key
    with torch.no_grad():
        q_out = q_norm(q_in)
        k_out = getattr(mixer, layout.k_norm)(k_in) if k_in is not None else None
    points[Address("q_norm_in", layer)] = q_in.reshape(batch, seq, -1)
    points[Address("q_norm_out", layer)] = q_out.reshape(batch, seq, -1)
    if k_in is not None and k_out is not None:
        points[Address("k_norm_in", layer)] = k_in.reshape(batch, seq, -1)
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
