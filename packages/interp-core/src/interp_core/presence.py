"""Does a model have a point? Every answer is derived from `ModelFacts` alone.

A rule reads the model's traits (QK-norm, MLA, gated MLP, routed layers, layer kinds, residual
streams) and either lets the point through or returns an `Absence`: why the point is missing and
which point to read instead. Rules come in two kinds: model-level (the point is absent on every
layer) and layer-level (absent on some layers, e.g. attention points on recurrent layers).
Coordinates that could never be valid (a layer outside the model, a stream on a point that takes
none) raise instead of answering.

The rules know a point only through `PointLike`, the few attributes they read, so they need no
registry: `interp_core.point_spec.PointSpec` asks them, and the registry's table is built on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from interp_core.errors import PointUnsupported

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = [
    "STREAM_COORDINATE_POINTS",
    "Absence",
    "PointLike",
    "layer_ranges",
    "reachable",
    "why_absent",
]

# The points a `.stream-K` coordinate applies to on a multi-stream trunk: the residual stream at
# each block boundary. The registry's `accepts_stream` is read from here.
STREAM_COORDINATE_POINTS = ("resid_pre", "resid_mid", "resid_post")


class PointLike(Protocol):
    """What the rules read of a point; `PointSpec` satisfies it."""

    @property
    def name(self) -> str: ...

    @property
    def is_trunk(self) -> bool: ...

    @property
    def accepts_stream(self) -> bool: ...

    @property
    def multi_stream_only(self) -> bool: ...


@dataclass(frozen=True)
class Absence:
    """Why a point is missing on a model, and which point to read instead (None: no stand-in)."""

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
_ModelRule: TypeAlias = "Callable[[PointLike, ModelFacts], Absence | None]"


def _absent_unless(
    has: Callable[[ModelFacts], bool], why: Callable[[PointLike, ModelFacts], str], instead: str
) -> _ModelRule:
    """The rule of a point that needs one trait: absent for `why`, read `instead`, without it."""

    def rule(spec: PointLike, facts: ModelFacts) -> Absence | None:
        return None if has(facts) else Absence(why(spec, facts), instead)

    return rule


def _needs_qk_norm(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if facts.qk_norm:
        return None
    if facts.family.qk_norm_after_rope:
        return Absence(
            f"{facts.architecture} normalises each query and key head after rotary embedding, "
            f"so no tensor is the norm's input before rotary, which {spec.name} names",
            "read attn_scores (built from the normed, rotated q and k) or attn_in",
        )
    return Absence(
        f"{facts.architecture} has no QK-norm (no per-head query/key norm), so {spec.name} "
        "does not exist",
        "there is no separate query/key point; attn_scores holds the query-key products",
    )


def _needs_no_mla(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if facts.shared_key_value:
        return Absence(
            f"{facts.architecture} uses one projected tensor as both keys and values (K = V), "
            "carrying rotary embedding, so there is no value projection to read",
            "use attn_in (what the key/value projection reads) or z (the attention result)",
        )
    if facts.mla is None:
        return None
    return Absence(
        f"{facts.architecture} uses multi-head latent attention (MLA): values are decompressed "
        "from a shared latent and there is no per-head value projection",
        f"use z (the per-head attention output, n_heads*v_head_dim = {facts.z_width} wide)",
    )


_needs_unclipped_value = _absent_unless(
    lambda facts: facts.qkv_clip is None,
    lambda spec, facts: (
        f"{facts.architecture} clamps its fused q/k/v projection's output to "
        f"±{facts.qkv_clip:g} (clip_qkv) before attention, so the values attention mixes are no "
        "module's output, and a write at the projection would be clamped again"
    ),
    "read z (the probability-weighted clamped values, per head) or attn_in",
)

_needs_fixed_heads = _absent_unless(
    lambda facts: not facts.routed_attention,
    lambda spec, facts: (
        f"{facts.architecture} routes each token to its own attention experts, whose query and "
        f"output projections make the heads, so head h belongs to a different expert at each "
        f"token and {spec.name} has no per-head meaning (its heads are not fixed units)"
    ),
    "read attn_in / attn_out for the attention's input and output, or value (the shared "
    "K/V heads' values)",
)

_needs_gated_attn = _absent_unless(
    lambda facts: facts.gated_attn_output,
    lambda spec, facts: f"{facts.architecture} has no attention output gate",
    "read z, the o_proj input, which has no gate multiplied in",
)

_needs_sequential = _absent_unless(
    lambda facts: not facts.parallel_attn_mlp,
    lambda spec, facts: (
        f"{facts.architecture} runs attention and MLP in parallel on the same resid_pre, so no "
        "residual state exists between them"
    ),
    "use mlp_in (the normed resid_pre the MLP reads) or resid_pre",
)


_NORMED_SKIP_READS = {
    "resid_mid": (
        "the attention sublayer's result is alpha times attn_in (its normed input) plus beta "
        "times attn_out, which replaces the residual instead of adding to it, so no state is "
        "resid_pre plus an attention write",
        "read attn_in and attn_out (the pre-MLP norm reads alpha*attn_in + beta*attn_out), "
        "mlp_in (that norm's output), or resid_pre / resid_post",
    ),
    "attn_out_post": (
        "the block leaves alpha times attn_in (the normed input) plus beta times attn_out, "
        "which replaces the residual rather than adding to it, so no tensor is what attention "
        "adds to the residual stream",
        "read attn_out (the attention's output before beta) and attn_in",
    ),
    "mlp_out_post": (
        "the block leaves alpha times mlp_in (the normed input) plus beta times mlp_out as "
        "resid_post, which replaces the residual rather than adding to it, so no tensor is what "
        "the MLP adds to the residual stream",
        "read mlp_out (the MLP's output before beta), mlp_in and resid_post",
    ),
}


_ALTUP_READS = {
    "resid_mid": (
        "the block adds the post-normed attention output to the active stream's AltUp "
        "prediction, adds the LAuReL branch and scales the sum by 1/sqrt(2), then the MLP's "
        "write and AltUp's correct step follow, so no state is resid_pre plus an attention "
        "write on any stream",
        "read mlp_in (the pre-MLP norm of that scaled sum), attn_out, path.model.layers.<L>.laurel "
        "(the LAuReL branch plus its input), or resid_pre / resid_post with .stream-K",
    ),
    "attn_out_post": (
        "the post-attention norm's output is summed with the active stream's prediction and "
        "the LAuReL branch and the sum scaled by 1/sqrt(2), and AltUp's correct step then "
        "spreads the block's result over every stream, so no tensor is what attention adds to "
        "a residual stream",
        "read attn_out (before the post-attention norm) or "
        "path.model.layers.<L>.post_attention_layernorm (after it)",
    ),
    "mlp_out_post": (
        "the post-MLP norm's output is added to the block's LAuReL-scaled mid state, and "
        "AltUp's correct step then spreads that result over every stream with learned "
        "per-token coefficients, so no tensor is what the MLP adds to a residual stream",
        "read mlp_out (before the post-MLP norm) or "
        "path.model.layers.<L>.post_feedforward_layernorm (after it)",
    ),
}


def _needs_plain_stream_update(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if facts.altup_active_stream is None:
        return None
    why, instead = _ALTUP_READS[spec.name]
    return Absence(f"{facts.architecture} is an AltUp trunk: {why}", instead)


def _needs_hyper_connections(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if facts.altup_active_stream is None:
        return None
    return Absence(
        f"{facts.architecture}'s {facts.n_streams} residual streams are AltUp's, not "
        f"hyper-connections: each block predicts every stream from all of them, runs attention "
        f"and the MLP on stream {facts.altup_active_stream}'s prediction and corrects every "
        f"stream with coefficients routed from the active one, so there is no collapse, write "
        f"or mix tensor for {spec.name} to name",
        "read resid_pre.L.stream-K / resid_post.L.stream-K or resid_streams, and attn_in "
        "(the normed active prediction attention reads)",
    )


def _needs_additive_residual(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if not facts.normed_skip:
        return None
    why, instead = _NORMED_SKIP_READS[spec.name]
    return Absence(
        f"{facts.architecture}'s skip path carries each sublayer's normed input, not the "
        f"residual: {why}",
        instead,
    )


_needs_single_mixer = _absent_unless(
    lambda facts: not facts.ssm_beside_attention,
    lambda spec, facts: (
        f"{facts.architecture} runs a Mamba-2 mixer beside the attention in every layer and "
        "adds attn_out × attention_out_multiplier + the mixer's output × ssm_out_multiplier to "
        "the residual, summed inside the decoder block, so no module returns that write"
    ),
    "read attn_out for the attention's own output, path.model.layers.<L>.mamba for the "
    "Mamba-2 mixer's, or resid_mid minus resid_pre for their scaled sum",
)

_needs_two_sublayers = _absent_unless(
    lambda facts: not facts.single_sublayer,
    lambda spec, facts: (
        f"every layer of {facts.architecture} is a single sublayer (a Mamba-2 mixer, attention, "
        "an MLP or a mixture of experts) behind one norm and one residual add, so no residual "
        f"state lies between two sublayers, which {spec.name} names"
    ),
    "read resid_pre (the layer's input) and resid_post (resid_pre plus the layer's one "
    "write: attn_out on mixer layers, mlp_out on MLP layers)",
)

_needs_gated_mlp = _absent_unless(
    lambda facts: facts.gated_mlp,
    lambda spec, facts: (
        f"{facts.architecture} has a plain (non-gated) MLP with a single input projection, so "
        "there is no separate linear branch"
    ),
    "use mlp_pre for that projection's output, or mlp_act after the activation",
)

_needs_moe = _absent_unless(
    lambda facts: facts.moe is not None and bool(facts.moe.sparse_layers),
    lambda spec, facts: (
        f"{facts.architecture} has no mixture-of-experts (routed) layers, so there is no router"
    ),
    "its dense MLP is read at mlp_pre / mlp_act / mlp_out",
)


_SINGLE_STREAM_ANALOGUE = {
    "resid_streams": "resid_post",
    "attn_stream_collapse": "resid_pre",
    "mlp_stream_collapse": "resid_mid",
}


def _needs_streams(spec: PointLike, facts: ModelFacts) -> Absence | None:
    if facts.n_streams > 1:
        return _needs_hyper_connections(spec, facts) if spec.name != "resid_streams" else None
    analogue = _SINGLE_STREAM_ANALOGUE.get(spec.name)
    return Absence(
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
    at_layer: Callable[[PointLike, ModelFacts, int], Absence]
    nowhere: Callable[[PointLike, ModelFacts], Absence]


def _present_layers(spec: PointLike, facts: ModelFacts) -> list[int]:
    """The layers where every layer rule of `spec` lets it through."""
    rules = _LAYER_RULES.get(spec.name, ())
    return _where(facts, lambda layer: all(rule.present(facts, layer) for rule in rules))


def _exists_tail(spec: PointLike, where: list[int], which: str = "layers") -> str:
    """What a refusal adds to say where the point does exist ("" when nowhere)."""
    return f"; {spec.name} exists at {which}: {layer_ranges(where)}" if where else ""


def _exists_at(spec: PointLike, facts: ModelFacts) -> str:
    return _exists_tail(spec, _present_layers(spec, facts))


def _mlp_kind(facts: ModelFacts, layer: int) -> str:
    return "mixture-of-experts" if facts.is_sparse(layer) else "dense MLP"


# Single-sublayer trunks (Nemotron-H): a layer is its token mixer or its MLP, never both.
_HAS_MIXER = _LayerRule(
    present=lambda facts, layer: facts.has_mixer(layer),
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} is a {_mlp_kind(facts, layer)} layer: its one "
        f"sublayer is the MLP, with no token mixer, so {spec.name} does not exist there",
        f"read mlp_in / mlp_out for that sublayer{_exists_at(spec, facts)}",
    ),
    nowhere=lambda spec, facts: Absence(
        f"no layer of {facts.architecture} has a token mixer, so {spec.name} does not exist",
        "read mlp_in / mlp_out for the layers' MLPs",
    ),
)

_HAS_MLP = _LayerRule(
    present=lambda facts, layer: facts.has_mlp(layer),
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} is a {facts.layer_kind(layer)} layer: its one "
        f"sublayer is the token mixer, with no MLP, so {spec.name} does not exist there",
        f"read attn_in / attn_out for that mixer{_exists_at(spec, facts)}",
    ),
    nowhere=lambda spec, facts: Absence(
        f"no layer of {facts.architecture} has an MLP, so {spec.name} does not exist",
        "read attn_in / attn_out for the layers' mixers",
    ),
)


def _attending_instead(spec: PointLike, facts: ModelFacts) -> str:
    tail = _exists_tail(spec, _where(facts, facts.attends))
    return f"use attn_in / attn_out for this mixer's input and output{tail}"


_ATTENDS = _LayerRule(
    present=lambda facts, layer: facts.attends(layer),
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} is a {facts.layer_kind(layer)} layer with no "
        f"softmax attention, so {spec.name} does not exist there",
        _attending_instead(spec, facts),
    ),
    nowhere=lambda spec, facts: Absence(
        f"no layer of {facts.architecture} computes softmax attention (layer kinds: "
        f"{', '.join(sorted(set(facts.layer_kinds)))}), so {spec.name} does not exist",
        "use attn_in / attn_out for the mixers' input and output",
    ),
)


_COMPRESSED_NAMES = {
    "compressed_sparse": "compressed sparse attention (CSA)",
    "heavily_compressed": "heavily compressed attention (HCA)",
}


def _token_keys_absence(spec: PointLike, facts: ModelFacts, layer: int) -> Absence:
    if not facts.attends(layer):
        return _ATTENDS.at_layer(spec, facts, layer)
    kind = facts.layer_kind(layer)
    picked = (
        ", of which each query keeps the top-k its lightning indexer scores highest"
        if kind == "compressed_sparse"
        else ""
    )
    tail = _exists_tail(spec, _where(facts, facts.attends_tokens_only))
    return Absence(
        f"layer {layer} of {facts.architecture} is a {_COMPRESSED_NAMES.get(kind, kind)} layer: "
        f"its queries attend to a sliding window of tokens followed by compressed entries (one "
        f"per {facts.compress_rate(layer)} tokens{picked}), so its attention matrix has no "
        f"key-per-token axis and {spec.name}, a [batch, heads, query, key token] matrix, does "
        "not exist there",
        "read z (each head's attention-weighted sum over window tokens and compressed entries) "
        f"or attn_out{tail}",
    )


# Attention matrices need one key per token: absent on non-attending and compressed layers.
_TOKEN_KEYS = _LayerRule(
    present=lambda facts, layer: facts.attends_tokens_only(layer),
    at_layer=_token_keys_absence,
    nowhere=lambda spec, facts: (
        _ATTENDS.nowhere(spec, facts)
        if not any(facts.attends(each) for each in range(facts.n_layers))
        else Absence(
            f"every attending layer of {facts.architecture} attends to compressed entries "
            f"beside its window tokens, so {spec.name} (one key per token) does not exist",
            "read z or attn_out",
        )
    ),
)


def _own_kv(facts: ModelFacts, layer: int) -> bool:
    return facts.attends(layer) and not facts.shares_kv(layer)


def _shared_kv_absence(spec: PointLike, facts: ModelFacts, layer: int) -> Absence:
    source = facts.kv_source(layer)
    return Absence(
        f"layer {layer} of {facts.architecture} projects no keys or values: its attention "
        f"reads those layer {source} computed (KV sharing), so {spec.name} does not exist there",
        f"read {spec.name} at layer {source}, the very tensor this layer's attention uses; "
        "attn_scores, attn_probs and z here are this layer's own",
    )


def _own_kv_nowhere(spec: PointLike, facts: ModelFacts) -> Absence:
    sharing = _where(facts, lambda layer: facts.attends(layer) and facts.shares_kv(layer))
    if not sharing:
        return _ATTENDS.nowhere(spec, facts)
    return _shared_kv_absence(spec, facts, sharing[0])


# Softmax attention that projects its own keys and values (not Gemma-3n's or -4's KV-sharing
# layers).
_ATTENDS_OWN_KV = _LayerRule(
    present=_own_kv,
    at_layer=lambda spec, facts, layer: (
        _ATTENDS.at_layer(spec, facts, layer)
        if not facts.attends(layer)
        else _shared_kv_absence(spec, facts, layer)
    ),
    nowhere=_own_kv_nowhere,
)


def _dense_instead(spec: PointLike, facts: ModelFacts) -> str:
    where = _where(facts, lambda layer: facts.has_mlp(layer) and not facts.is_sparse(layer))
    tail = _exists_tail(spec, where, "the dense layers")
    return f"read router_logits / expert_weights / expert_indices or mlp_out there{tail}"


def _moe_summary(facts: ModelFacts) -> str:
    moe = facts.moe
    return f"{moe.n_experts} experts, top-{moe.experts_per_token}" if moe else "routed"


# Gemma-4 runs its dense MLP beside the experts on routed layers too: its neurons exist there.
_DENSE = _LayerRule(
    present=lambda facts, layer: not facts.is_sparse(layer) or facts.dense_beside_experts,
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} is a mixture-of-experts layer "
        f"({_moe_summary(facts)}) with no single dense hidden layer, so {spec.name} does not "
        "exist there",
        _dense_instead(spec, facts),
    ),
    nowhere=lambda spec, facts: Absence(
        f"every {'MLP ' if facts.single_sublayer else ''}layer of {facts.architecture} is a "
        f"mixture-of-experts layer ({_moe_summary(facts)}) with no single dense hidden layer, so "
        f"{spec.name} does not exist",
        "read router_logits / expert_weights / expert_indices or mlp_out",
    ),
)

_SPARSE = _LayerRule(
    present=lambda facts, layer: facts.is_sparse(layer),
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} has a dense MLP, not routed experts, so "
        f"{spec.name} does not exist there",
        f"use a sparse layer ({layer_ranges(_where(facts, facts.is_sparse))}) for {spec.name}; the "
        "dense MLP is read at mlp_act",
    ),
    # Unreachable while _needs_moe runs first, kept so the rule is complete on its own.
    nowhere=lambda spec, facts: Absence(f"{facts.architecture} has no routed layers"),
)


def _plain_gate_instead(spec: PointLike, facts: ModelFacts) -> str:
    tail = _exists_tail(spec, _where(facts, lambda layer: facts.sparsity_at(layer) == 0.0))
    return (
        "read mlp_act (the sparse activation times up, as down_proj receives it), "
        f"mlp_pre_linear, or path.model.layers.<L>.mlp.gate_proj for the raw gate projection{tail}"
    )


_PLAIN_GATE = _LayerRule(
    present=lambda facts, layer: facts.sparsity_at(layer) == 0.0,
    at_layer=lambda spec, facts, layer: Absence(
        f"layer {layer} of {facts.architecture} sparsifies its MLP gate before the activation "
        f"(gaussian top-k at {facts.sparsity_at(layer):g}: only gate_proj outputs above their "
        "mean plus a multiple of their standard deviation pass, shifted down by that cutoff), so "
        f"the gate_proj output is not what the activation reads and {spec.name} does not exist "
        "there",
        _plain_gate_instead(spec, facts),
    ),
    nowhere=lambda spec, facts: Absence(
        f"every layer of {facts.architecture} sparsifies its MLP gate before the activation, so "
        f"{spec.name} does not exist",
        _plain_gate_instead(spec, facts),
    ),
)


def _whole_mlp_module(facts: ModelFacts, layer: int) -> bool:
    inline = facts.family.inline_shared_mlp or facts.dense_beside_experts
    return not inline or not facts.is_sparse(layer)


def _whole_mlp_write(facts: ModelFacts, layer: int) -> bool:
    # Gemma-4's post-MLP norm returns the normed sum of both MLPs: the write exists there.
    return not facts.family.inline_shared_mlp or not facts.is_sparse(layer)


def _inline_sum_instead(spec: PointLike, facts: ModelFacts) -> str:
    present = _whole_mlp_write if spec.name == "mlp_out_post" else _whole_mlp_module
    tail = _exists_tail(
        spec, _where(facts, lambda layer: present(facts, layer)), "the dense layers"
    )
    if facts.dense_beside_experts:
        return (
            "read mlp_out_post (the post-MLP norm of that sum: what the MLP sublayer adds to the "
            "residual), or path.model.layers.<L>.mlp and path.model.layers.<L>.experts for the "
            f"two terms before their norms{tail}"
        )
    return (
        "read resid_mid and resid_post (their difference is the MLP's residual write), or "
        "path.model.layers.<L>.block_sparse_moe and path.model.layers.<L>.shared_mlp for the "
        f"two terms{tail}"
    )


def _inline_sum_why(facts: ModelFacts) -> str:
    if facts.dense_beside_experts:
        return (
            "runs routed experts beside its dense MLP and normalises and sums the two outputs "
            "inside the decoder block, so no module returns the MLP's output and the backends "
            "have no tensor to read"
        )
    return (
        "adds its routed experts (block_sparse_moe) and its shared MLP (shared_mlp) inside the "
        "decoder block, so no module returns the MLP's output and the backends have no tensor "
        "to read"
    )


def _one_reason_rule(
    present: Callable[[ModelFacts, int], bool],
    why: Callable[[ModelFacts], str],
    instead: Callable[[PointLike, ModelFacts], str],
) -> _LayerRule:
    """A layer rule whose reason is the same on one layer and on all: `why` the layer lacks it."""
    return _LayerRule(
        present=present,
        at_layer=lambda spec, facts, layer: Absence(
            f"layer {layer} of {facts.architecture} {why(facts)}; {spec.name} does not exist there",
            instead(spec, facts),
        ),
        nowhere=lambda spec, facts: Absence(
            f"every layer of {facts.architecture} {why(facts)}; {spec.name} does not exist",
            instead(spec, facts),
        ),
    )


_WHOLE_MLP = _one_reason_rule(_whole_mlp_module, _inline_sum_why, _inline_sum_instead)
_WHOLE_MLP_WRITE = _one_reason_rule(_whole_mlp_write, _inline_sum_why, _inline_sum_instead)


def _one_mlp_input(facts: ModelFacts, layer: int) -> bool:
    return not (facts.dense_beside_experts and facts.is_sparse(layer))


_TWO_MLP_INPUTS = (
    "reads resid_mid into two MLPs through two norms (pre_feedforward_layernorm for the dense "
    "MLP, pre_feedforward_layernorm_2 for the routed experts; the router reads resid_mid "
    "itself), so no single tensor is the MLP's input"
)
_TWO_MLP_INPUTS_INSTEAD = (
    "read resid_mid, or path.model.layers.<L>.pre_feedforward_layernorm and "
    "path.model.layers.<L>.pre_feedforward_layernorm_2 for the two inputs"
)
_SINGLE_MLP_INPUT = _one_reason_rule(
    _one_mlp_input, lambda facts: _TWO_MLP_INPUTS, lambda spec, facts: _TWO_MLP_INPUTS_INSTEAD
)

_MODEL_RULES: dict[str, tuple[_ModelRule, ...]] = {
    "q_norm_in": (_needs_qk_norm,),
    "q_norm_out": (_needs_qk_norm,),
    "k_norm_in": (_needs_qk_norm,),
    "k_norm_out": (_needs_qk_norm,),
    "value": (_needs_no_mla, _needs_unclipped_value),
    "attn_gate": (_needs_gated_attn,),
    "resid_mid": (
        _needs_sequential,
        _needs_additive_residual,
        _needs_two_sublayers,
        _needs_plain_stream_update,
    ),
    "attn_out_post": (_needs_additive_residual, _needs_single_mixer, _needs_plain_stream_update),
    "mlp_out_post": (_needs_additive_residual, _needs_plain_stream_update),
    "attn_scores": (_needs_fixed_heads,),
    "attn_probs": (_needs_fixed_heads,),
    "z": (_needs_fixed_heads,),
    "mlp_pre_linear": (_needs_gated_mlp,),
    "router_logits": (_needs_moe,),
    "expert_weights": (_needs_moe,),
    "expert_indices": (_needs_moe,),
}

# Each point's rules run in order; the first a layer fails gives the reason. _HAS_MIXER and
# _HAS_MLP let every layer through except on single-sublayer trunks.
_LAYER_RULES: dict[str, tuple[_LayerRule, ...]] = {
    **{
        name: (_HAS_MIXER, _ATTENDS)
        for name in (
            "q_norm_in",
            "q_norm_out",
            "z",
            "attn_gate",
        )
    },
    **{name: (_HAS_MIXER, _ATTENDS_OWN_KV) for name in ("k_norm_in", "k_norm_out", "value")},
    "attn_scores": (_HAS_MIXER, _TOKEN_KEYS),
    "attn_probs": (_HAS_MIXER, _TOKEN_KEYS),
    "attn_in": (_HAS_MIXER,),
    "attn_out": (_HAS_MIXER,),
    "attn_out_post": (_HAS_MIXER,),
    "mlp_in": (_HAS_MLP, _SINGLE_MLP_INPUT),
    "mlp_out": (_HAS_MLP, _WHOLE_MLP),
    "mlp_out_post": (_HAS_MLP, _WHOLE_MLP_WRITE),
    "mlp_pre": (_HAS_MLP, _DENSE, _PLAIN_GATE),
    "mlp_pre_linear": (_HAS_MLP, _DENSE),
    "mlp_act": (_HAS_MLP, _DENSE),
    "router_logits": (_HAS_MLP, _SPARSE),
    "expert_weights": (_HAS_MLP, _SPARSE),
    "expert_indices": (_HAS_MLP, _SPARSE),
}


def _check_coordinates(
    spec: PointLike, facts: ModelFacts, layer: int | None, stream: int | None
) -> None:
    """Coordinates that could never be valid for this point on this model raise outright."""
    if layer is not None:
        if spec.is_trunk:
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
                f"only {', '.join(STREAM_COORDINATE_POINTS)} are indexed by stream",
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


def _stream_rule(spec: PointLike, facts: ModelFacts, stream: int | None) -> Absence | None:
    if not spec.accepts_stream:
        return None
    if facts.altup_active_stream is not None and spec.name in _ALTUP_READS:
        return None  # absent on every stream: the AltUp rule says why, with or without one
    if facts.n_streams > 1 and stream is None:
        kind = "AltUp" if facts.altup_active_stream is not None else "hyper-connections"
        return Absence(
            f"{facts.architecture} carries {facts.n_streams} parallel residual streams "
            f"({kind}), so a bare {spec.name} would have to pick or merge them",
            f"address one stream as {spec.name}.L.stream-K (K in 0..{facts.n_streams - 1}), or "
            "read the stack with resid_streams",
        )
    if facts.n_streams <= 1 and stream is not None:
        return Absence(
            f"{facts.architecture} has a single residual stream, so a stream coordinate does not "
            "apply",
            f"drop the .stream-{stream} coordinate",
        )
    return None


def why_absent(
    spec: PointLike, facts: ModelFacts, layer: int | None, stream: int | None
) -> Absence | None:
    """None when the model has `spec` at these coordinates (any layer when layer is None)."""
    _check_coordinates(spec, facts, layer, stream)
    found = _stream_rule(spec, facts, stream)
    if found is not None:
        return found
    # Every multi-stream-only point needs streams; the registry marks which ones those are.
    model_rules = _MODEL_RULES.get(spec.name, ())
    if spec.multi_stream_only:
        model_rules = (_needs_streams, *model_rules)
    for model_rule in model_rules:
        found = model_rule(spec, facts)
        if found is not None:
            return found
    # With layer=None the model has the point where some layer passes every rule; the first rule
    # that leaves no such layer gives the reason.
    candidates = list(range(facts.n_layers))
    for rule in _LAYER_RULES.get(spec.name, ()):
        if layer is not None:
            if not rule.present(facts, layer):
                return rule.at_layer(spec, facts, layer)
            continue
        candidates = [each for each in candidates if rule.present(facts, each)]
        if not candidates:
            return rule.nowhere(spec, facts)
    return None


def reachable(spec: PointLike, facts: ModelFacts) -> bool:
    """Whether the model has the point somewhere, counting `.stream-K` forms.

    On a multi-stream trunk the bare resid points are refused but their stream forms exist.
    """
    stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
    return why_absent(spec, facts, None, stream) is None
