"""Which tensor, in a reference engine's own terms, is each of our points on a given model?

The registry (`interp_core.points`) records what TransformerLens, nnsight and nnterp call each
point, and `equivalent_for` resolves the model-aware cases it knows (block-level TransformerLens
hooks on sandwich-norm families, nnterp aliases without sandwich norms). This module turns that
into a concrete `Read` a runner script can execute, adding what only a runner needs: the layout
of the engine's tensor (heads axis first or second, token-flattened) and the comparison
convention. Everything is decided from `ModelFacts`, before any model loads.

Rules beyond the registry, each measured against the eager backend (float32, eager attention):

- TransformerBridge (TL 3.9 and 4.3) names: the registry's TransformerLens names are Bridge names.
  In addition `hook_embed` already includes Gemma's sqrt(d_model) multiplier (measured: exact on
  Gemma-2), `ln_final.hook_out` is final_norm (gain applied) and `unembed.hook_out` is lm_head
  before the final softcap; `mlp.gate.hook_out` is router_logits on sparse layers. The Bridge's
  q_norm/k_norm hooks are laid out [batch, heads, seq, head_dim].
- HookedTransformer (explicit-config recipe, no processing): hooks are the legacy names; it has no
  post-gain norm outputs (attn_in, mlp_in, final_norm, q/k norms are not expressible) and
  `hook_embed` is the bare table lookup. Its logits are lm_head only without a final softcap or
  logit multiplier.
- nnsight: reads are *sites* (a role such as `v_proj` or `mixer` plus input/output/element)
  that the runner resolves on the live module tree, since module names differ per family.
  On transformers 5 the MoE routers of Mixtral/Qwen3-MoE return (logits, weights, indices), so
  expert_weights and expert_indices are reachable there; the runner checks the tuple.
- nnterp: only its standardized accessors; `logits` is lm_head only without a final softcap.

Compatibility mode (`tl_bridge_compat`, default processing: fold_ln, center_writing_weights,
center_unembed, fold_value_biases) changes values, so each point gets a *class* and the runner,
which sees the processing actually applied, turns it into a convention:

- "residual" (embeddings, resid_pre/mid/post, attn_out[_post], mlp_out[_post]): writing weights
  are centred on LayerNorm models, so the reference is mean-centred over d_model →
  convention "centred" there, "raw" on RMSNorm models (TransformerLens skips centring for RMS).
- "logits" (lm_head): "centred" over the vocabulary when center_unembed ran (it is switched off
  on softcapped families, e.g. Gemma-2 → "raw").
- "unchanged" (q/k and their norms, attention scores and probabilities, mlp_pre/_linear/act,
  router logits): folding preserves these up to float rounding → "raw".
- "value" (value, z): "raw" unless the model has value biases or LayerNorm (whose bias fold_ln
  folds into W_V), which fold_value_biases then moves into the output bias → not expressible.
- not expressible at all in compatibility mode: attn_in, mlp_in and final_norm (fold_ln removes
  the norm's gain and bias from exactly these tensors).

Conventions: "raw" compares as is; "centred" means both sides are compared after subtracting
their mean over the last (feature) axis. attn_scores are compared with masked entries holding
the dtype minimum on both sides (engines that write -inf are normalised on load).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from interp_core.address import to_address
from interp_core.points import equivalent_for, get_point

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = [
    "ENGINE_FAMILY",
    "KNOWN_DEFECTS",
    "Defect",
    "NotExpressible",
    "Read",
    "expected_shape",
    "known_defect",
    "translate",
]

# Which registry column (interp_core.points.ENGINES) each reference engine starts from.
ENGINE_FAMILY = {
    "tl_bridge": "transformer_lens",
    "tl_bridge_compat": "transformer_lens",
    "tl_hooked": "transformer_lens",
    "nnsight": "nnsight",
    "nnterp": "nnterp",
    "tl_bridge_latest": "transformer_lens",
    "nnsight_latest": "nnsight",
}


@dataclass(frozen=True)
class Read:
    """One point as a runner reads it.

    `target` is the engine's name: a hook name (TransformerLens; "LOGITS" means the forward
    output), an nnterp accessor, or an nnsight site `role:io[:element]`. `layout` says how to
    bring the engine's tensor to our shape: "flat" (already [batch, seq, width] or
    [batch, heads, q, k]), "bshd" ([b, s, heads, d] → flatten), "bhsd" ([b, heads, s, d] →
    transpose, flatten), "heads=N" (either, told apart by where the N heads sit; families
    differ) or "tokens" (token-flattened [b*s, width]). `convention` is "raw" or
    "centred"; for compatibility mode `compat_class` lets the runner decide it.
    """

    address: str
    point: str
    layer: int | None
    target: str
    layout: str = "flat"
    convention: str = "raw"
    compat_class: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NotExpressible:
    """The engine has no tensor equal to this point on this model, and why."""

    address: str
    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Defect:
    """A measured case where a reference engine runs but reads something other than the point.

    Applied after a run, against the versions the runner reports, so a fixed release is
    compared again automatically. `points` None means every point of the model.
    """

    engines: tuple[str, ...]
    model_types: tuple[str, ...]
    points: tuple[str, ...] | None
    package: str
    versions: tuple[str, ...]
    reason: str


KNOWN_DEFECTS: tuple[Defect, ...] = (
    Defect(
        ("tl_bridge", "tl_bridge_compat", "tl_bridge_latest"),
        ("gptj", "opt"),
        ("attn_scores",),
        "transformer-lens",
        ("3.9.0", "4.3.0"),
        "TransformerBridge's hook_attn_scores holds the post-softmax pattern on this family",
    ),
    Defect(
        ("tl_bridge", "tl_bridge_compat"),
        ("cohere2",),
        None,
        "transformer-lens",
        ("3.9.0",),
        "TransformerBridge 3.9.0 computes Cohere-2 attention differently from HF (scores differ "
        "by ~2 at layer 0 while its inputs match; 4.3.0 agrees with HF)",
    ),
    Defect(
        ("tl_bridge_compat",),
        ("qwen2_moe",),
        None,
        "transformer-lens",
        ("3.9.0",),
        "compatibility-mode processing does not preserve Qwen2-MoE's MoE block (mlp_out differs "
        "by ~0.2 from layer 1 while the raw Bridge matches HF exactly)",
    ),
    Defect(
        ("tl_bridge_compat",),
        ("gpt_oss",),
        None,
        "transformer-lens",
        ("3.9.0",),
        "fold_value_biases is not exact with attention sinks (rows sum to less than one), so "
        "compatibility mode changes attn_out and everything after it",
    ),
    Defect(
        ("tl_bridge", "tl_bridge_compat"),
        ("hunyuan_v1_dense",),
        None,
        "transformer-lens",
        ("3.9.0",),
        "TransformerBridge 3.9.0 computes Hunyuan attention differently from HF (attn_in and "
        "value match, attn_scores differ by up to 0.35 at layer 0; Hunyuan normalises q and k "
        "after rotary), so every point from layer 0's attention on differs",
    ),
    Defect(
        ("tl_bridge", "tl_bridge_compat"),
        ("jamba",),
        ("attn_scores",),
        "transformer-lens",
        ("3.9.0",),
        "TransformerBridge's hook_attn_scores holds Jamba's scores without the causal mask "
        "(every future key visible) while its attn_probs match HF",
    ),
)


KNOWN_DEFECTS_2026: tuple[Defect, ...] = (
    Defect(
        ("tl_bridge", "tl_bridge_compat"),
        ("gemma4_text",),
        ("attn_scores",),
        "transformer-lens",
        ("3.9.0",),
        "TransformerBridge's hook_attn_scores holds Gemma-4's scores before any mask on its "
        "sliding and KV-sharing layers (measured on the tiny model: layers 0, 2 and 3 show every "
        "entry, neither the causal nor the window mask) while its attn_probs match HF",
    ),
    Defect(
        ("tl_bridge", "tl_bridge_compat"),
        ("llama4_text",),
        ("attn_scores",),
        "transformer-lens",
        ("3.9.0",),
        "TransformerBridge's hook_attn_scores holds Llama-4's scores before any mask (every "
        "entry finite: neither the causal nor the chunk mask) while its attn_probs match HF",
    ),
    Defect(
        ("nnterp",),
        ("dbrx",),
        ("attn_in", "attn_out", "attn_out_post"),
        "nnterp",
        ("1.3.0",),
        "nnterp 1.3.0 takes DBRX's norm_attn_norm (norm, attention, norm and the residual add) "
        "for its attention module, so its attention input is the un-normed residual and its "
        "output not the attention's (attn_in differs by a relative 10 at layer 0)",
    ),
)


def known_defect(
    engine: str, facts: ModelFacts, address: str, versions: dict[str, str]
) -> str | None:
    """Why the engine's tensor for `address` is known not to be the point, or None."""
    point = to_address(address).name
    for defect in (*KNOWN_DEFECTS, *KNOWN_DEFECTS_2026):
        if engine not in defect.engines or facts.model_type not in defect.model_types:
            continue
        if defect.points is not None and point not in defect.points:
            continue
        version = versions.get(defect.package)
        if version in defect.versions:
            return f"known defect of {defect.package} {version}: {defect.reason}"
    return None


