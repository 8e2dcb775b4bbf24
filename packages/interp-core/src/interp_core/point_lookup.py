"""Which point did the user mean, and what does each reference engine call it on this model?

Names people bring from other tools (`hook_pattern`, `attn_weights`, `blocks.5.hook_resid_post`)
are answered with the matching point; any other string gets the nearest points. `equivalent_for`
resolves the engine names the registry can only describe in general: block-level hooks that mean
different points by family, aliases that hold only without sandwich norms, points a model lacks.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from interp_core.errors import UnknownPoint
from interp_core.point_spec import ENGINES, Equivalent, PointSpec
from interp_core.point_table import POINTS, point_names
from interp_core.presence import reachable

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = ["equivalent_for", "get_point", "plain_sublayers"]

_ENGINE_TITLES = {"transformer_lens": "TransformerLens", "nnsight": "nnsight", "nnterp": "nnterp"}

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
    for spec in POINTS.values():
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
        near = difflib.get_close_matches(lowered[:80], point_names(), n=3, cutoff=0.6)
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


# --- model-aware engine names ---------------------------------------------------------------------


def plain_sublayers(facts: ModelFacts) -> bool:
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
    if not reachable(spec, facts):
        stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
        reason = spec.absence_reason(facts, None, stream)
        return Equivalent(None, f"the point is absent on this model: {reason}")
    plain = plain_sublayers(facts)
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
