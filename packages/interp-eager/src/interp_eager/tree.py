"""Where, in a live HF module tree, does each part of a decoder block sit?

Resolution inspects the tree with attribute-name vocabularies and the core's model facts; there
is no per-model table. `bind_tree(model, facts)` walks from the root to the trunk (the module
that owns the list of decoder blocks), then names, in every block, the modules the standardized
points are defined on: the token mixer and its projections, the MLP and its projections, the
router and experts of a mixture-of-experts layer, and the norms around each sublayer.

The norm vocabulary is the subtle part. `post_attention_layernorm` is the pre-MLP norm on most
families but the post-attention norm of a sandwich (Gemma-2/3, OLMo-2), and only the presence of
a post-MLP norm tells the two apart.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from interp_core.errors import PointUnsupported
from interp_core.facts import ModelFacts

__all__ = ["STREAM_HEADS", "LayerParts", "ModelTree", "QKVLayout", "bind_tree"]

TRUNK_CONTAINERS = ("model", "language_model", "text_model", "transformer", "gpt_neox", "decoder")
LAYER_LISTS = ("layers", "h", "blocks")
EMBEDDINGS = ("embed_tokens", "wte", "word_embeddings", "embed_in", "embeddings", "tok_embeddings")
# LFM2 calls its final norm `embedding_norm`, though it runs after the last block.
FINAL_NORMS = ("norm", "ln_f", "final_layernorm", "final_layer_norm", "norm_f", "embedding_norm")
LM_HEADS = ("lm_head", "embed_out")
# Multi-stream trunks collapse their residual streams into one vector before the final norm.
STREAM_HEADS = ("hc_head",)
# Hybrid trunks name the non-attention mixer after its kind: Mamba (Bamba, Jamba) and LFM2's
# short convolution.
MIXERS = (
    "self_attn",
    "self_attention",
    "attention",
    "attn",
    "linear_attn",
    "mixer",
    "mamba",
    "conv",
)
Q_PROJS = ("q_proj", "query", "q_b_proj")
K_PROJS = ("k_proj", "key")
V_PROJS = ("v_proj", "value")
Q_NORMS = ("q_norm", "q_layernorm")  # LFM2: q_layernorm
K_NORMS = ("k_norm", "k_layernorm")
# A norm on the values after their projection (Gemma-3n's and -4's weightless v_norm): what
# attention mixes is its output, not v_proj's.
V_NORMS = ("v_norm",)
QKV_PROJS = ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "wqkv")
# A fused [keys | values] projection beside routed queries (JetMoE).
KV_PROJS = ("kv_proj",)
# DeepSeek-V4 projects out in two steps; z is the input of the first (o_a_proj).
O_PROJS = ("o_proj", "c_proj", "out_proj", "dense", "o_a_proj")
# Granite-4.0-H's dense members hold only `shared_mlp`; its MoE members hold both, and the routed
# `block_sparse_moe` is the MLP whose input is mlp_in (the registry refuses their mlp_out).
MLPS = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "shared_mlp")
GATE_PROJS = ("gate_proj", "w1")
UP_PROJS = ("up_proj", "c_fc", "dense_h_to_4h", "fc_in", "fc1", "w3")
DOWN_PROJS = ("down_proj", "c_proj", "dense_4h_to_h", "fc_out", "fc2", "w2", "output_linear")
# Granite-4.0-H's shared_mlp fuses [gate | up] into `input_linear`.
GATE_UP_PROJS = ("gate_up_proj", "input_linear")
ROUTERS = ("gate", "router")
EXPERTS = ("experts",)
# DBRX nests its attention between its two norms in one sub-module of the block.
SUBLAYER_HOLDERS = ("norm_attn_norm",)
PRE_ATTN_NORMS = (
    "input_layernorm",
    "norm_1",
    "ln_1",
    "ln_attn",
    "self_attn_layer_norm",
    "attention_norm",
    "attention_layernorm",
    "operator_norm",
)
POST_MLP_NORMS = ("post_feedforward_layernorm", "post_mlp_layernorm", "post_mlp_norm")
PRE_MLP_NORMS = (
    "pre_feedforward_layernorm",
    "ln_2",
    "ln_mlp",
    "ffn_norm",
    "final_layer_norm",
    "feedforward_layernorm",
    "pre_ff_layernorm",
    "norm_2",
)
# GLM-4 names its post-attention norm apart, which makes its `post_attention_layernorm` the
# pre-MLP norm even though a post-MLP norm is present.
POST_ATTN_NORMS = ("post_self_attn_layernorm",)
# The one norm of a single-sublayer block (Nemotron-H), before whichever sublayer it holds.
SINGLE_SUBLAYER_NORMS = ("norm",)
AMBIGUOUS_NORM = "post_attention_layernorm"


class QKVLayout:
    """How a fused q|k|v projection packs its output features."""

    SEPARATE = "separate"  # q_proj / k_proj / v_proj
    THIRDS = "contiguous"  # [q (n_heads*d) | k (n_kv*d) | v (n_kv*d)]   GPT-2, Phi-3, StarCoder
    PER_HEAD = "per_head"  # [head, (q, k, v), d]                         GPT-NeoX, BLOOM
    PER_KV_GROUP = "per_kv_group"  # [kv, (q * group, k, v), d]             Falcon (new decoder)
    MULTI_QUERY = "multi_query"  # [q (n_heads*d) | k (d) | v (d)]          Falcon multi_query


@dataclass
class LayerParts:
    """The modules one decoder block's points are read from (None where the block has none)."""

    index: int
    block: Any
    mixer: Any = None
    mixer_name: str | None = None
    q_proj: Any = None
    k_proj: Any = None
    v_proj: Any = None
    qkv_proj: Any = None
    qkv_layout: str = QKVLayout.SEPARATE
    kv_proj: Any = None
    o_proj: Any = None
    q_norm: Any = None
    k_norm: Any = None
    v_norm: Any = None
    mlp: Any = None  # None when the block inlines its MLP (OPT)
    mlp_entry: Any = None  # the module whose input is mlp_in (the MLP, or fc1 when inlined)
    mlp_exit: Any = None  # the module whose output is mlp_out (the MLP, or fc2 when inlined)
    gate_proj: Any = None
    up_proj: Any = None
    down_proj: Any = None
    gate_up_proj: Any = None
    router: Any = None
    experts: Any = None
    pre_attn_norm: Any = None
    post_attn_norm: Any = None
    pre_mlp_norm: Any = None
    post_mlp_norm: Any = None
    attn_hc: Any = None
    mlp_hc: Any = None
    names: dict[str, str] = field(default_factory=dict)  # role -> dotted path, for messages

    @property
    def sparse(self) -> bool:
        return self.router is not None