# Gemma-3n and -4 normalise their values after v_proj (Gemma-4 reads k_proj's output as values
# on its full layers); the engines' value tensor is the projection's output.
_VALUE_NORM_REASON = (
    "{engine} is the value projection's output, before the value norm (v_norm) whose output "
    "attention mixes and this point holds"
)


def _kv_heads(facts: ModelFacts, layer: int | None) -> int:
    # Gemma-4's full layers have their own K/V head count.
    return facts.kv_heads_at(layer) if layer is not None else facts.n_kv_heads


def expected_shape(address: str, facts: ModelFacts, seq: int) -> tuple[int, ...]:
    """Our shape for one prompt of `seq` tokens: a batch dim of 1, then the point's dims."""
    parsed = to_address(address)
    point = get_point(parsed.name)
    return (1, *point.width.dims(facts, seq, parsed.layer))


def _plain(facts: ModelFacts) -> bool:
    return not facts.sandwich_norms and facts.residual_multiplier in (None, 1, 1.0)


def _plain_logits(facts: ModelFacts) -> bool:
    return facts.final_logit_softcap is None and facts.logit_multiplier in (None, 1, 1.0)


def _sparse(facts: ModelFacts, layer: int | None) -> bool:
    if facts.moe is None or layer is None:
        return False
    return not facts.moe.sparse_layers or layer in facts.moe.sparse_layers


