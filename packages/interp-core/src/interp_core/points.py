"""Which activations can a user name, what exactly is each one, and does a given model have it?

The registry holds the 34 standardized points. Each `PointSpec` says where the point sits in the
forward pass (a paragraph precise enough to implement a backend from), how wide it is, whether it
can be written (steered), and what TransformerLens, nnsight and nnterp call the same tensor.
Whether a point exists on a particular model is answered from `ModelFacts` alone, so a sizer, a
CLI or the docs can ask before any weights load; every "no" carries the reason and an alternative.

Docs and the cheat sheet are generated from this module; nothing else restates these definitions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from interp_core.errors import PointUnsupported, UnknownPoint

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = [
    "ENGINES",
    "POINTS",
    "Equivalent",
    "PointSpec",
    "Role",
    "Scope",
    "Width",
    "absence_reason",
    "equivalent_for",
    "get_point",
    "hyper_connection_names",
    "is_point",
    "layer_point_names",
    "layer_ranges",
    "point_names",
    "points_for",
    "require_point",
    "stream_coordinate_names",
    "trunk_point_names",
    "writable_names",
]

ENGINES = ("transformer_lens", "nnsight", "nnterp")
_ENGINE_TITLES = {"transformer_lens": "TransformerLens", "nnsight": "nnsight", "nnterp": "nnterp"}


class Scope(Enum):
    """Whether a point occurs once per forward pass (trunk) or once per decoder layer."""

    TRUNK = "trunk"
    LAYER = "layer"


class Width(Enum):
    """How wide a point is, as a rule over model facts; the value is the rule in words."""

    D_MODEL = "d_model"
    Q_HEADS = "n_heads*head_dim"
    KV_HEADS = "n_kv_heads*head_dim"
    Z_HEADS = "n_heads*v_head_dim"
    D_MLP = "d_mlp"
    N_EXPERTS = "n_experts"
    TOP_K = "experts_per_token"
    SCORES = "heads*q*k"
    VOCAB = "vocab"
    STREAMS = "n_streams"
    STREAMS_X_D_MODEL = "n_streams*d_model"
    STREAMS_SQUARED = "n_streams*n_streams"

    @property
    def rule(self) -> str:
        return self.value

    @property
    def token_major(self) -> bool:
        """True when the tensor is laid out [batch, seq, ...]; attention is [batch, heads, q, k]."""
        return self is not Width.SCORES

    def per_token_dims(self, facts: ModelFacts, seq: int | None = None) -> tuple[int, ...]:
        """The dims one (batch row, query token) contributes: everything after [batch, seq].

        Attention has no fixed per-token width (each query row holds one entry per key), so
        SCORES needs `seq` and answers (n_heads, seq).
        """
        if self is Width.SCORES:
            if seq is None:
                message = (
                    "attention scores and probabilities have no fixed width: each query row has "
                    "one entry per key, so pass seq= (the key length)"
                )
                raise ValueError(message)
            return (facts.n_heads, seq)
        if self is Width.D_MODEL:
            return (facts.d_model,)
        if self is Width.Q_HEADS:
            return (facts.q_width,)
        if self is Width.KV_HEADS:
            return (facts.kv_width,)
        if self is Width.Z_HEADS:
            return (facts.z_width,)
        if self is Width.D_MLP:
            return (facts.d_mlp,)
        if self is Width.VOCAB:
            return (facts.vocab_size,)
        if self in (Width.N_EXPERTS, Width.TOP_K):
            if facts.moe is None:
                message = f"width {self.rule} is undefined for {facts.architecture}"
                raise PointUnsupported.build(
                    message,
                    "the model has no mixture-of-experts layers",
                )
            return (
                facts.moe.n_experts if self is Width.N_EXPERTS else facts.moe.experts_per_token,
            )
        if self is Width.STREAMS:
            return (facts.n_streams,)
        if self is Width.STREAMS_X_D_MODEL:
            return (facts.n_streams, facts.d_model)
        return (facts.n_streams, facts.n_streams)  # STREAMS_SQUARED

    def dims(self, facts: ModelFacts, seq: int) -> tuple[int, ...]:
        """The shape of one batch row: (seq, *per-token dims), or (heads, seq, seq) for SCORES."""
        if self is Width.SCORES:
            return (facts.n_heads, seq, seq)
        return (seq, *self.per_token_dims(facts))


class Role(Enum):
    """Which part of the network a point belongs to (groups points in docs and the CLI)."""

    TRUNK = "trunk"  # once per forward pass: embeddings, final norm, logits
    RESIDUAL = "residual"  # the residual stream at block boundaries
    ATTENTION = "attention"  # the token-mixing sublayer
    MLP = "mlp"  # the channel-mixing sublayer
    ROUTING = "routing"  # mixture-of-experts router decisions
    STREAM = "stream"  # hyper-connection (multi-stream) residual machinery


@dataclass(frozen=True)
class Equivalent:
    """One reference engine's name for a point, or None with the reason there is none.

    Names use `{L}` for the layer index. `note` explains any caveat: a convention that differs
    (pre-gain norms, flattened heads), or a name that means our point only on some families.
    """

    name: str | None
    note: str = ""

    def format(self, layer: int | None = None) -> str | None:
        """The name with the layer filled in (None stays None)."""
        if self.name is None or layer is None:
            return self.name
        return self.name.replace("{L}", str(layer))


@dataclass(frozen=True)
class PointSpec:
    """Everything the engine knows about one standardized point, independent of any model."""

    name: str
    scope: Scope
    width: Width
    role: Role
    definition: str
    writable: bool
    read_only_reason: str | None  # why a write is refused; None exactly when writable
    multi_stream_only: bool
    accepts_stream: bool
    dtype_kind: Literal["float", "int"]
    transformer_lens: Equivalent
    nnsight: Equivalent
    nnterp: Equivalent

    @property
    def is_trunk(self) -> bool:
        return self.scope is Scope.TRUNK

    @property
    def is_layer_point(self) -> bool:
        return self.scope is Scope.LAYER

    def equivalent(self, engine: str) -> Equivalent:
        """The model-independent mapping for `engine` (one of ENGINES)."""
        if engine not in ENGINES:
            message = f"unknown engine {engine!r}; known: {', '.join(ENGINES)}"
            raise ValueError(message)
        return getattr(self, engine)

    def absence_reason(
        self, facts: ModelFacts, layer: int | None = None, stream: int | None = None
    ) -> str | None:
        """None when the model has this point (at `layer`, or at any layer), else why not."""
        found = _why_absent(self, facts, layer, stream)
        return None if found is None else found.sentence()

    def is_present(
        self, facts: ModelFacts, layer: int | None = None, stream: int | None = None
    ) -> bool:
        return _why_absent(self, facts, layer, stream) is None


# --- the registry ---------------------------------------------------------------------------------

# nnsight mirrors the HF module tree, so its "names" are module paths and differ per family.
_NNSIGHT_PATHS = (
    "Paths are Llama-style (model.model.layers[L]); other families use their own module names, "
    "e.g. GPT-2's model.transformer.h[L]."
)
_NNTERP_ONLY_BOUNDARIES = (
    "nnterp standardizes only layer, attention and MLP boundaries (plus embeddings, attention "
    "probabilities and logits); reach this tensor through the underlying nnsight module path."
)
_TL_FLAT_HEADS = (
    "TransformerLens keeps a heads axis ([b, s, heads, d_head]); flatten it to compare."
)
_NOT_STEERABLE_ATTN = (
    "the attention matrix is produced inside the attention kernel (fused on fast paths, recomputed "
    "from q and k on serving backends), so there is no tensor a write could replace; intervene on "
    "value or z, or mask inputs, instead"
)
_NOT_STEERABLE_HC = (
    "mixing coefficients are made and consumed inside one fused hyper-connection call, and the "
    "mix matrices are Sinkhorn-normalised, so an edited copy would not be what the model uses; "
    "steer resid_streams or the *_stream_collapse vectors instead"
)
_NO_HC_ENGINES = (
    "Hyper-connection tensors are internal returns of the multi-stream modules of a specific "
    "implementation; reach them by module path."
)


def _spec(
    name: str,
    scope: Scope,
    width: Width,
    role: Role,
    definition: str,
    *,
    tl: Equivalent,
    nnsight: Equivalent,
    nnterp: Equivalent,
    read_only: str | None = None,
    multi_stream_only: bool = False,
    accepts_stream: bool = False,
    dtype_kind: Literal["float", "int"] = "float",
) -> PointSpec:
    return PointSpec(
        name=name,
        scope=scope,
        width=width,
        role=role,
        definition=" ".join(definition.split()),
        writable=read_only is None,
        read_only_reason=read_only,
        multi_stream_only=multi_stream_only,
        accepts_stream=accepts_stream,
        dtype_kind=dtype_kind,
        transformer_lens=tl,
        nnsight=nnsight,
        nnterp=nnterp,
    )


_T, _L = Scope.TRUNK, Scope.LAYER
_E = Equivalent

_SPECS: tuple[PointSpec, ...] = (
    _spec(
        "embeddings",
        _T,
        Width.D_MODEL,
        Role.TRUNK,
        """Token embeddings as the trunk hands them on: the embedding-table row for each input id,
        already multiplied by the embedding multiplier on families that have one (Gemma scales by
        sqrt(d_model)). Learned absolute position embeddings (GPT-2's wpe) and any embedding norm
        are not included yet; resid_pre at layer 0 is the first point that contains them. Computed
        once per forward pass.""",
        tl=_E(
            None,
            "TransformerLens hook_embed is the bare table lookup, before the embedding "
            "multiplier, so it equals this point only on families without one (see "
            "equivalent_for); it is left unmapped in general.",
        ),
        nnsight=_E(
            "model.model.embed_tokens.output",
            "Gemma-2 applies its sqrt(d_model) scale after this module, so multiply; "
            "Gemma-3's scaled embedding module already includes it. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("token_embeddings", "Same embedding-multiplier caveat as nnsight."),
    ),
    _spec(
        "resid_pre",
        _L,
        Width.D_MODEL,
        Role.RESIDUAL,
        """The residual stream entering decoder block L: the hidden state the block receives,
        before any of the block's norms. At layer 0 it contains everything the trunk adds before
        the first block (position embeddings, scaling, an embedding norm); for L > 0 it is the same
        tensor as resid_post at L-1. On a multi-stream (hyper-connection) trunk there is no single
        residual vector, so the point exists only with a stream coordinate, resid_pre.L.stream-K;
        the whole stack is resid_streams.""",
        tl=_E("blocks.{L}.hook_resid_pre"),
        nnsight=_E(
            "model.model.layers[{L}].input",
            "The first positional argument, or the hidden_states keyword. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("layers_input[{L}]"),
        accepts_stream=True,
    ),
    _spec(
        "attn_in",
        _L,
        Width.D_MODEL,
        Role.ATTENTION,
        """The hidden-state input of block L's token-mixing sublayer exactly as that module
        receives it: normally the pre-attention norm of resid_pre, gain and bias applied. Families
        without a pre-attention norm (OLMo-2 and OLMo-3 place their norms after the sublayers) pass
        resid_pre itself. On hybrid models the mixer may be linear attention or a state-space block;
        this point is its input all the same.""",
        tl=_E(
            "blocks.{L}.attn.hook_in",
            "TransformerBridge name. HookedTransformer's blocks.{L}.hook_attn_in is taken before "
            "ln1 (it equals resid_pre), and ln1.hook_normalized is normalised but before the gain "
            "is applied, so neither is this point.",
        ),
        nnsight=_E(
            "model.model.layers[{L}].self_attn.input",
            "Attention is usually called with hidden_states as a keyword. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("attentions_input[{L}]"),
    ),
    _spec(
        "q_norm_in",
        _L,
        Width.Q_HEADS,
        Role.ATTENTION,
        """The query projection as the per-head query norm (QK-norm) receives it: after q_proj,
        before normalisation and before rotary position embedding, flattened over heads to
        n_heads*head_dim. Exists only on families with QK-norm (Qwen3, Gemma-3, OLMo-2) and only at
        softmax-attention layers.""",
        tl=_E(
            "blocks.{L}.attn.q_norm.hook_in",
            "TransformerLens 3 bridge only. attn.hook_q is the same q_proj output on QK-norm "
            "families (pre-norm, pre-rotary). " + _TL_FLAT_HEADS,
        ),
        nnsight=_E(
            "model.model.layers[{L}].self_attn.q_norm.input",
            "Often shaped [b, s, heads, head_dim]; flatten. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "q_norm_out",
        _L,
        Width.Q_HEADS,
        Role.ATTENTION,
        """The query norm's output with its learned gain applied, still before rotary position
        embedding, flattened over heads to n_heads*head_dim: the query that attention scores are
        built from, up to RoPE. QK-norm families only, softmax-attention layers only.""",
        tl=_E(
            "blocks.{L}.attn.q_norm.hook_out", "TransformerLens 3 bridge only. " + _TL_FLAT_HEADS
        ),
        nnsight=_E("model.model.layers[{L}].self_attn.q_norm.output", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "k_norm_in",
        _L,
        Width.KV_HEADS,
        Role.ATTENTION,
        """The key counterpart of q_norm_in: the k_proj output entering the key norm, before
        normalisation and rotary embedding, n_kv_heads*head_dim wide (grouped-query key heads are
        not repeated to the query head count). QK-norm families only, softmax-attention layers
        only.""",
        tl=_E(
            "blocks.{L}.attn.k_norm.hook_in",
            "TransformerLens 3 bridge only; attn.hook_k is the same pre-norm k_proj output. "
            + _TL_FLAT_HEADS,
        ),
        nnsight=_E("model.model.layers[{L}].self_attn.k_norm.input", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "k_norm_out",
        _L,
        Width.KV_HEADS,
        Role.ATTENTION,
        """The key norm's output, gain applied, before rotary embedding, n_kv_heads*head_dim wide
        with grouped-query heads unrepeated. QK-norm families only, softmax-attention layers
        only.""",
        tl=_E(
            "blocks.{L}.attn.k_norm.hook_out", "TransformerLens 3 bridge only. " + _TL_FLAT_HEADS
        ),
        nnsight=_E("model.model.layers[{L}].self_attn.k_norm.output", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "value",
        _L,
        Width.KV_HEADS,
        Role.ATTENTION,
        """Block L's value vectors before attention mixes them across positions: the v_proj output,
        or the value part of a fused qkv projection unpacked according to the family's layout,
        flattened to n_kv_heads*head_dim with grouped-query heads unrepeated. Absent on multi-head
        latent attention (MLA: DeepSeek-V2/V3, MiniCPM3), which decompresses values from a shared
        latent and has no per-head value projection to read.""",
        tl=_E(
            "blocks.{L}.attn.hook_v",
            "Not expanded for grouped-query attention either. " + _TL_FLAT_HEADS,
        ),
        nnsight=_E(
            "model.model.layers[{L}].self_attn.v_proj.output",
            "Fused projections (GPT-2 c_attn, GPT-NeoX query_key_value) must be sliced, "
            "and GPT-NeoX interleaves q, k, v per head. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "attn_scores",
        _L,
        Width.SCORES,
        Role.ATTENTION,
        """Attention logits before the softmax, shaped [batch, heads, query, key]: the scaled
        query-key dot products (after RoPE), after any attention-logit softcap (Gemma-2) and after
        the causal or sliding-window mask has been added. Masked entries hold the backend's fill
        value (the dtype minimum or -inf), so compare only unmasked entries. Attention-sink logits,
        on families with sinks, are not columns of this tensor. Softmax-attention layers only.""",
        tl=_E(
            "blocks.{L}.attn.hook_attn_scores",
            "TransformerLens fills masked entries with -inf where HF eager uses the dtype minimum.",
        ),
        nnsight=_E(
            None,
            "The scores exist only inside the attention function, which has no "
            "module boundary to hook.",
        ),
        nnterp=_E(None, "nnterp exposes attention probabilities, not the logits before them."),
        read_only=_NOT_STEERABLE_ATTN,
    ),
    _spec(
        "attn_probs",
        _L,
        Width.SCORES,
        Role.ATTENTION,
        """Attention weights after the softmax, shaped [batch, heads, query, key]; row q is the
        distribution query q places over keys. On families with attention sinks part of the mass
        goes to the sink, so rows sum to less than one and are reported that way, never
        renormalised. Softmax-attention layers only; linear-attention and state-space layers have
        no such matrix.""",
        tl=_E("blocks.{L}.attn.hook_pattern"),
        nnsight=_E(
            "model.model.layers[{L}].self_attn.output[1]",
            "Only with eager attention; sdpa and flash kernels return None there. "
            + _NNSIGHT_PATHS,
        ),
        nnterp=_E(
            "attention_probabilities[{L}]",
            "Needs enable_attention_probs=True (forces eager attention).",
        ),
        read_only=_NOT_STEERABLE_ATTN,
    ),
    _spec(
        "z",
        _L,
        Width.Z_HEADS,
        Role.ATTENTION,
        """The per-head attention results concatenated across heads, as the output projection
        (o_proj) receives them: for each head, the attention-weighted sum of values,
        n_heads*v_head_dim wide (v_head_dim equals head_dim except on MLA). On gated-attention
        families the output gate has already been applied. Softmax-attention layers only.""",
        tl=_E("blocks.{L}.attn.hook_z", _TL_FLAT_HEADS),
        nnsight=_E("model.model.layers[{L}].self_attn.o_proj.input", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "attn_gate",
        _L,
        Width.Q_HEADS,
        Role.ATTENTION,
        """The output gate of gated attention, n_heads*head_dim wide: the gate projection's raw
        output, before the sigmoid, which then multiplies the attention result elementwise ahead of
        o_proj (z already includes that product). On Qwen3-Next the gate is the second half of the
        doubled query projection. Present only on families with an attention output gate, at
        softmax-attention layers.""",
        tl=_E(None, "TransformerLens has no hook for the attention output gate."),
        nnsight=_E(
            None,
            "Family-specific: a standalone gate projection's output, or a slice of "
            "q_proj's output on Qwen3-Next; address it by module path.",
        ),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "attn_out",
        _L,
        Width.D_MODEL,
        Role.ATTENTION,
        """The raw output of block L's token-mixing module: after the output projection, before any
        post-attention norm, residual multiplier or residual addition. On families whose attention
        module adds the residual itself (BLOOM, MPT) it is the o_proj output, so the point always
        means what the mixer produced, not the updated residual.""",
        tl=_E(
            "blocks.{L}.attn.hook_out",
            "TransformerBridge name. The block-level blocks.{L}.hook_attn_out is this tensor only "
            "on families without sandwich norms or a residual multiplier; elsewhere it is "
            "attn_out_post.",
        ),
        nnsight=_E("model.model.layers[{L}].self_attn.output[0]", _NNSIGHT_PATHS),
        nnterp=_E(
            "attentions_output[{L}]",
            "Before the post-attention norm on sandwich-norm families, as here.",
        ),
    ),
    _spec(
        "attn_out_post",
        _L,
        Width.D_MODEL,
        Role.ATTENTION,
        """What the attention sublayer actually adds to the residual stream: attn_out passed through
        the post-attention norm on sandwich-norm families (Gemma-2/3, OLMo-2) and scaled by the
        residual multiplier where the family has one (Granite). On a model with neither, this is
        the same tensor as attn_out: an alias that keeps the point available everywhere.""",
        tl=_E(
            "blocks.{L}.hook_attn_out",
            "Model-aware: on sandwich-norm families TransformerLens's block-level hook is taken "
            "after the post-attention norm (this point; cosine to the raw output can be as low as "
            "0.2-0.4); elsewhere it also equals attn_out.",
        ),
        nnsight=_E(
            "model.model.layers[{L}].post_attention_layernorm.output",
            "Gemma-style module name on sandwich-norm families (on Llama the module with "
            "this name is the pre-MLP norm); without sandwich norms read "
            "self_attn.output[0]. A residual multiplier is applied outside any module. "
            + _NNSIGHT_PATHS,
        ),
        nnterp=_E(
            None,
            "nnterp's attentions_output is taken before the post-attention norm; it "
            "equals this point only where no sandwich norm or multiplier exists (see "
            "equivalent_for).",
        ),
    ),
    _spec(
        "resid_mid",
        _L,
        Width.D_MODEL,
        Role.RESIDUAL,
        """The residual stream between the two sublayers of block L: resid_pre plus the attention
        write, as it enters the pre-MLP norm. Absent on parallel-block families (GPT-J, GPT-NeoX,
        Pythia), where attention and MLP both read resid_pre and no intermediate residual state
        exists. On a multi-stream trunk it exists only with a stream coordinate
        (resid_mid.L.stream-K): stream K after the attention site has written back. A write
        here changes the residual stream itself (the MLP's input and the skip path alike), as
        the same write at attn_out_post would.""",
        tl=_E("blocks.{L}.hook_resid_mid"),
        nnsight=_E(
            "model.model.layers[{L}].post_attention_layernorm.input",
            "On Llama-style models the pre-MLP norm is named post_attention_layernorm; "
            "sandwich-norm families call it pre_feedforward_layernorm. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E(None, "No standardized accessor; read the pre-MLP norm's input via nnsight."),
        accepts_stream=True,
    ),
    _spec(
        "mlp_in",
        _L,
        Width.D_MODEL,
        Role.MLP,
        """The hidden-state input of block L's MLP (or mixture-of-experts) module as it receives
        it: the pre-MLP norm of resid_mid, gain and bias applied. On parallel-block families it is
        the normed resid_pre the MLP reads.""",
        tl=_E(
            "blocks.{L}.mlp.hook_in",
            "TransformerBridge name. HookedTransformer's hook_mlp_in is taken before ln2, and "
            "ln2.hook_normalized is before the gain (cosine about 0.89 to this point on "
            "Gemma-2), so neither matches.",
        ),
        nnsight=_E("model.model.layers[{L}].mlp.input", _NNSIGHT_PATHS),
        nnterp=_E("mlps_input[{L}]"),
    ),
    _spec(
        "mlp_pre",
        _L,
        Width.D_MLP,
        Role.MLP,
        """The first projection of a dense MLP, d_mlp wide, before the nonlinearity: on gated MLPs
        the gate projection's output (the branch the activation function is applied to; the gate
        half of a fused gate_up projection), on plain MLPs the fc / c_fc output. Absent on
        mixture-of-experts layers, which have no single hidden layer.""",
        tl=_E(
            "blocks.{L}.mlp.hook_pre",
            "Beware the crossed weight names: TransformerLens W_gate is HF gate_proj and W_in is "
            "HF up_proj. On MoE blocks TransformerLens aliases hook_pre to the block input.",
        ),
        nnsight=_E(
            "model.model.layers[{L}].mlp.gate_proj.output",
            "Plain MLPs: the fc/c_fc output. Fused gate_up projections must be sliced. "
            + _NNSIGHT_PATHS,
        ),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "mlp_pre_linear",
        _L,
        Width.D_MLP,
        Role.MLP,
        """Gated MLPs only: the output of the up projection, the linear branch that multiplies the
        activated gate elementwise, d_mlp wide. Absent on plain (fc, activation, projection) MLPs
        and on mixture-of-experts layers.""",
        tl=_E("blocks.{L}.mlp.hook_pre_linear"),
        nnsight=_E("model.model.layers[{L}].mlp.up_proj.output", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "mlp_act",
        _L,
        Width.D_MLP,
        Role.MLP,
        """The hidden activation of a dense MLP as the down projection receives it, d_mlp wide:
        act(gate) * up on gated MLPs, act(fc) on plain ones. These are the MLP's neurons. Absent on
        mixture-of-experts layers (each expert has its own hidden layer and no single tensor holds
        them all).""",
        tl=_E(
            "blocks.{L}.mlp.hook_post",
            "On MoE blocks TransformerLens aliases hook_post to the block output, which is "
            "mlp_out, not this point.",
        ),
        nnsight=_E("model.model.layers[{L}].mlp.down_proj.input", _NNSIGHT_PATHS),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
    ),
    _spec(
        "router_logits",
        _L,
        Width.N_EXPERTS,
        Role.ROUTING,
        """Raw router scores of a mixture-of-experts layer, [batch, seq, n_experts]: the router
        (gate) linear's output for every expert, before softmax or sigmoid, bias correction, group
        limiting or top-k selection. Backends that run the router on token-flattened input reshape
        it back to [batch, seq, ...]. Sparse layers only.""",
        tl=_E(
            None,
            "TransformerLens hooks the softmax over these logits (hook_expert_weights), "
            "not the logits. Its mlp.hook_gate is one expert's SwiGLU gate, not the router.",
        ),
        nnsight=_E(
            "model.model.layers[{L}].mlp.gate.output",
            "Token-flattened ([b*s, n_experts]); Mixtral names the block block_sparse_moe, "
            "and some implementations return a tuple. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
        read_only=None,  # a write re-routes tokens: forcing or banning experts is a real edit
    ),
    _spec(
        "expert_weights",
        _L,
        Width.TOP_K,
        Role.ROUTING,
        """The weights of the experts the router chose for each token, [batch, seq,
        experts_per_token], in the router's ranking order (best first), after whatever the family
        does to them (softmax then top-k, top-k then softmax, renormalisation, routed scaling):
        the coefficients that multiply each selected expert's output. Sparse layers only.""",
        tl=_E(
            None,
            "TransformerLens's hook_expert_weights is the softmax over all experts "
            "before top-k selection, a different tensor.",
        ),
        nnsight=_E(None, "Computed inside the MoE block's forward with no module boundary."),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
        read_only=(
            "the selected weights are computed inside the MoE block with no module boundary and "
            "are fused into the expert kernels on serving backends; write router_logits to change "
            "routing"
        ),
    ),
    _spec(
        "expert_indices",
        _L,
        Width.TOP_K,
        Role.ROUTING,
        """Integer ids of the experts chosen for each token, [batch, seq, experts_per_token],
        aligned position by position with expert_weights. An integer tensor that carries no
        gradient. Sparse layers only.""",
        tl=_E("blocks.{L}.mlp.hook_expert_indices"),
        nnsight=_E(None, "Computed inside the MoE block's forward with no module boundary."),
        nnterp=_E(None, _NNTERP_ONLY_BOUNDARIES),
        read_only=(
            "expert ids are a discrete decision derived from the router scores; write "
            "router_logits to force or ban experts"
        ),
        dtype_kind="int",
    ),
    _spec(
        "mlp_out",
        _L,
        Width.D_MODEL,
        Role.MLP,
        """The raw output of block L's MLP or mixture-of-experts module: before any post-MLP norm,
        residual multiplier or residual addition. On a mixture-of-experts layer it is the whole
        block's output, routed experts combined plus any shared expert (the first element where the
        block returns a tuple).""",
        tl=_E(
            "blocks.{L}.mlp.hook_out",
            "TransformerBridge name. The block-level blocks.{L}.hook_mlp_out is this tensor only "
            "without sandwich norms or a residual multiplier; elsewhere it is mlp_out_post.",
        ),
        nnsight=_E("model.model.layers[{L}].mlp.output", _NNSIGHT_PATHS),
        nnterp=_E(
            "mlps_output[{L}]", "Before the post-MLP norm on sandwich-norm families, as here."
        ),
    ),
    _spec(
        "mlp_out_post",
        _L,
        Width.D_MODEL,
        Role.MLP,
        """What the MLP sublayer adds to the residual stream: mlp_out passed through the post-MLP
        norm on sandwich-norm families and scaled by the residual multiplier where one exists. On a
        model with neither, this is the same tensor as mlp_out (an alias). Sparse autoencoders
        trained on TransformerLens's block-level MLP hook of sandwich families expect this
        point.""",
        tl=_E(
            "blocks.{L}.hook_mlp_out",
            "Model-aware, like hook_attn_out: after the post-MLP norm on sandwich-norm families "
            "(a Gemma Scope MLP SAE reconstructs this point with FVU 0.26 but mlp_out with 9.8).",
        ),
        nnsight=_E(
            "model.model.layers[{L}].post_feedforward_layernorm.output",
            "Sandwich-norm families; without sandwich norms read mlp.output. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E(
            None,
            "nnterp's mlps_output is taken before the post-MLP norm; it equals this "
            "point only where no sandwich norm or multiplier exists (see equivalent_for).",
        ),
    ),
    _spec(
        "resid_post",
        _L,
        Width.D_MODEL,
        Role.RESIDUAL,
        """The residual stream leaving decoder block L, i.e. the block's output hidden state; it is
        the same tensor as resid_pre at L+1. At the last layer it is taken before the final norm
        (HF's last hidden_states entry is after it). On a multi-stream trunk it exists only with a
        stream coordinate (resid_post.L.stream-K, a slice of resid_streams).""",
        tl=_E("blocks.{L}.hook_resid_post"),
        nnsight=_E(
            "model.model.layers[{L}].output",
            "A tensor in transformers 5, where output[0] silently selects batch row 0; "
            "output[0] on older, tuple-returning versions. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("layers_output[{L}]"),
        accepts_stream=True,
    ),
    _spec(
        "final_norm",
        _T,
        Width.D_MODEL,
        Role.TRUNK,
        """The trunk's final norm applied to the last block's resid_post at every position, gain
        included: the vector the unembedding reads. HF's last output_hidden_states entry is this
        tensor. Computed once per forward pass.""",
        tl=_E(
            None,
            "ln_final.hook_normalized is normalised but before the gain (and bias), so it "
            "is not this point.",
        ),
        nnsight=_E("model.model.norm.output", _NNSIGHT_PATHS),
        nnterp=_E("ln_final.output"),
    ),
    _spec(
        "lm_head",
        _T,
        Width.VOCAB,
        Role.TRUNK,
        """The logits as the unembedding produces them: lm_head applied to final_norm, vocab wide,
        before any logit multiplier, final-logit softcap (Gemma-2) or sampling temperature. Computed
        once per forward pass.""",
        tl=_E(
            None,
            "TransformerLens returns logits from forward rather than through a hook, and "
            "applies the final softcap first on softcapped families.",
        ),
        nnsight=_E(
            "model.lm_head.output",
            "model.output.logits is after any softcap or multiplier the family applies.",
        ),
        nnterp=_E("logits", "After any softcap or multiplier the family applies."),
        read_only=(
            "the logits are the network's output, read by nothing downstream: changing them is a "
            "sampling-time logit bias rather than an intervention on the model; steer final_norm "
            "or a residual point instead"
        ),
    ),
    _spec(
        "resid_streams",
        _L,
        Width.STREAMS_X_D_MODEL,
        Role.STREAM,
        """Multi-stream (hyper-connection) trunks only: the whole residual stack leaving block L,
        [batch, seq, n_streams, d_model]. It is the stream-indexed form of resid_post:
        resid_post.L.stream-K is slice K of this tensor.""",
        tl=_E(
            "blocks.{L}.hook_out",
            "TransformerLens 3, model-aware: on DeepSeek-V4 the block hook_out is the stream "
            "stack, elsewhere it is resid_post.",
        ),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        multi_stream_only=True,
    ),
    _spec(
        "attn_stream_collapse",
        _L,
        Width.D_MODEL,
        Role.STREAM,
        """Multi-stream trunks only: the single d_model vector the attention site reads, made by
        collapsing the stream stack with the block's read weights. Taken before the pre-attention
        norm, so attn_in is this vector normalised. The single-stream analogue is resid_pre.""",
        tl=_E("blocks.{L}.attn_hc.hook_out"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        multi_stream_only=True,
    ),
    _spec(
        "mlp_stream_collapse",
        _L,
        Width.D_MODEL,
        Role.STREAM,
        """Multi-stream trunks only: the single d_model vector the MLP site reads, collapsed from
        the stream stack after the attention site has written back, before the pre-MLP norm (so
        mlp_in is this vector normalised). The single-stream analogue is resid_mid.""",
        tl=_E("blocks.{L}.mlp_hc.hook_out"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        multi_stream_only=True,
    ),
    _spec(
        "attn_stream_write",
        _L,
        Width.STREAMS,
        Role.STREAM,
        """Multi-stream trunks only: the per-token, per-stream coefficients, [batch, seq,
        n_streams], with which the attention sublayer's output is written back into each residual
        stream.""",
        tl=_E("blocks.{L}.attn_hc.hook_post"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        read_only=_NOT_STEERABLE_HC,
        multi_stream_only=True,
    ),
    _spec(
        "attn_stream_mix",
        _L,
        Width.STREAMS_SQUARED,
        Role.STREAM,
        """Multi-stream trunks only: the per-token n_streams x n_streams matrix, [batch, seq,
        n_streams, n_streams], that recombines the existing streams at the attention site. On
        DeepSeek-V4 it is Sinkhorn-normalised: columns sum to one within about 1e-6, rows only
        loosely (about 7e-2).""",
        tl=_E("blocks.{L}.attn_hc.hook_comb"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        read_only=_NOT_STEERABLE_HC,
        multi_stream_only=True,
    ),
    _spec(
        "mlp_stream_write",
        _L,
        Width.STREAMS,
        Role.STREAM,
        """Multi-stream trunks only: the per-token, per-stream coefficients, [batch, seq,
        n_streams], with which the MLP sublayer's output is written back into each residual
        stream.""",
        tl=_E("blocks.{L}.mlp_hc.hook_post"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        read_only=_NOT_STEERABLE_HC,
        multi_stream_only=True,
    ),
    _spec(
        "mlp_stream_mix",
        _L,
        Width.STREAMS_SQUARED,
        Role.STREAM,
        """Multi-stream trunks only: the per-token n_streams x n_streams matrix, [batch, seq,
        n_streams, n_streams], that recombines the streams at the MLP site; normalised like
        attn_stream_mix.""",
        tl=_E("blocks.{L}.mlp_hc.hook_comb"),
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        read_only=_NOT_STEERABLE_HC,
        multi_stream_only=True,
    ),
)

POINTS: Mapping[str, PointSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""The registry, read-only: forward order, with the multi-stream-only points last."""

_NAMES = tuple(POINTS)


def point_names() -> tuple[str, ...]:
    """All 34 point names in registry order."""
    return _NAMES


def layer_point_names() -> tuple[str, ...]:
    return tuple(s.name for s in _SPECS if s.scope is Scope.LAYER)


def trunk_point_names() -> tuple[str, ...]:
    return tuple(s.name for s in _SPECS if s.scope is Scope.TRUNK)


def hyper_connection_names() -> tuple[str, ...]:
    """The points that exist only on multi-stream (hyper-connection) trunks."""
    return tuple(s.name for s in _SPECS if s.multi_stream_only)


def stream_coordinate_names() -> tuple[str, ...]:
    """The points that take a `.stream-K` coordinate (on multi-stream trunks)."""
    return tuple(s.name for s in _SPECS if s.accepts_stream)


def writable_names() -> tuple[str, ...]:
    """Points a backend may be asked to write (steer); backends can still refuse per model."""
    return tuple(s.name for s in _SPECS if s.writable)


def is_point(name: object) -> bool:
    return isinstance(name, str) and name in POINTS


# --- unknown names --------------------------------------------------------------------------------

# Names people bring from other tools. Only exact matches (after stripping layer indices) are used,
# so a hint is never a guess between two of our points.
_SYNONYMS: Mapping[str, str] = MappingProxyType(
    {
        "embed": "embeddings",
        "embedding": "embeddings",
        "wte": "embeddings",
        "pattern": "attn_probs",
        "attn_pattern": "attn_probs",
        "attention_pattern": "attn_probs",
        "attn_weights": "attn_probs",
        "attention_weights": "attn_probs",
        "attention_probs": "attn_probs",
        "v": "value",
        "logits": "lm_head",
        "unembed": "lm_head",
        "ln_final": "final_norm",
        "mlp_post": "mlp_act",
        "neurons": "mlp_act",
        "router": "router_logits",
        "gate_logits": "router_logits",
        "expert_ids": "expert_indices",
        "topk_indices": "expert_indices",
        "topk_weights": "expert_weights",
    }
)


def _engine_key(text: str) -> str:
    """Strip layer positions so `blocks.5.hook_resid_post` and `blocks.{L}.hook_resid_post` meet."""
    text = re.sub(r"\[(\{L\}|\d+)\]", "", text)
    text = re.sub(r"(^|\.)(\{L\}|\d+)(?=\.|$)", "", text)
    return text.strip(".")


def _engine_index() -> dict[str, tuple[str, str]]:
    index: dict[str, tuple[str, str]] = {}
    tails: dict[str, set[tuple[str, str]]] = {}
    for spec in _SPECS:
        for engine in ENGINES:
            eq = spec.equivalent(engine)
            # Model-aware names (block-level hook_attn_out means different points by family) are
            # still a fair hint: the message names the engine so the reader can check the note.
            if eq.name is None:
                continue
            key = _engine_key(eq.name).lower()
            index.setdefault(key, (spec.name, engine))
            tails.setdefault(key.rpartition(".")[2], set()).add((spec.name, engine))
    # A bare last component (hook_pattern) is a hint only when it names a single point;
    # hook_in or output could be any of several.
    for tail, owners in tails.items():
        if len({point for point, _ in owners}) == 1 and tail not in POINTS:
            index.setdefault(tail, min(owners))
    return index


_ENGINE_NAMES = _engine_index()
_SEE_LIST = "run `interp points` for the 34 names"


def _unknown(name: object) -> UnknownPoint:
    if not isinstance(name, str):
        return UnknownPoint(f"a point name is a string, not {type(name).__name__}; {_SEE_LIST}")
    if not name.strip():
        return UnknownPoint(f"empty point name; {_SEE_LIST}")
    shown = name if len(name) <= 60 else name[:57] + "..."
    lowered = name.strip().lower()
    hints: list[str] = []
    if lowered in POINTS:
        hints.append(f"point names are lower case: {lowered}")
    key = _engine_key(lowered)
    if key in _SYNONYMS:
        hints.append(f"the matching point is {_SYNONYMS[key]}")
    elif key in _ENGINE_NAMES:
        point, engine = _ENGINE_NAMES[key]
        hints.append(f"that is the {_ENGINE_TITLES[engine]} name for {point}")
    head = re.split(r"[.:\[]", lowered, maxsplit=1)[0]
    if head != lowered and head in POINTS:
        hints.append(f"{head} is a point; give the layer and stream as separate coordinates")
    if not hints:
        # Cap the text difflib compares: the parser may hand over arbitrarily long input.
        near = difflib.get_close_matches(lowered[:80], _NAMES, n=3, cutoff=0.6)
        if near:
            hints.append(f"nearest points: {', '.join(near)}")
    detail = "; ".join([*hints, _SEE_LIST])
    return UnknownPoint(f"{shown!r} is not a point: {detail}")


def get_point(name: str) -> PointSpec:
    """The spec for `name`; anything else raises UnknownPoint naming the nearest points.

    Total over its input: the address parser passes arbitrary user text here.
    """
    if isinstance(name, str):
        spec = POINTS.get(name)
        if spec is not None:
            return spec
    raise _unknown(name)


# --- presence on a model --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Why:
    why: str
    instead: str | None = None

    def sentence(self) -> str:
        if not self.instead:
            return self.why
        return f"{self.why.rstrip('.')}; {self.instead}"


def layer_ranges(layers: Iterable[int]) -> str:
    """A compact layer list for messages and tables: `0-3, 7, 9-11`."""
    items = sorted(set(layers))
    parts: list[str] = []
    start = prev = None
    for layer in [*items, None]:
        if layer is not None and prev is not None and layer == prev + 1:
            prev = layer
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = layer
    return ", ".join(parts)


def _where(facts: ModelFacts, present: Callable[[int], bool]) -> list[int]:
    return [layer for layer in range(facts.n_layers) if present(layer)]


# Model-level rules: facts -> reason the point is absent everywhere, or None.
def _needs_qk_norm(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.qk_norm:
        return None
    return _Why(
        f"{facts.architecture} has no QK-norm (no per-head query/key norm), so {spec.name} "
        "does not exist",
        "there is no separate query/key point; attn_scores holds the query-key products",
    )


def _needs_no_mla(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.shared_key_value:
        return _Why(
            f"{facts.architecture} uses one projected tensor as both keys and values (K = V), "
            "carrying rotary embedding, so there is no value projection to read",
            "use attn_in (what the key/value projection reads) or z (the attention result)",
        )
    if facts.mla is None:
        return None
    return _Why(
        f"{facts.architecture} uses multi-head latent attention (MLA): values are decompressed "
        "from a shared latent and there is no per-head value projection",
        f"use z (the per-head attention output, n_heads*v_head_dim = {facts.z_width} wide)",
    )


def _needs_gated_attn(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.gated_attn_output:
        return None
    return _Why(
        f"{facts.architecture} has no attention output gate",
        "read z, the o_proj input, which has no gate multiplied in",
    )


def _needs_sequential(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if not facts.parallel_attn_mlp:
        return None
    return _Why(
        f"{facts.architecture} runs attention and MLP in parallel on the same resid_pre, so no "
        "residual state exists between them",
        "use mlp_in (the normed resid_pre the MLP reads) or resid_pre",
    )


def _needs_gated_mlp(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.gated_mlp:
        return None
    return _Why(
        f"{facts.architecture} has a plain (non-gated) MLP with a single input projection, so "
        "there is no separate linear branch",
        "use mlp_pre for that projection's output, or mlp_act after the activation",
    )


def _needs_moe(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.moe is not None and facts.moe.sparse_layers:
        return None
    return _Why(
        f"{facts.architecture} has no mixture-of-experts (routed) layers, so there is no router",
        "its dense MLP is read at mlp_pre / mlp_act / mlp_out",
    )


_SINGLE_STREAM_ANALOGUE = {
    "resid_streams": "resid_post",
    "attn_stream_collapse": "resid_pre",
    "mlp_stream_collapse": "resid_mid",
}


def _needs_streams(spec: PointSpec, facts: ModelFacts) -> _Why | None:
    if facts.n_streams > 1:
        return None
    analogue = _SINGLE_STREAM_ANALOGUE.get(spec.name)
    return _Why(
        f"{facts.architecture} has a single residual stream (n_streams=1); {spec.name} exists "
        "only on multi-stream (hyper-connection) trunks",
        f"the single-stream analogue is {analogue}"
        if analogue
        else "an ordinary residual addition has no mixing or write coefficients",
    )


# Layer-level rules: a presence predicate plus the reasons for one layer and for all layers.
@dataclass(frozen=True)
class _LayerRule:
    present: Callable[[ModelFacts, int], bool]
    at_layer: Callable[[PointSpec, ModelFacts, int], _Why]
    nowhere: Callable[[PointSpec, ModelFacts], _Why]


def _attending_instead(spec: PointSpec, facts: ModelFacts) -> str:
    where = _where(facts, facts.attends)
    tail = f"; {spec.name} exists at layers: {layer_ranges(where)}" if where else ""
    return f"use attn_in / attn_out for this mixer's input and output{tail}"


_ATTENDS = _LayerRule(
    present=lambda facts, layer: facts.attends(layer),
    at_layer=lambda spec, facts, layer: _Why(
        f"layer {layer} of {facts.architecture} is a {facts.layer_kind(layer)} layer with no "
        f"softmax attention, so {spec.name} does not exist there",
        _attending_instead(spec, facts),
    ),
    nowhere=lambda spec, facts: _Why(
        f"no layer of {facts.architecture} computes softmax attention (layer kinds: "
        f"{', '.join(sorted(set(facts.layer_kinds)))}), so {spec.name} does not exist",
        "use attn_in / attn_out for the mixers' input and output",
    ),
)


def _dense_instead(spec: PointSpec, facts: ModelFacts) -> str:
    where = _where(facts, lambda layer: not facts.is_sparse(layer))
    tail = f"; {spec.name} exists at the dense layers: {layer_ranges(where)}" if where else ""
    return f"read router_logits / expert_weights / expert_indices or mlp_out there{tail}"


def _moe_summary(facts: ModelFacts) -> str:
    moe = facts.moe
    return f"{moe.n_experts} experts, top-{moe.experts_per_token}" if moe else "routed"


_DENSE = _LayerRule(
    present=lambda facts, layer: not facts.is_sparse(layer),
    at_layer=lambda spec, facts, layer: _Why(
        f"layer {layer} of {facts.architecture} is a mixture-of-experts layer "
        f"({_moe_summary(facts)}) with no single dense hidden layer, so {spec.name} does not "
        "exist there",
        _dense_instead(spec, facts),
    ),
    nowhere=lambda spec, facts: _Why(
        f"every layer of {facts.architecture} is a mixture-of-experts layer "
        f"({_moe_summary(facts)}) with no single dense hidden layer, so {spec.name} does not exist",
        "read router_logits / expert_weights / expert_indices or mlp_out",
    ),
)

_SPARSE = _LayerRule(
    present=lambda facts, layer: facts.is_sparse(layer),
    at_layer=lambda spec, facts, layer: _Why(
        f"layer {layer} of {facts.architecture} has a dense MLP, not routed experts, so "
        f"{spec.name} does not exist there",
        f"use a sparse layer ({layer_ranges(_where(facts, facts.is_sparse))}) for {spec.name}; the "
        "dense MLP is read at mlp_act",
    ),
    # Unreachable while _needs_moe runs first, kept so the rule is complete on its own.
    nowhere=lambda spec, facts: _Why(f"{facts.architecture} has no routed layers"),
)

_MODEL_RULES: dict[str, tuple[Callable[[PointSpec, ModelFacts], _Why | None], ...]] = {
    "q_norm_in": (_needs_qk_norm,),
    "q_norm_out": (_needs_qk_norm,),
    "k_norm_in": (_needs_qk_norm,),
    "k_norm_out": (_needs_qk_norm,),
    "value": (_needs_no_mla,),
    "attn_gate": (_needs_gated_attn,),
    "resid_mid": (_needs_sequential,),
    "mlp_pre_linear": (_needs_gated_mlp,),
    "router_logits": (_needs_moe,),
    "expert_weights": (_needs_moe,),
    "expert_indices": (_needs_moe,),
    **{name: (_needs_streams,) for name in hyper_connection_names()},
}

_LAYER_RULES: dict[str, tuple[_LayerRule, ...]] = {
    **{
        name: (_ATTENDS,)
        for name in (
            "q_norm_in",
            "q_norm_out",
            "k_norm_in",
            "k_norm_out",
            "value",
            "attn_scores",
            "attn_probs",
            "z",
            "attn_gate",
        )
    },
    "mlp_pre": (_DENSE,),
    "mlp_pre_linear": (_DENSE,),
    "mlp_act": (_DENSE,),
    "router_logits": (_SPARSE,),
    "expert_weights": (_SPARSE,),
    "expert_indices": (_SPARSE,),
}


def _check_coordinates(
    spec: PointSpec, facts: ModelFacts, layer: int | None, stream: int | None
) -> None:
    """Coordinates that could never be valid for this point on this model raise outright."""
    if layer is not None:
        if spec.scope is Scope.TRUNK:
            message = f"{spec.name} takes no layer"
            raise PointUnsupported.build(
                message,
                "it is a trunk point, computed once per forward pass",
                f"Address it as {spec.name}",
            )
        if isinstance(layer, bool) or not isinstance(layer, int):
            message = f"layer must be an int, not {type(layer).__name__}"
            raise PointUnsupported.build(message)
        if not 0 <= layer < facts.n_layers:
            message = f"layer {layer} does not exist"
            raise PointUnsupported.build(
                message,
                f"{facts.architecture} has {facts.n_layers} layers",
                f"Use a layer in 0..{facts.n_layers - 1}",
            )
    if stream is not None:
        if not spec.accepts_stream:
            message = f"{spec.name} takes no stream coordinate"
            raise PointUnsupported.build(
                message,
                f"only {', '.join(stream_coordinate_names())} are indexed by stream",
                "Read the whole stack with resid_streams" if spec.multi_stream_only else None,
            )
        if isinstance(stream, bool) or not isinstance(stream, int):
            message = f"stream must be an int, not {type(stream).__name__}"
            raise PointUnsupported.build(message)
        if facts.n_streams > 1 and not 0 <= stream < facts.n_streams:
            message = f"stream {stream} does not exist"
            raise PointUnsupported.build(
                message,
                f"{facts.architecture} has {facts.n_streams} residual streams",
                f"Use a stream in 0..{facts.n_streams - 1}",
            )


def _stream_rule(spec: PointSpec, facts: ModelFacts, stream: int | None) -> _Why | None:
    if not spec.accepts_stream:
        return None
    if facts.n_streams > 1 and stream is None:
        return _Why(
            f"{facts.architecture} carries {facts.n_streams} parallel residual streams "
            f"(hyper-connections), so a bare {spec.name} would have to pick or merge them",
            f"address one stream as {spec.name}.L.stream-K (K in 0..{facts.n_streams - 1}), or "
            "read the stack with resid_streams",
        )
    if facts.n_streams <= 1 and stream is not None:
        return _Why(
            f"{facts.architecture} has a single residual stream, so a stream coordinate does not "
            "apply",
            f"drop the .stream-{stream} coordinate",
        )
    return None


def _why_absent(
    spec: PointSpec, facts: ModelFacts, layer: int | None, stream: int | None
) -> _Why | None:
    _check_coordinates(spec, facts, layer, stream)
    found = _stream_rule(spec, facts, stream)
    if found is not None:
        return found
    for model_rule in _MODEL_RULES.get(spec.name, ()):
        found = model_rule(spec, facts)
        if found is not None:
            return found
    # With layer=None each layer rule is checked on its own; no point has two layer rules, so
    # "some layer satisfies each rule" is the same as "some layer has the point".
    for rule in _LAYER_RULES.get(spec.name, ()):
        if layer is not None:
            if not rule.present(facts, layer):
                return rule.at_layer(spec, facts, layer)
        elif not any(rule.present(facts, each) for each in range(facts.n_layers)):
            return rule.nowhere(spec, facts)
    return None


def absence_reason(
    name: str, facts: ModelFacts, layer: int | None = None, stream: int | None = None
) -> str | None:
    """None when the model has the point (at `layer`, or at some layer), else a sentence why not.

    On a multi-stream trunk the bare resid_pre / resid_mid / resid_post are absent (a stream
    coordinate is required); a stream coordinate on a single-stream trunk is absent too. A layer
    outside the model, a layer on a trunk point or a stream on a point that takes none raises
    PointUnsupported: those addresses are malformed for the model, not merely missing.
    """
    return get_point(name).absence_reason(facts, layer, stream)


def require_point(
    name: str, facts: ModelFacts, layer: int | None = None, stream: int | None = None
) -> PointSpec:
    """The spec when the model has the point, else PointUnsupported: what, why, what instead."""
    spec = get_point(name)
    found = _why_absent(spec, facts, layer, stream)
    if found is None:
        return spec
    where = spec.name if layer is None else f"{spec.name} at layer {layer}"
    if stream is not None:
        where += f" stream {stream}"
    message = f"{where} is not available on {facts.architecture}"
    instead = found.instead and found.instead[0].upper() + found.instead[1:]
    raise PointUnsupported.build(message, found.why, instead)


def _reachable(spec: PointSpec, facts: ModelFacts) -> bool:
    # On a multi-stream trunk the resid points are reachable through a stream coordinate.
    stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
    return _why_absent(spec, facts, None, stream) is None


def points_for(facts: ModelFacts) -> tuple[PointSpec, ...]:
    """The points this model has at some layer (or at trunk level), in registry order.

    On a multi-stream trunk resid_pre / resid_mid / resid_post are listed because their
    `.stream-K` forms exist, even though the bare forms are refused.
    """
    return tuple(spec for spec in _SPECS if _reachable(spec, facts))


# --- model-aware engine names ---------------------------------------------------------------------


def _plain_sublayers(facts: ModelFacts) -> bool:
    """No post-sublayer norm and no residual multiplier: *_out and *_out_post are one tensor."""
    return not facts.sandwich_norms and facts.residual_multiplier in (None, 1, 1.0)


def equivalent_for(name: str, engine: str, facts: ModelFacts) -> Equivalent:
    """The engine's name for the point on this particular model.

    Resolves the model-aware cases the static table can only describe: block-level hooks that
    mean different points by family, aliases that hold only without sandwich norms, and points
    the model lacks altogether.
    """
    spec = get_point(name)
    base = spec.equivalent(engine)
    if not _reachable(spec, facts):
        stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
        reason = spec.absence_reason(facts, None, stream)
        return Equivalent(None, f"the point is absent on this model: {reason}")
    plain = _plain_sublayers(facts)
    if engine == "transformer_lens":
        if name == "embeddings" and facts.embedding_multiplier in (None, 1, 1.0):
            return Equivalent("hook_embed", "Equal here: the model has no embedding multiplier.")
        if name in ("attn_out", "mlp_out") and plain:
            block = "hook_attn_out" if name == "attn_out" else "hook_mlp_out"
            return Equivalent(
                base.name,
                f"blocks.{{L}}.{block} is the same tensor on this model (no sandwich norm or "
                "residual multiplier).",
            )
    if engine == "nnterp" and name in ("attn_out_post", "mlp_out_post") and plain:
        accessor = "attentions_output[{L}]" if name == "attn_out_post" else "mlps_output[{L}]"
        return Equivalent(accessor, "Alias on this model: no sandwich norm or residual multiplier.")
    if engine == "nnsight":
        if name == "attn_out_post" and plain:
            return Equivalent(
                "model.model.layers[{L}].self_attn.output[0]", "Alias of attn_out here."
            )
        if name == "mlp_out_post" and plain:
            return Equivalent("model.model.layers[{L}].mlp.output", "Alias of mlp_out here.")
        if name == "resid_mid" and facts.sandwich_norms:
            return Equivalent(
                "model.model.layers[{L}].pre_feedforward_layernorm.input",
                "Sandwich-norm families name the pre-MLP norm pre_feedforward_layernorm.",
            )
    return base