@dataclass
class ModelTree:
    root: Any
    trunk: Any
    trunk_path: str
    embed: Any
    final_norm: Any
    lm_head: Any
    layers: list[LayerParts]
    stream_head: Any = None

    def layer(self, index: int) -> LayerParts:
        return self.layers[index]


def _child(module: Any, names: tuple[str, ...]) -> tuple[str | None, Any]:
    for name in names:
        child = getattr(module, name, None)
        if child is not None and hasattr(child, "forward"):
            return name, child
    return None, None


def _find_trunk(root: Any) -> tuple[str, Any, Any]:
    # Breadth first through the known container names: the first module holding a list of blocks.
    queue: deque[tuple[str, Any]] = deque([("", root)])
    while queue:
        path, module = queue.popleft()
        for name in LAYER_LISTS:
            blocks = getattr(module, name, None)
            if blocks is not None and type(blocks).__name__ == "ModuleList" and len(blocks) > 0:
                return path, module, blocks
        for name in TRUNK_CONTAINERS:
            child = getattr(module, name, None)
            if child is not None and hasattr(child, "forward"):
                queue.append((f"{path}.{name}" if path else name, child))
    message = (
        f"cannot find the decoder blocks of {type(root).__name__}: no module reachable through "
        f"{', '.join(TRUNK_CONTAINERS)} holds a list named {' / '.join(LAYER_LISTS)}"
    )
    raise PointUnsupported(message)


def _qkv_layout(mixer: Any, facts: ModelFacts, name: str) -> str:
    config = getattr(mixer, "config", None)
    split = facts.family.fused_qkv_split
    if split == "falcon-flags":
        if getattr(config, "new_decoder_architecture", False):
            return QKVLayout.PER_KV_GROUP
        if getattr(config, "multi_query", False):
            return QKVLayout.MULTI_QUERY
        return QKVLayout.PER_HEAD
    if name == "query_key_value":  # GPT-NeoX, BLOOM, Persimmon: interleaved per head
        return QKVLayout.PER_HEAD
    if split == "thirds-only-multi-query" and not getattr(config, "multi_query", True):
        # Only multi-query GPT-BigCode packs [q | k | v]; without it c_attn is viewed as
        # [b, s, heads, 3 * head_dim] and split per head.
        return QKVLayout.PER_HEAD
    return QKVLayout.THIRDS