_COMPAT_CLASS = {
    "embeddings": "residual",
    "resid_pre": "residual",
    "resid_mid": "residual",
    "resid_post": "residual",
    "attn_out": "residual",
    "attn_out_post": "residual",
    "mlp_out": "residual",
    "mlp_out_post": "residual",
    "lm_head": "logits",
    "value": "value",
    "z": "value",
}
_COMPAT_FOLDED = {
    "attn_in": "fold_ln folds ln1's gain and bias into W_Q/W_K/W_V, so the attention input "
    "TransformerLens sees is normalised without them",
    "mlp_in": "fold_ln folds ln2's gain and bias into the MLP input weights, so the MLP input "
    "TransformerLens sees is normalised without them",
    "final_norm": "fold_ln folds the final norm's gain into the unembedding, so no tensor holds "
    "the gained final norm",
}

# TransformerBridge QK-norm hooks carry a heads axis whose position differs between versions.
_NORM_HOOKS = ("q_norm.hook_in", "q_norm.hook_out", "k_norm.hook_in", "k_norm.hook_out")
# Families whose attention and MLP modules add the residual themselves before returning.
_ADDS_OWN_RESIDUAL = ("bloom", "mpt")
_BSHD_POINTS = ("value", "z")


def _tl_bridge(point: str, layer: int | None, facts: ModelFacts) -> tuple[str, str] | str:
    """(hook, layout) for the TransformerBridge, or the reason there is none."""
    if point == "embeddings":
        if facts.embedding_multiplier in (None, 1, 1.0) or facts.model_type.startswith("gemma"):
            return "embed.hook_out", "flat"
        return (
            "embed.hook_out is measured to include the embedding multiplier only on the Gemma "
            f"family; {facts.model_type} scales by {facts.embedding_multiplier} outside it"
        )
    if point in ("attn_out", "mlp_out") and facts.model_type in _ADDS_OWN_RESIDUAL:
        # The module's own output already includes the residual; read the output projection.
        sub = "attn.o" if point == "attn_out" else "mlp.out"
        return f"blocks.{layer}.{sub}.hook_out", "flat"
    if point == "final_norm":
        return "ln_final.hook_out", "flat"
    if point == "lm_head":
        if facts.logit_multiplier not in (None, 1, 1.0):
            return "unembed.hook_out is not verified on families with a logit multiplier"
        return "unembed.hook_out", "flat"
    if point in ("router_logits", "expert_indices") and facts.model_type == "granitemoe":
        return (
            "on GraniteMoE the Bridge's router hooks hold the top-k selection (measured shapes "
            "[tokens, k] and [tokens, n_experts]), not this point"
        )
    if point == "value" and facts.family.value_norm:
        return _VALUE_NORM_REASON.format(engine="TransformerLens's hook_v")
    if point == "router_logits" and facts.family.router_logits_module is not None:
        return (
            "TransformerBridge maps Gemma-4's dense MLP as blocks.L.mlp; the router sits on the "
            "block beside it and returns probabilities, with no hook on its logits"
        )
    if point == "router_logits":
        return f"blocks.{layer}.mlp.gate.hook_out", "tokens"
    if point == "expert_indices":
        return f"blocks.{layer}.mlp.hook_expert_indices", "tokens"
    eq = equivalent_for(point, "transformer_lens", facts)
    if eq.name is None:
        return eq.note or "TransformerLens has no hook for this point"
    hook = eq.format(layer)
    assert hook is not None
    if hook.endswith(_NORM_HOOKS):
        # [b, heads, s, d] on TransformerLens 3.9, [b, s, heads, d] on 4.3.
        heads = facts.n_heads if point.startswith("q_") else _kv_heads(facts, layer)
        return hook, f"heads={heads}"
    return hook, "bshd" if point in _BSHD_POINTS else "flat"


