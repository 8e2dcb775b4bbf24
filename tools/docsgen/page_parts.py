"""What every generated reference page shares: paths, front matter, shapes, traits, backends.

Page modules (`point_pages`, `architecture_pages`, `matrix_pages`) build on these; every fact
comes from interp-core (the registry, `ModelFacts`, the backends' `supports`), and the prose here
only frames it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from docsgen.catalog import families
from docsgen.diagram import present_layers, why_absent
from docsgen.markup import esc
from interp_core.address import Address
from interp_core.facts import COMPRESSED_LAYER_KINDS, ModelFacts
from interp_core.points import POINTS, PointSpec, Role, Scope, Width, layer_ranges
from interp_core.shapes import point_shape

__all__ = [
    "ARCH_DIR",
    "COMPAT",
    "ENGINE_TITLES",
    "MATRIX",
    "NO",
    "POINTS_DIR",
    "ROLE_TITLES",
    "TRANSLATION",
    "YES",
    "BackendColumn",
    "address_example",
    "arch_src",
    "backend_columns",
    "concrete_shape",
    "concrete_width",
    "first_layer",
    "first_sentence",
    "front",
    "generated_note",
    "layers_text",
    "point_src",
    "served_cell",
    "shape_formula",
    "tags_html",
    "trait_rows",
    "trait_tags",
    "unregistered_first_party",
    "version_range",
]

POINTS_DIR = "reference/points"
ARCH_DIR = "reference/architectures"
MATRIX = "reference/support-matrix.md"
TRANSLATION = "reference/translation.md"
COMPAT = "reference/compatibility.md"
ENGINE_TITLES = {"transformer_lens": "TransformerLens", "nnsight": "nnsight", "nnterp": "nnterp"}
ROLE_TITLES = {
    Role.TRUNK: "trunk",
    Role.RESIDUAL: "residual stream",
    Role.ATTENTION: "attention",
    Role.MLP: "MLP",
    Role.ROUTING: "routing",
    Role.STREAM: "hyper-connection streams",
}
YES, NO = "✓", "—"


def point_src(name: str) -> str:
    return f"{POINTS_DIR}/{name}.md"


def arch_src(key: str) -> str:
    return f"{ARCH_DIR}/{key}.md"


def front(title: str, hide: tuple[str, ...] = ()) -> str:
    lines = ["---", f"title: {title}"]
    if hide:
        lines.append("hide:")
        lines.extend(f"  - {item}" for item in hide)
    lines.append("---")
    return "\n".join(lines) + "\n\n"


def generated_note() -> str:
    return (
        '<p class="interp-generated">Generated from <code>interp_core</code> when the site is '
        "built; edit the registry, not this page.</p>"
    )


# --- symbolic shapes ------------------------------------------------------------------------------
class _Symbols:
    """Stand-in facts whose dimensions are names, so the registry's own width rules print a
    formula: `Width.dims(_Symbols(), "seq")` is exactly what `point_shape` computes."""

    d_model = "d_model"
    q_width = "n_heads·head_dim"
    kv_width = "n_kv_heads·head_dim"
    z_width = "n_heads·v_head_dim"
    d_mlp = "d_mlp"
    vocab_size = "vocab"
    n_heads = "n_heads"
    n_streams = "n_streams"
    architecture = "any model"
    widths_vary = False  # the formulas are per layer wherever widths differ

    class moe:  # mirrors ModelFacts.moe
        n_experts = "n_experts"
        experts_per_token = "experts_per_token"


def shape_formula(spec: PointSpec, stream: bool = False) -> str:
    if stream:
        dims: tuple[object, ...] = ("seq", "d_model")  # one stream of the stack
    else:
        dims = spec.width.dims(_Symbols(), "seq")  # type: ignore[arg-type]
    return "[" + ", ".join(str(d) for d in ("batch", *dims)) + "]"


# Stand-ins for batch and sequence length that no real dimension equals (as the CLI does).
_B, _S = 1_000_003, 1_000_033


def concrete_shape(name: str, facts: ModelFacts, layer: int | None) -> str:
    spec = POINTS[name]
    stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
    shape = point_shape(Address(name, layer, stream), facts, _B, _S)
    names = {_B: "batch", _S: "seq"}
    return "[" + ", ".join(names.get(d, str(d)) for d in shape) + "]"


def concrete_width(name: str, facts: ModelFacts, layer: int | None) -> str:
    spec = POINTS[name]
    stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
    shape = point_shape(Address(name, layer, stream), facts, _B, _S)
    if spec.width is Width.SCORES:
        return f"{shape[1]}×seq"
    return str(math.prod(shape[2:]))


def first_layer(name: str, facts: ModelFacts) -> int | None:
    layers = present_layers(name, facts)
    return layers[0] if layers else None


def address_example(spec: PointSpec, facts: ModelFacts | None = None) -> str:
    if spec.scope is Scope.TRUNK:
        return spec.name
    layer = 3 if facts is None else (first_layer(spec.name, facts) or 0)
    return str(Address(spec.name, layer))


# --- traits -------------------------------------------------------------------------------------
def _attention_kind(f: ModelFacts) -> str:
    if f.mla is not None:
        m = f.mla
        indexed = (
            f"; each query attends to the {f.index_topk} keys its lightning indexer keeps"
            if f.index_topk
            else ""
        )
        return (
            f"multi-head latent (MLA): {f.n_heads} heads, kv_lora_rank {m.kv_lora_rank}, "
            f"qk head dim {m.qk_head_dim}, v head dim {m.v_head_dim}{indexed}"
        )
    return _head_layout(f) + _per_layer_heads(f)


def _head_layout(f: ModelFacts) -> str:
    if f.n_kv_heads == 1 and f.n_heads > 1:
        return f"multi-query: {f.n_heads} query heads share 1 key/value head"
    if f.n_kv_heads < f.n_heads:
        return f"grouped-query: {f.n_heads} query heads, {f.n_kv_heads} key/value heads"
    return f"multi-head: {f.n_heads} heads"


def _per_layer_heads(f: ModelFacts) -> str:
    """Head widths and K/V heads that differ by layer (Gemma-4), and KV-sharing layers (Gemma-3n,
    Gemma-4)."""
    text = ""
    if f.layer_head_dims or f.layer_kv_heads:
        widths = sorted({(f.head_dim_at(i), f.kv_heads_at(i)) for i in range(f.n_layers)})
        text += "; by layer, " + " or ".join(f"heads of {d} with {kv} K/V" for d, kv in widths)
    sharing = [i for i in range(f.n_layers) if f.shares_kv(i)]
    if sharing:
        text += f"; layers {layer_ranges(sharing)} reuse an earlier layer's keys and values"
    return text


def _norms(f: ModelFacts) -> str:
    if f.post_norms_only:
        return "post-norms only (after each sublayer, none before)"
    if f.sandwich_norms:
        return "sandwich: a norm before and after each sublayer"
    return "pre-norm (before each sublayer)"


def _block(f: ModelFacts) -> str:
    if f.parallel_attn_mlp:
        return "parallel: attention and MLP read the same input"
    if f.ssm_beside_attention:
        return "sequential, with a Mamba-2 mixer beside the attention (both read the normed input)"
    if f.normed_skip:
        return "sequential; each sublayer leaves alpha·(its normed input) + beta·(its output)"
    if f.single_sublayer:
        return "one sublayer per layer: a token mixer or an MLP (the layer kind says which)"
    if f.altup_active_stream is not None:
        return (
            f"AltUp: every stream predicted, attention and MLP on stream "
            f"{f.altup_active_stream}'s prediction with LAuReL (rank {f.laurel_rank}) beside "
            "attention and the sum scaled by 1/sqrt(2), then every stream corrected"
        )
    return "sequential"


def _layer_kinds(f: ModelFacts) -> str:
    counts: dict[str, int] = {}
    for kind in f.layer_kinds or ("full",) * f.n_layers:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def _mlp(f: ModelFacts) -> str:
    parts = []
    if f.has_dense_mlp:
        kind = "gated (act(gate)·up)" if f.gated_mlp else "plain (fc → act → proj)"
        widths = sorted(set(f.layer_d_mlp)) or [f.d_mlp]
        parts.append(f"dense {kind}, d_mlp {' or '.join(map(str, widths))}")
    if f.moe is not None and f.moe.sparse_layers:
        m = f.moe
        text = (
            f"mixture of experts: {m.n_experts} experts of width {m.d_expert}, "
            f"top-{m.experts_per_token}"
        )
        if m.n_shared_experts:
            text += f", {m.n_shared_experts} shared"
        if f.has_dense_layers:
            text += f" (layers {layer_ranges(list(m.sparse_layers))})"
        elif f.has_dense_mlp:
            text += ", beside the dense MLP"
        parts.append(text)
    topk = [layer for layer, target in enumerate(f.activation_sparsity) if target > 0]
    if topk:
        parts.append(f"gaussian top-k on the gate at layers {layer_ranges(topk)}")
    return "; ".join(parts)


def _streams(f: ModelFacts) -> str:
    if f.n_streams <= 1:
        return NO
    kind = "AltUp" if f.altup_active_stream is not None else "hyper-connections"
    return f"{f.n_streams} ({kind})"


def _num(value: float | None) -> str:
    return NO if value in (None, 1, 1.0) else f"{value:g}"


def trait_rows(f: ModelFacts) -> list[tuple[str, str]]:
    """(trait, value) pairs describing an architecture, all read from its facts."""
    return [
        ("attention", _attention_kind(f)),
        ("keys = values", YES if f.shared_key_value else NO),
        ("QK-norm", YES if f.qk_norm else NO),
        ("attention output gate", YES if f.gated_attn_output else NO),
        ("layer kinds", _layer_kinds(f)),
        ("sliding window", f"{f.sliding_window} tokens" if f.sliding_window else NO),
        ("routed attention heads", YES if f.routed_attention else NO),
        ("q/k/v clamp", f"±{f.qkv_clip:g}" if f.qkv_clip is not None else NO),
        ("attention logit softcap", _num(f.attn_logit_softcap)),
        ("norm placement", _norms(f)),
        ("block", _block(f)),
        ("MLP", _mlp(f)),
        ("residual multiplier", _num(f.residual_multiplier)),
        ("embedding multiplier", _num(f.embedding_multiplier)),
        ("logit multiplier", _num(f.logit_multiplier)),
        ("final logit softcap", _num(f.final_logit_softcap)),
        ("residual streams", _streams(f)),
        ("per-layer inputs", f"{f.per_layer_input_width} wide" if f.per_layer_input_width else NO),
        ("tied embeddings", YES if f.tied_embeddings else NO),
    ]


def trait_tags(f: ModelFacts) -> list[str]:
    """Short tags for the index: the traits that change which points exist or what they mean."""
    tags = []
    if f.mla is not None:
        tags.append("MLA")
    elif f.n_kv_heads == 1 and f.n_heads > 1:
        tags.append("MQA")
    elif f.n_kv_heads < f.n_heads:
        tags.append("GQA")
    if f.shared_key_value:
        tags.append("K=V")
    if f.qk_norm:
        tags.append("QK-norm")
    if f.gated_attn_output:
        tags.append("gated attention")
    if f.routed_attention:
        tags.append("mixture of attention heads")
    if f.qkv_clip is not None:
        tags.append("clipped q/k/v")
    if f.normed_skip:
        tags.append("normed skip path")
    if f.index_topk is not None:
        tags.append("indexed sparse attention")
    kinds = set(f.layer_kinds or ())
    if f.compress_rates:
        tags.append("compressed attention")
    if kinds - {"full", "sliding", "chunked", *COMPRESSED_LAYER_KINDS} or f.ssm_beside_attention:
        tags.append("hybrid mixers")
    if "chunked" in kinds:
        tags.append("chunked attention")
    elif f.sliding_window:
        tags.append("sliding window")
    if f.attn_logit_softcap or f.final_logit_softcap:
        tags.append("softcaps")
    if f.post_norms_only:
        tags.append("post-norms")
    elif f.sandwich_norms:
        tags.append("sandwich norms")
    if f.parallel_attn_mlp:
        tags.append("parallel block")
    if f.moe is not None and f.moe.sparse_layers:
        tags.append("MoE")
    if not f.gated_mlp and f.has_dense_layers:
        tags.append("plain MLP")
    if any(v not in (None, 1, 1.0) for v in (f.residual_multiplier, f.logit_multiplier)):
        tags.append("multipliers")
    if f.altup_active_stream is not None:
        tags.append("AltUp")
    elif f.n_streams > 1:
        tags.append("hyper-connections")
    if any(f.shares_kv(layer) for layer in range(f.n_layers)):
        tags.append("KV sharing")
    if any(f.activation_sparsity):
        tags.append("activation sparsity")
    return tags


def tags_html(tags: list[str]) -> str:
    return " ".join(f'<span class="interp-tag">{esc(t)}</span>' for t in tags)


# --- backends -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackendColumn:
    """What one registered backend says about every point, over every family that has it."""

    name: str
    error: str | None  # why the backend could not be asked at all
    served: dict[str, tuple[int, int]]  # point -> (families served, families with the point)
    refusals: dict[str, dict[str, list[str]]]  # point -> reason -> family keys


@cache
def backend_columns() -> tuple[BackendColumn, ...]:
    """Ask every registered backend's `supports` about every point on every family."""
    from interp_core.backends import get_backend, registered_backends

    columns = []
    for name in registered_backends():
        try:
            backend = get_backend(name)()
        except Exception as exc:  # a broken plugin is reported, not fatal to the site
            columns.append(BackendColumn(name, f"{type(exc).__name__}: {exc}", {}, {}))
            continue
        served: dict[str, tuple[int, int]] = {}
        refusals: dict[str, dict[str, list[str]]] = {}
        for point in POINTS:
            ok = total = 0
            for family in families():
                facts = family.facts
                if why_absent(point, facts) is not None:
                    continue
                total += 1
                spec = POINTS[point]
                stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
                address = Address(point, first_layer(point, facts), stream)
                try:
                    verdict = backend.supports(address, facts)
                    granted, reason = bool(verdict), getattr(verdict, "reason", None)
                except Exception as exc:
                    granted, reason = False, f"supports() raised {type(exc).__name__}: {exc}"
                if granted:
                    ok += 1
                else:
                    why = reason or "refused without a reason"
                    refusals.setdefault(point, {}).setdefault(why, []).append(family.key)
            served[point] = (ok, total)
        columns.append(BackendColumn(name, None, served, refusals))
    return tuple(columns)