def _bind_layer(index: int, block: Any, facts: ModelFacts, prefix: str) -> LayerParts:
    parts = LayerParts(index=index, block=block)
    names = parts.names

    def note(role: str, owner: str, child: str | None) -> None:
        if child is not None:
            names[role] = f"{owner}.{child}"

    # The attention and the norms sit in the block, or in its holder (DBRX's norm_attn_norm).
    holder_name, holder = _child(block, SUBLAYER_HOLDERS)
    inner, inner_prefix = (holder, f"{prefix}.{holder_name}") if holder else (block, prefix)
    mixer_name, mixer = _child(inner, MIXERS)
    parts.mixer, parts.mixer_name = mixer, mixer_name
    note("mixer", inner_prefix, mixer_name)
    if mixer is not None:
        owner = f"{inner_prefix}.{mixer_name}"
        for role, vocab in (("q_proj", Q_PROJS), ("k_proj", K_PROJS), ("v_proj", V_PROJS)):
            child_name, child = _child(mixer, vocab)
            setattr(parts, role, child)
            note(role, owner, child_name)
        qkv_name, parts.qkv_proj = _child(mixer, QKV_PROJS)
        note("qkv_proj", owner, qkv_name)
        if parts.qkv_proj is not None and parts.v_proj is None:
            parts.qkv_layout = _qkv_layout(mixer, facts, qkv_name or "")
        if facts.routed_attention:
            kv_name, parts.kv_proj = _child(mixer, KV_PROJS)
            note("kv_proj", owner, kv_name)
        o_name, parts.o_proj = _child(mixer, O_PROJS)
        note("o_proj", owner, o_name)
        for role, vocab in (("q_norm", Q_NORMS), ("k_norm", K_NORMS), ("v_norm", V_NORMS)):
            child_name, child = _child(mixer, vocab)
            if child is not None:
                setattr(parts, role, child)
                note(role, owner, child_name)

    mlp_name, mlp = _child(block, MLPS)
    if mlp is not None:
        _bind_mlp(parts, mlp, f"{prefix}.{mlp_name}", facts)
        if parts.router is None and facts.is_sparse(index):
            # Gemma-4 keeps its router and experts on the block, beside a dense MLP whose
            # projections were bound above.
            router_name, router = _child(block, ROUTERS)
            experts_name, experts = _child(block, EXPERTS)
            if router is not None and experts is not None:
                parts.router, parts.experts = router, experts
                note("router", prefix, router_name)
                note("experts", prefix, experts_name)
    else:
        # An MLP inlined in the block (OPT: fc1 / fc2 directly on the decoder layer).
        up_name, up = _child(block, ("fc1", "fc_in"))
        down_name, down = _child(block, ("fc2", "fc_out"))
        if up is not None and down is not None:
            parts.up_proj, parts.down_proj = up, down
            parts.mlp_entry, parts.mlp_exit = up, down
            note("up_proj", prefix, up_name)
            note("down_proj", prefix, down_name)
            note("mlp", prefix, up_name)

    pre_name, parts.pre_attn_norm = _child(inner, PRE_ATTN_NORMS)
    note("pre_attn_norm", inner_prefix, pre_name)
    post_mlp_name, parts.post_mlp_norm = _child(inner, POST_MLP_NORMS)
    note("post_mlp_norm", inner_prefix, post_mlp_name)
    pre_mlp_name, parts.pre_mlp_norm = _child(inner, PRE_MLP_NORMS)
    post_attn_name, parts.post_attn_norm = _child(inner, POST_ATTN_NORMS)
    note("post_attn_norm", inner_prefix, post_attn_name)
    ambiguous = getattr(inner, AMBIGUOUS_NORM, None)
    if ambiguous is not None:
        if parts.post_mlp_norm is not None and parts.post_attn_norm is None:
            # A post-MLP norm proves a sandwich: the ambiguous norm follows attention.
            parts.post_attn_norm = ambiguous
            note("post_attn_norm", inner_prefix, AMBIGUOUS_NORM)
        elif parts.pre_mlp_norm is None:
            parts.pre_mlp_norm = ambiguous
            pre_mlp_name = AMBIGUOUS_NORM
    note("pre_mlp_norm", inner_prefix, pre_mlp_name)
    for role, name in (("attn_hc", "attn_hc"), ("mlp_hc", "ffn_hc")):
        child = getattr(block, name, None)
        if child is not None:
            setattr(parts, role, child)
            note(role, prefix, name)
    return parts