_HOOKED: dict[str, str | None] = {
    "resid_pre": "blocks.{L}.hook_resid_pre",
    "value": "blocks.{L}.attn.hook_v",
    "attn_scores": "blocks.{L}.attn.hook_attn_scores",
    "attn_probs": "blocks.{L}.attn.hook_pattern",
    "z": "blocks.{L}.attn.hook_z",
    "attn_out_post": "blocks.{L}.hook_attn_out",
    "resid_mid": "blocks.{L}.hook_resid_mid",
    "mlp_pre": "blocks.{L}.mlp.hook_pre",
    "mlp_pre_linear": "blocks.{L}.mlp.hook_pre_linear",
    "mlp_act": "blocks.{L}.mlp.hook_post",
    "expert_indices": "blocks.{L}.mlp.hook_expert_indices",
    "mlp_out_post": "blocks.{L}.hook_mlp_out",
    "resid_post": "blocks.{L}.hook_resid_post",
}
_HOOKED_NONE = {
    "attn_in": "HookedTransformer's hook_attn_in is before ln1 and ln1.hook_normalized is before "
    "the gain; no hook holds the normed attention input",
    "mlp_in": "HookedTransformer's hook_mlp_in is before ln2 and ln2.hook_normalized is before "
    "the gain; no hook holds the normed MLP input",
    "final_norm": "ln_final.hook_normalized is before the gain (and bias)",
    "q_norm_in": "QK-norm hooks exist only on the TransformerBridge",
    "q_norm_out": "QK-norm hooks exist only on the TransformerBridge",
    "k_norm_in": "QK-norm hooks exist only on the TransformerBridge",
    "k_norm_out": "QK-norm hooks exist only on the TransformerBridge",
    "router_logits": "HookedTransformer hooks the softmax over router logits, not the logits",
    "expert_weights": "HookedTransformer's hook_expert_weights is the softmax over all experts "
    "before top-k selection",
    "attn_gate": "TransformerLens has no hook for the attention output gate",
}