def unregistered_first_party() -> list[str]:
    from interp_core.backends import FIRST_PARTY, registered_backends

    known = set(registered_backends())
    return [name for name in FIRST_PARTY if name not in known]


def served_cell(column: BackendColumn, point: str) -> str:
    if column.error is not None:
        return "?"
    ok, total = column.served.get(point, (0, 0))
    if total == 0:
        return NO
    if ok == total:
        return f'<span class="interp-yes">✓</span> all {total}'
    if ok == 0:
        return f'<span class="interp-no">✗</span> none of {total}'
    return f'<span class="interp-part">◐</span> {ok} of {total}'


def layers_text(layers: list[int], n: int) -> str:
    if len(layers) == n:
        return f"all {n} layers"
    return f"layers {layer_ranges(layers)} of 0-{n - 1}"


def version_range(issue: object) -> str:
    below = getattr(issue, "below", None)
    at_least = getattr(issue, "at_least", None)
    if below and at_least:
        return f">= {at_least}, < {below}"
    if below:
        return f"< {below}"
    if at_least:
        return f">= {at_least}"
    return "all versions"


def first_sentence(text: str) -> str:
    # Definitions open with one sentence saying what the tensor is.
    cut = text.find(". ")
    return text if cut < 0 else text[: cut + 1]