def _bind_mlp(parts: LayerParts, mlp: Any, owner: str, facts: ModelFacts) -> None:
    """The MLP (or mixture of experts) at dotted path `owner`, and its projections or router."""
    names = parts.names

    def note(role: str, child: str | None) -> None:
        if child is not None:
            names[role] = f"{owner}.{child}"

    parts.mlp = parts.mlp_entry = parts.mlp_exit = mlp
    names["mlp"] = owner
    router_name, router = _child(mlp, ROUTERS)
    experts_name, experts = _child(mlp, EXPERTS)
    # JetMoE keeps its experts as two stacked projections beside the router: a routed layer
    # by the facts, read through the router alone.
    if router is not None and (experts is not None or facts.is_sparse(parts.index)):
        parts.router, parts.experts = router, experts
        note("router", router_name)
        note("experts", experts_name)
        return
    gate_up_name, parts.gate_up_proj = _child(mlp, GATE_UP_PROJS)
    note("gate_up_proj", gate_up_name)
    gate_name, parts.gate_proj = _child(mlp, GATE_PROJS)
    note("gate_proj", gate_name)
    up_name, parts.up_proj = _child(mlp, UP_PROJS)
    note("up_proj", up_name)
    down_name, parts.down_proj = _child(mlp, DOWN_PROJS)
    note("down_proj", down_name)


def _bind_single_sublayer(index: int, block: Any, facts: ModelFacts, prefix: str) -> LayerParts:
    """A block that is ONE sublayer behind one norm (Nemotron-H): its module under the mixer's
    name is a token mixer or, on the layers the facts call "mlp", the MLP or experts."""
    module_name, module = _child(block, MIXERS)
    norm_name, norm = _child(block, SINGLE_SUBLAYER_NORMS)
    if module is None or norm is None:
        message = (
            f"layer {index} of {facts.architecture} is a single-sublayer block, but "
            f"{prefix} holds no module named {' / '.join(MIXERS)} or no norm named "
            f"{' / '.join(SINGLE_SUBLAYER_NORMS)}"
        )
        raise PointUnsupported(message)
    if facts.has_mixer(index):
        parts = _bind_layer(index, block, facts, prefix)
        parts.pre_attn_norm = norm
        parts.names["pre_attn_norm"] = f"{prefix}.{norm_name}"
        return parts
    parts = LayerParts(index=index, block=block)
    _bind_mlp(parts, module, f"{prefix}.{module_name}", facts)
    parts.pre_mlp_norm = norm
    parts.names["pre_mlp_norm"] = f"{prefix}.{norm_name}"
    return parts


def bind_tree(root: Any, facts: ModelFacts) -> ModelTree:
    """Bind the roles of a live HF causal LM to its modules; refuse a tree it cannot read."""
    trunk_path, trunk, blocks = _find_trunk(root)
    if len(blocks) != facts.n_layers:
        message = (
            f"{type(root).__name__} has {len(blocks)} decoder blocks but its config says "
            f"{facts.n_layers}; refusing to guess which facts describe which block"
        )
        raise PointUnsupported(message)
    layer_list = next(n for n in LAYER_LISTS if getattr(trunk, n, None) is blocks)
    prefix = f"{trunk_path}.{layer_list}" if trunk_path else layer_list
    _, embed = _child(trunk, EMBEDDINGS)
    _, final_norm = _child(trunk, FINAL_NORMS)
    _, lm_head = _child(root, LM_HEADS)
    bind = _bind_single_sublayer if facts.single_sublayer else _bind_layer
    layers = [bind(i, block, facts, f"{prefix}.{i}") for i, block in enumerate(blocks)]
    _, stream_head = _child(trunk, STREAM_HEADS)
    return ModelTree(root, trunk, trunk_path, embed, final_norm, lm_head, layers, stream_head)