def _tl_hooked(point: str, layer: int | None, facts: ModelFacts) -> tuple[str, str] | str:
    if facts.model_type == "bloom" and point == "embeddings":
        return "HookedTransformer's hook_embed includes BLOOM's embedding LayerNorm"
    if facts.model_type == "bloom" and point == "attn_scores":
        return (
            "HookedTransformer adds BLOOM's ALiBi bias outside hook_attn_scores (measured: "
            "differs from HF by the bias), so the hook is not the scores this point defines"
        )
    if point == "embeddings":
        eq = equivalent_for(point, "transformer_lens", facts)
        return (eq.name, "flat") if eq.name else eq.note
    if point == "lm_head":
        if _plain_logits(facts):
            return "LOGITS", "flat"
        return (
            "HookedTransformer returns logits after the final softcap / logit multiplier and "
            "has no hook before them"
        )
    if point in ("attn_out", "mlp_out"):
        if _plain(facts):
            block = "hook_attn_out" if point == "attn_out" else "hook_mlp_out"
            return f"blocks.{layer}.{block}", "flat"
        return (
            "HookedTransformer's block-level hook is taken after the post-sublayer norm on this "
            "family (that is the *_out_post point) and the attention/MLP module has no hook_out"
        )
    if point in _HOOKED_NONE:
        return _HOOKED_NONE[point]
    hook = _HOOKED.get(point)
    if hook is None:
        return "HookedTransformer has no hook for this point"
    layout = "bshd" if point in _BSHD_POINTS else "tokens" if point == "expert_indices" else "flat"
    return hook.replace("{L}", str(layer)), layout


# Routers whose output is not (logits, weights, indices): where their logits are, and what they
# return instead (measured on transformers 5.19).
_ROUTER_OUTPUTS: dict[str, tuple[int, str]] = {
    "llama4_text": (1, "(dense top-k scores, logits)"),
    "jetmoe": (4, "its choices sorted by expert, then the logits"),
}


# nnsight sites: role:io[:element]; the runner resolves roles on the live module tree.
def _nnsight(point: str, layer: int | None, facts: ModelFacts) -> tuple[str, str, dict] | str:
    sandwich = facts.sandwich_norms
    opts: dict[str, Any] = {}
    if point == "embeddings":
        if facts.embedding_multiplier not in (None, 1, 1.0):
            opts["multiplier"] = facts.embedding_multiplier
        return "embed:output", "flat", opts
    if point in ("attn_out_post", "mlp_out_post") and facts.residual_multiplier not in (
        None,
        1,
        1.0,
    ):
        return "the residual multiplier is applied outside any module, so no module output holds it"
    # Each point's module boundary. Its layout is "flat" but for the router's outputs ("tokens")
    # and the q/k norms' (their head count, below).
    sites = {
        "resid_pre": "layer:input",
        "attn_in": "mixer:input",
        "q_norm_in": "q_norm:input",
        "q_norm_out": "q_norm:output",
        "k_norm_in": "k_norm:input",
        "k_norm_out": "k_norm:output",
        "value": "v_proj:output",
        "attn_probs": "mixer:output:1",
        "z": "o_proj:input",
        "attn_out": "mixer:output:0",
        "attn_out_post": "post_attn_norm:output" if sandwich else "mixer:output:0",
        "resid_mid": "pre_mlp_norm:input",
        "mlp_in": "mlp:input",
        "mlp_pre": "gate_proj:output" if facts.gated_mlp else "up_proj:output",
        "mlp_pre_linear": "up_proj:output",
        "mlp_act": "down_proj:input",
        "router_logits": "router:output:0",
        "expert_weights": "router:output:1",
        "expert_indices": "router:output:2",
        "mlp_out": "mlp:output:0",
        "mlp_out_post": "post_mlp_norm:output" if sandwich else "mlp:output:0",
        "resid_post": "layer:output:0",
        "final_norm": "final_norm:output",
        "lm_head": "lm_head:output",
    }
    if point == "value" and facts.family.value_norm:
        return _VALUE_NORM_REASON.format(engine="the nnsight site v_proj.output")
    routed = point in ("router_logits", "expert_weights", "expert_indices")
    router = _ROUTER_OUTPUTS.get(facts.model_type)
    if router is not None and routed:
        # Routers whose output is not (logits, weights, indices): the logits sit elsewhere and
        # the choice is no tensor of the router's.
        if point != "router_logits":
            return f"{facts.model_type}'s router returns {router[1]}: no [tokens, k] {point}"
        sites["router_logits"] = f"router:output:{router[0]}"
    if point not in sites:
        eq = equivalent_for(point, "nnsight", facts)
        return eq.note or "nnsight has no module boundary at this point"
    target = sites[point]
    layout = "tokens" if routed else "flat"
    if point in ("q_norm_in", "q_norm_out"):
        layout = f"heads={facts.n_heads}"  # [b, s, h, d] on Qwen3, [b, h, s, d] on Gemma-3
    elif point in ("k_norm_in", "k_norm_out"):
        layout = f"heads={_kv_heads(facts, layer)}"
    if point in ("mlp_pre", "mlp_pre_linear"):
        opts["gate_up_half"] = 0 if point == "mlp_pre" else 1  # for fused gate_up projections
    if point == "value":
        opts["n_heads"], opts["n_kv_heads"], opts["head_dim"] = (
            facts.n_heads,
            _kv_heads(facts, layer),
            facts.head_dim_at(layer) if layer is not None else facts.head_dim,
        )
    return target, layout, opts


