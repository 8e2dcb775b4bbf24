"""The registry: the 34 standardized points, defined once.

Each row says where the point sits in the forward pass (a paragraph precise enough to implement a
backend from), how wide it is, whether it can be written (steered), and what TransformerLens,
nnsight and nnterp call the same tensor. The row type and its vocabulary are in
`interp_core.point_spec`; docs and the cheat sheet are generated from this table, and nothing
else restates these definitions. Most of the module is the table itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from interp_core.point_spec import Equivalent, PointSpec, Role, Scope, Width
from interp_core.presence import STREAM_COORDINATE_POINTS

__all__ = [
    "POINTS",
    "hyper_connection_names",
    "is_point",
    "layer_point_names",
    "point_names",
    "stream_coordinate_names",
    "trunk_point_names",
    "writable_names",
]

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
        accepts_stream=name in STREAM_COORDINATE_POINTS,
        dtype_kind=dtype_kind,
        transformer_lens=tl,
        nnsight=nnsight,
        nnterp=nnterp,
    )


_T, _L = Scope.TRUNK, Scope.LAYER
_E = Equivalent


def _stream_spec(
    name: str, width: Width, definition: str, *, tl: Equivalent, read_only: str | None = None
) -> PointSpec:
    """A multi-stream-only row: per layer, reached by TransformerLens alone (nnsight and nnterp
    have no boundary for a hyper-connection's internal returns)."""
    return _spec(
        name,
        _L,
        width,
        Role.STREAM,
        definition,
        tl=tl,
        nnsight=_E(None, _NO_HC_ENGINES),
        nnterp=_E(None, _NO_HC_ENGINES),
        read_only=read_only,
        multi_stream_only=True,
    )


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
        tensor as resid_post at L-1. On a multi-stream trunk (hyper-connections, AltUp) there is
        no single residual vector, so the point exists only with a stream coordinate,
        resid_pre.L.stream-K; the whole stack is resid_streams.""",
        tl=_E("blocks.{L}.hook_resid_pre"),
        nnsight=_E(
            "model.model.layers[{L}].input",
            "The first positional argument, or the hidden_states keyword. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("layers_input[{L}]"),
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
        only, and not on layers that reuse another layer's keys (KV sharing: Gemma-3n, -4).""",
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
        only, and not on layers that reuse another layer's keys (KV sharing: Gemma-3n, -4).""",
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
        flattened to n_kv_heads*head_dim with grouped-query heads unrepeated (the layer's own
        head count and width where they vary by layer, as on Gemma-4). Where the values are
        normalised after their projection (Gemma-3n's and -4's weightless v_norm; on Gemma-4's
        layers whose keys double as values, over k_proj's output) it is that norm's output,
        what attention mixes. Absent on multi-head latent attention (MLA: DeepSeek-V2/V3, MiniCPM3),
        which decompresses values from a shared latent and has no per-head value projection to
        read, and on layers that reuse another layer's keys and values (KV sharing: Gemma-3n, -4),
        whose attention mixes the source layer's value.""",
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
        on families with sinks, are not columns of this tensor. On a layer that reuses an earlier
        layer's keys and values (Gemma-3n's KV sharing) the keys are that layer's, against this
        layer's queries. Softmax-attention layers with one key per token only: absent on
        DeepSeek-V4's compressed (CSA/HCA) layers, whose keys are the window's tokens followed by
        compressed entries.""",
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
        renormalised. Softmax-attention layers with one key per token only; linear-attention and
        state-space layers have no such matrix, and DeepSeek-V4's compressed (CSA/HCA) layers
        attend to compressed entries beside the window's tokens, so theirs is no token-by-token
        matrix.""",
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
        families the output gate has already been applied. On DeepSeek-V4's compressed (CSA/HCA)
        layers the sum runs over the window's tokens and the compressed entries. Softmax-attention
        layers only.""",
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
    ),
    _spec(
        "mlp_in",
        _L,
        Width.D_MODEL,
        Role.MLP,
        """The hidden-state input of block L's MLP (or mixture-of-experts) module as it receives
        it: the pre-MLP norm of resid_mid, gain and bias applied. On parallel-block families it is
        the normed resid_pre the MLP reads. Absent where routed experts run beside a dense MLP,
        each reading resid_mid through its own norm (Gemma-4): no single tensor is the input.""",
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
        mixture-of-experts layers, which have no single hidden layer, except where a dense MLP
        runs beside the experts (Gemma-4): there it is that dense MLP's.""",
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
        and on mixture-of-experts layers (except beside a dense MLP, as for mlp_pre).""",
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
        them all), except beside a dense MLP, as for mlp_pre.""",
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
        block returns a tuple). Absent where the block itself sums the experts with a second MLP
        (Granite-4.0-H's shared_mlp, Gemma-4's dense MLP): no module returns the sum.""",
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
        (HF's last hidden_states entry is after it). On Gemma-4 it includes the write of the
        block's per-layer input (added after the MLP) and the block's learned output scalar,
        which scales the whole sum, so it is not resid_mid plus mlp_out_post there. On a
        multi-stream trunk it exists only with a stream coordinate (resid_post.L.stream-K, a slice
        of resid_streams).""",
        tl=_E("blocks.{L}.hook_resid_post"),
        nnsight=_E(
            "model.model.layers[{L}].output",
            "A tensor in transformers 5, where output[0] silently selects batch row 0; "
            "output[0] on older, tuple-returning versions. " + _NNSIGHT_PATHS,
        ),
        nnterp=_E("layers_output[{L}]"),
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
    _stream_spec(
        "resid_streams",
        Width.STREAMS_X_D_MODEL,
        """Multi-stream trunks only (hyper-connections; Gemma-3n's AltUp streams, stacked
        stream-last here though the model keeps them stream-first): the whole residual stack
        leaving block L, [batch, seq, n_streams, d_model]. It is the stream-indexed form of
        resid_post: resid_post.L.stream-K is slice K of this tensor.""",
        tl=_E(
            "blocks.{L}.hook_out",
            "TransformerLens 3, model-aware: on DeepSeek-V4 the block hook_out is the stream "
            "stack, elsewhere it is resid_post.",
        ),
    ),
    _stream_spec(
        "attn_stream_collapse",
        Width.D_MODEL,
        """Multi-stream trunks only: the single d_model vector the attention site reads, made by
        collapsing the stream stack with the block's read weights. Taken before the pre-attention
        norm, so attn_in is this vector normalised. The single-stream analogue is resid_pre.""",
        tl=_E("blocks.{L}.attn_hc.hook_out"),
    ),
    _stream_spec(
        "mlp_stream_collapse",
        Width.D_MODEL,
        """Multi-stream trunks only: the single d_model vector the MLP site reads, collapsed from
        the stream stack after the attention site has written back, before the pre-MLP norm (so
        mlp_in is this vector normalised). The single-stream analogue is resid_mid.""",
        tl=_E("blocks.{L}.mlp_hc.hook_out"),
    ),
    _stream_spec(
        "attn_stream_write",
        Width.STREAMS,
        """Multi-stream trunks only: the per-token, per-stream coefficients, [batch, seq,
        n_streams], with which the attention sublayer's output is written back into each residual
        stream.""",
        tl=_E("blocks.{L}.attn_hc.hook_post"),
        read_only=_NOT_STEERABLE_HC,
    ),
    _stream_spec(
        "attn_stream_mix",
        Width.STREAMS_SQUARED,
        """Multi-stream trunks only: the per-token n_streams x n_streams matrix, [batch, seq,
        n_streams, n_streams], that recombines the existing streams at the attention site. On
        DeepSeek-V4 it is Sinkhorn-normalised: columns sum to one within about 1e-6, rows only
        loosely (about 7e-2).""",
        tl=_E("blocks.{L}.attn_hc.hook_comb"),
        read_only=_NOT_STEERABLE_HC,
    ),
    _stream_spec(
        "mlp_stream_write",
        Width.STREAMS,
        """Multi-stream trunks only: the per-token, per-stream coefficients, [batch, seq,
        n_streams], with which the MLP sublayer's output is written back into each residual
        stream.""",
        tl=_E("blocks.{L}.mlp_hc.hook_post"),
        read_only=_NOT_STEERABLE_HC,
    ),
    _stream_spec(
        "mlp_stream_mix",
        Width.STREAMS_SQUARED,
        """Multi-stream trunks only: the per-token n_streams x n_streams matrix, [batch, seq,
        n_streams, n_streams], that recombines the streams at the MLP site; normalised like
        attn_stream_mix.""",
        tl=_E("blocks.{L}.mlp_hc.hook_comb"),
        read_only=_NOT_STEERABLE_HC,
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