def _nnterp(point: str, layer: int | None, facts: ModelFacts) -> tuple[str, str, dict] | str:
    opts: dict[str, Any] = {}
    if point == "lm_head" and not _plain_logits(facts):
        return "nnterp's logits are after the final softcap / logit multiplier"
    if facts.model_type in _ADDS_OWN_RESIDUAL and point in (
        "attn_out",
        "attn_out_post",
        "mlp_out",
        "mlp_out_post",
    ):
        return (
            f"{facts.model_type}'s attention and MLP modules add the residual before returning, "
            "and nnterp's accessors read those module outputs"
        )
    eq = equivalent_for(point, "nnterp", facts)
    if eq.name is None:
        return eq.note or "nnterp has no standardized accessor for this point"
    name = eq.format(layer)
    assert name is not None
    if point == "embeddings" and facts.embedding_multiplier not in (None, 1, 1.0):
        opts["multiplier"] = facts.embedding_multiplier
    return name, "flat", opts


def translate(engine: str, address: str, facts: ModelFacts) -> Read | NotExpressible:
    """Our address → the engine's read on this model, or why the engine cannot express it.

    Points the model itself lacks are NotExpressible with the registry's absence reason (the
    scorer should not ask for them at all). Raises ValueError for an unknown engine.
    """
    if engine not in ENGINE_FAMILY:
        message = f"unknown reference engine {engine!r}; known: {', '.join(ENGINE_FAMILY)}"
        raise ValueError(message)
    parsed = to_address(address)
    point, layer = parsed.name, parsed.layer
    canonical = str(parsed)
    if parsed.stream is not None:
        return NotExpressible(canonical, "stream coordinates are not mapped to reference engines")
    spec = get_point(point)
    absent = spec.absence_reason(facts, layer)
    if absent is not None:
        return NotExpressible(canonical, f"the model has no such point: {absent}")
    base = engine.removesuffix("_latest")
    if base in ("tl_bridge", "tl_bridge_compat"):
        if base == "tl_bridge_compat" and point in _COMPAT_FOLDED:
            return NotExpressible(
                canonical, f"not expressible in compatibility mode: {_COMPAT_FOLDED[point]}"
            )
        found = _tl_bridge(point, layer, facts)
        if isinstance(found, str):
            return NotExpressible(canonical, found)
        hook, layout = found
        compat = _COMPAT_CLASS.get(point, "unchanged") if base == "tl_bridge_compat" else None
        return Read(canonical, point, layer, hook, layout, compat_class=compat)
    if base == "tl_hooked":
        found = _tl_hooked(point, layer, facts)
        if isinstance(found, str):
            return NotExpressible(canonical, found)
        return Read(canonical, point, layer, found[0], found[1])
    if base == "nnsight":
        site = _nnsight(point, layer, facts)
        if isinstance(site, str):
            return NotExpressible(canonical, site)
        return Read(canonical, point, layer, site[0], site[1], options=site[2])
    accessor = _nnterp(point, layer, facts)
    if isinstance(accessor, str):
        return NotExpressible(canonical, accessor)
    return Read(canonical, point, layer, accessor[0], accessor[1], options=accessor[2])
