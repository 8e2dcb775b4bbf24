"""The generated reference pages: the points cheat sheet, one page per point and per family, the
backend support matrix, the name translations and the compatibility table.

Every sentence that states a fact about a point, a model or a backend comes from interp-core
(the registry, `ModelFacts`, the backends' `supports`, `KNOWN_ISSUES`); the prose here only
frames it. Pages are Markdown with raw HTML tables (see `docsgen.markup`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from docsgen.catalog import Family, families, family_for_model_type
from docsgen.diagram import (
    ROLE_COLORS,
    block_diagram,
    diagram_aliases,
    present_layers,
    why_absent,
)
from docsgen.markup import code, esc, link, rel, table
from interp_core.address import Address
from interp_core.compat import KNOWN_ISSUES
from interp_core.facts import ModelFacts
from interp_core.points import (
    ENGINES,
    POINTS,
    PointSpec,
    Role,
    Scope,
    Width,
    equivalent_for,
    layer_ranges,
)
from interp_core.shapes import point_shape

__all__ = [
    "ARCH_DIR",
    "ENGINE_TITLES",
    "POINTS_DIR",
    "BackendColumn",
    "architecture_page",
    "architectures_index",
    "backend_columns",
    "compatibility_page",
    "point_page",
    "points_index",
    "support_matrix_page",
    "trait_rows",
    "trait_tags",
    "translation_page",
    "translation_table",
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


def _front(title: str, hide: tuple[str, ...] = ()) -> str:
    lines = ["---", f"title: {title}"]
    if hide:
        lines.append("hide:")
        lines.extend(f"  - {item}" for item in hide)
    lines.append("---")
    return "\n".join(lines) + "\n\n"


def _generated_note() -> str:
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
        return (
            f"multi-head latent (MLA): {f.n_heads} heads, kv_lora_rank {m.kv_lora_rank}, "
            f"qk head dim {m.qk_head_dim}, v head dim {m.v_head_dim}"
        )
    if f.n_kv_heads == 1 and f.n_heads > 1:
        return f"multi-query: {f.n_heads} query heads share 1 key/value head"
    if f.n_kv_heads < f.n_heads:
        return f"grouped-query: {f.n_heads} query heads, {f.n_kv_heads} key/value heads"
    return f"multi-head: {f.n_heads} heads"


def _norms(f: ModelFacts) -> str:
    if f.post_norms_only:
        return "post-norms only (after each sublayer, none before)"
    if f.sandwich_norms:
        return "sandwich: a norm before and after each sublayer"
    return "pre-norm (before each sublayer)"


def _layer_kinds(f: ModelFacts) -> str:
    counts: dict[str, int] = {}
    for kind in f.layer_kinds or ("full",) * f.n_layers:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def _mlp(f: ModelFacts) -> str:
    parts = []
    if f.has_dense_layers:
        kind = "gated (act(gate)·up)" if f.gated_mlp else "plain (fc → act → proj)"
        parts.append(f"dense {kind}, d_mlp {f.d_mlp}")
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
        parts.append(text)
    return "; ".join(parts)


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
        ("attention logit softcap", _num(f.attn_logit_softcap)),
        ("norm placement", _norms(f)),
        (
            "block",
            "parallel: attention and MLP read the same input"
            if f.parallel_attn_mlp
            else "sequential",
        ),
        ("MLP", _mlp(f)),
        ("residual multiplier", _num(f.residual_multiplier)),
        ("embedding multiplier", _num(f.embedding_multiplier)),
        ("logit multiplier", _num(f.logit_multiplier)),
        ("final logit softcap", _num(f.final_logit_softcap)),
        ("residual streams (hyper-connections)", str(f.n_streams) if f.n_streams > 1 else NO),
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
    kinds = set(f.layer_kinds or ())
    if kinds - {"full", "sliding"}:
        tags.append("hybrid mixers")
    if f.sliding_window:
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
    if f.n_streams > 1:
        tags.append("hyper-connections")
    return tags


def _tags_html(tags: list[str]) -> str:
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


def _unregistered_first_party() -> list[str]:
    from interp_core.backends import FIRST_PARTY, registered_backends

    known = set(registered_backends())
    return [name for name in FIRST_PARTY if name not in known]


def _served_cell(column: BackendColumn, point: str) -> str:
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


# --- point pages --------------------------------------------------------------------------------
def _representative(point: str) -> Family | None:
    """The family a point page draws: one that has the point as a tensor of its own (not an
    alias of a neighbour), preferring the reference decoder, else the first in order."""
    having = [f for f in families() if why_absent(point, f.facts) is None]
    distinct = [f for f in having if point not in diagram_aliases(f.facts)] or having
    for family in distinct:
        if family.key == "llama":
            return family
    return distinct[0] if distinct else None


def _badges(spec: PointSpec) -> str:
    items = [
        "trunk point (once per forward pass)" if spec.scope is Scope.TRUNK else "layer point",
        ROLE_TITLES[spec.role],
        f"width {spec.width.rule}",
        "steerable" if spec.writable else "capture-only",
        "integer tensor" if spec.dtype_kind == "int" else "float tensor",
    ]
    if spec.multi_stream_only:
        items.append("multi-stream trunks only")
    if spec.accepts_stream:
        items.append("takes .stream-K on multi-stream trunks")
    color = ROLE_COLORS[spec.role]
    return (
        f'<p class="interp-badges" style="--role:{color}">'
        + "".join(f'<span class="interp-badge">{esc(i)}</span>' for i in items)
        + "</p>"
    )


def point_page(name: str) -> str:
    spec = POINTS[name]
    src = point_src(name)
    out = [_front(name, ("navigation", "toc")), f"# `{name}`\n\n", _badges(spec), "\n\n"]
    out.append(f'<p class="interp-definition">{esc(spec.definition)}</p>\n\n')
    if not spec.writable:
        out.append(
            f'<p class="interp-readonly"><strong>Why it cannot be steered:</strong> '
            f"{esc(spec.read_only_reason)}</p>\n\n"
        )
    out.append(_generated_note() + "\n\n")

    out.append("## Address and shape\n\n")
    rows = [
        ["address", code(address_example(spec))],
        ["shape", code(shape_formula(spec))],
        ["width rule", code(spec.width.rule)],
        ["writable (steer)", YES if spec.writable else "no: capture-only"],
        ["dtype", spec.dtype_kind],
    ]
    if spec.accepts_stream:
        rows.append(
            [
                "one stream",
                f"{code(str(Address(name, 3, 2)))} → {code(shape_formula(spec, stream=True))} "
                "(multi-stream trunks, where the bare form is refused)",
            ]
        )
    out.append(table(None, rows, cls="interp-table interp-kv") + "\n\n")

    family = _representative(name)
    out.append("## Where it sits\n\n")
    if family is None:
        out.append("No family the site describes has this point.\n\n")
    else:
        svg, _ = block_diagram(
            family.facts,
            href=lambda p: rel(src, point_src(p)),
            highlight=name,
            uid=f"pt-{name}",
        )
        caption = (
            f"One block of the {link(src, arch_src(family.key), family.key, is_code=True)} "
            f"family ({esc(family.facts_source)}), with {code(name)} ringed. Click any point "
            "for its page."
        )
        out.append(
            f'<figure class="interp-figure"><div class="interp-diagram-wrap">{svg}</div>'
            f"<figcaption>{caption}</figcaption></figure>\n\n"
        )

    out.append("## Names in other engines\n\n")
    rows = []
    for engine in ENGINES:
        eq = spec.equivalent(engine)
        rows.append(
            [
                ENGINE_TITLES[engine],
                code(eq.name) if eq.name else "<em>no equivalent</em>",
                esc(eq.note),
            ]
        )
    out.append(table(["engine", "name", "note"], rows) + "\n\n")
    variants = _model_aware(name)
    if variants:
        out.append(
            "The name depends on the model for these engines (from "
            "<code>interp_core.points.equivalent_for</code>):\n\n"
        )
        out.append(table(["engine", "name on the model", "families"], variants) + "\n\n")

    out.append("## Backends\n\n")
    out.append(_backend_rows_for_point(src, name))

    out.append("## On each architecture\n\n")
    rows = []
    for fam in families():
        facts = fam.facts
        reason = why_absent(name, facts)
        fam_link = link(src, arch_src(fam.key), fam.key, is_code=True)
        if reason is not None:
            rows.append([fam_link, '<span class="interp-no">absent</span>', "", esc(reason)])
            continue
        layers = present_layers(name, facts)
        where = "trunk" if layers is None else _layers_text(layers, facts.n_layers)
        width = concrete_width(name, facts, first_layer(name, facts))
        rows.append([fam_link, f'<span class="interp-yes">✓</span> {where}', code(width), ""])
    out.append(table(["family", "has it", "width", "why not"], rows) + "\n")
    return "".join(out)


def _layers_text(layers: list[int], n: int) -> str:
    if len(layers) == n:
        return f"all {n} layers"
    return f"layers {layer_ranges(layers)} of 0-{n - 1}"


def _model_aware(name: str) -> list[list[str]]:
    """Engines whose name for the point differs between families."""
    rows = []
    for engine in ENGINES:
        by_name: dict[str, list[str]] = {}
        for fam in families():
            if why_absent(name, fam.facts) is not None:
                continue
            eq = equivalent_for(name, engine, fam.facts)
            by_name.setdefault(eq.name or "", []).append(fam.key)
        if len(by_name) > 1:
            for found, keys in sorted(by_name.items()):
                shown = code(found) if found else "<em>no equivalent</em>"
                rows.append([ENGINE_TITLES[engine], shown, esc(", ".join(keys))])
    return rows


def _backend_rows_for_point(src: str, name: str) -> str:
    columns = backend_columns()
    rows = []
    for column in columns:
        detail = ""
        if column.error:
            detail = esc(column.error)
        else:
            refusals = column.refusals.get(name, {})
            detail = "<br>".join(
                f"{esc(reason)} <em>({esc(', '.join(keys))})</em>"
                for reason, keys in refusals.items()
            )
        rows.append([code(column.name), _served_cell(column, name), detail])
    text = ""
    if rows:
        text = table(["backend", "families served", "refusals"], rows) + "\n\n"
    missing = _unregistered_first_party()
    if missing:
        text += (
            f"<p>Not registered where this site was built: {', '.join(code(m) for m in missing)}. "
            f"Their verdicts appear here once their package is installed "
            f"({link(src, MATRIX, 'support matrix')}).</p>\n\n"
        )
    return text


# --- the cheat sheet --------------------------------------------------------------------------
def points_index() -> str:
    src = f"{POINTS_DIR}/index.md"
    out = [_front("Points cheat sheet", ("toc",)), "# Points cheat sheet\n\n"]
    out.append(
        f"<p>All {len(POINTS)} standardized points in forward order. An address is a point "
        "name, its layer for layer points, and on hyper-connection trunks its stream: "
        "<code>embeddings</code>, <code>resid_post.10</code>, "
        "<code>resid_post.5.stream-2</code>. Each name links to the point's page: definition, "
        "shape, where it sits in the block, its names in other engines, and which backends "
        "and architectures have it.</p>\n\n"
    )
    out.append(_generated_note() + "\n\n")
    rows = []
    for name, spec in POINTS.items():
        tl = spec.transformer_lens.name
        rows.append(
            [
                link(src, point_src(name), name, is_code=True),
                "trunk" if spec.scope is Scope.TRUNK else "layer",
                esc(ROLE_TITLES[spec.role]),
                code(spec.width.rule),
                YES if spec.writable else "capture",
                code(tl) if tl else NO,
                esc(first_sentence(spec.definition)),
            ]
        )
    out.append(
        table(
            ["point", "scope", "role", "width", "steer", "TransformerLens", "what it is"],
            rows,
            cls="interp-table interp-cheatsheet",
        )
        + "\n"
    )
    return "".join(out)


def first_sentence(text: str) -> str:
    # Definitions open with one sentence saying what the tensor is.
    cut = text.find(". ")
    return text if cut < 0 else text[: cut + 1]


# --- architecture pages -----------------------------------------------------------------------
def architecture_page(family: Family) -> str:
    src = arch_src(family.key)
    facts = family.facts
    out = [_front(f"{family.key} family", ("navigation", "toc")), f"# `{family.key}` family\n\n"]
    classes = ", ".join(code(c) for c in family.architectures)
    intro = []
    if classes:
        intro.append(f"HF classes: {classes}.")
    if family.primary is not None:
        intro.append(
            f"Facts below are read from the bundled config of {code(family.primary.model_id)}."
        )
    else:
        intro.append(
            "No real checkpoint config ships with interp-core for this family; the facts below "
            "are those of its tiny test model (<code>interp_eager.testing.families</code>), "
            "whose config exercises the family's options at toy sizes."
        )
    if family.test_notes:
        intro.append(f"The tiny test model: {esc(family.test_notes)}")
    out.append(f"<p>{' '.join(intro)}</p>\n\n")
    out.append(f"<p>{_tags_html(trait_tags(facts))}</p>\n\n")
    out.append(_generated_note() + "\n\n")

    out.append("## Block diagram\n\n")
    svg, left_out = block_diagram(
        facts, href=lambda p: rel(src, point_src(p)), uid=f"arch-{family.key}"
    )
    caption = [
        "Residual spine in the middle, attention above, MLP below; markers are the points, "
        "coloured by role and linked to their pages. Faded markers are points this model lacks "
        "on a path it has; hover for the reason."
    ]
    aliases = diagram_aliases(facts)
    if aliases:
        pairs = ", ".join(f"{code(a)} = {code(b)}" for a, b in aliases.items())
        caption.append(f"Marked “=” (one tensor on this model): {pairs}.")
    if left_out:
        caption.append(
            "Not drawn, because the structure they live on does not exist here: "
            + ", ".join(link(src, point_src(p), p, is_code=True) for p in left_out)
            + " (reasons below)."
        )
    out.append(
        f'<figure class="interp-figure"><div class="interp-diagram-wrap">{svg}</div>'
        f"<figcaption>{' '.join(caption)}</figcaption></figure>\n\n"
    )

    out.append("## Traits\n\n")
    out.append(table(["trait", "value"], [[esc(k), esc(v)] for k, v in trait_rows(facts)]) + "\n\n")

    out.append("## Checkpoints\n\n")
    out.append(_checkpoints_table(family) + "\n\n")
    differing = _presence_differences(family)
    if differing:
        out.append(differing + "\n\n")

    present = [n for n in POINTS if why_absent(n, facts) is None]
    out.append(f"## Points ({len(present)} of {len(POINTS)})\n\n")
    rows = []
    for name in present:
        spec = POINTS[name]
        layers = present_layers(name, facts)
        layer_text = "trunk" if layers is None else _layers_text(layers, facts.n_layers)
        first = first_layer(name, facts)
        tl = equivalent_for(name, "transformer_lens", facts).name
        addr = address_example(spec, facts)
        if spec.accepts_stream and facts.n_streams > 1:
            addr = str(Address(name, first or 0, 0))
        rows.append(
            [
                link(src, point_src(name), name, is_code=True),
                esc(layer_text),
                code(concrete_width(name, facts, first)),
                code(concrete_shape(name, facts, first)),
                YES if spec.writable else "capture",
                code(addr),
                code(tl) if tl else NO,
            ]
        )
    out.append(
        table(
            ["point", "layers", "width", "shape", "steer", "address", "TransformerLens here"],
            rows,
        )
        + "\n\n"
    )
    absent = [n for n in POINTS if n not in present]
    if absent:
        out.append(f"## Absent points ({len(absent)})\n\n")
        rows = [
            [link(src, point_src(n), n, is_code=True), esc(why_absent(n, facts) or "")]
            for n in absent
        ]
        out.append(table(["point", "why it is absent, and what to use instead"], rows) + "\n\n")
    issues = [i for i in KNOWN_ISSUES if family.model_type in i.model_types]
    if issues:
        out.append("## Known issues\n\n")
        rows = [[esc(i.library), esc(_range(i)), esc(i.problem), esc(i.fix)] for i in issues]
        out.append(table(["library", "affected", "problem", "fix"], rows) + "\n\n")
        out.append(f"<p>All entries: {link(src, COMPAT, 'compatibility')}.</p>\n")
    return "".join(out)


def _checkpoints_table(family: Family) -> str:
    sources: list[tuple[str, ModelFacts]] = [(c.model_id, c.facts) for c in family.checkpoints]
    if family.test_facts is not None:
        sources.append(("tiny test model", family.test_facts))
    rows = []
    for label, f in sources:
        experts = f"{f.moe.n_experts} / top-{f.moe.experts_per_token}" if f.moe else NO
        rows.append(
            [
                code(label) if "/" in label else esc(label),
                str(f.n_layers),
                str(f.d_model),
                f"{f.n_heads} / {f.n_kv_heads}",
                str(f.head_dim),
                str(f.d_mlp) if f.d_mlp else NO,
                experts,
                str(f.sliding_window) if f.sliding_window else NO,
                str(f.vocab_size),
                YES if f.tied_embeddings else NO,
            ]
        )
    return table(
        [
            "config",
            "layers",
            "d_model",
            "heads / kv",
            "head_dim",
            "d_mlp",
            "experts",
            "window",
            "vocab",
            "tied",
        ],
        rows,
    )


def _presence_differences(family: Family) -> str:
    """Points whose presence differs between the family's configs (stated, not hidden)."""
    base = {n for n in POINTS if why_absent(n, family.facts) is None}
    sources: list[tuple[str, ModelFacts]] = [(c.model_id, c.facts) for c in family.checkpoints]
    if family.test_facts is not None:
        sources.append(("the tiny test model", family.test_facts))
    notes = []
    for label, f in sources:
        if f is family.facts:
            continue
        here = {n for n in POINTS if why_absent(n, f) is None}
        gained, lost = sorted(here - base), sorted(base - here)
        bits = []
        if gained:
            bits.append("also has " + ", ".join(code(n) for n in gained))
        if lost:
            bits.append("lacks " + ", ".join(code(n) for n in lost))
        if bits:
            notes.append(f"<li>{esc(label)} {' and '.join(bits)}</li>")
    if not notes:
        return ""
    return (
        f"<p>Points differ between configs of this family (the page describes "
        f"{esc(family.facts_source)}):</p><ul>{''.join(notes)}</ul>"
    )


def architectures_index() -> str:
    src = f"{ARCH_DIR}/index.md"
    out = [_front("Architectures", ("toc",)), "# Architectures\n\n"]
    out.append(
        "<p>One page per architecture family: a block diagram with every point on the data "
        "path, the points the family has and why the others are absent, its traits and its "
        "checkpoints. Families are those the engines are tested on (the tiny-model factory) and "
        "those whose real configs ship with interp-core.</p>\n\n"
    )
    out.append(_generated_note() + "\n\n")
    rows = []
    for fam in families():
        present = sum(1 for n in POINTS if why_absent(n, fam.facts) is None)
        rows.append(
            [
                link(src, arch_src(fam.key), fam.key, is_code=True),
                ", ".join(code(c) for c in fam.architectures) or "<em>test config only</em>",
                f"{present}",
                _tags_html(trait_tags(fam.facts)),
            ]
        )
    out.append(table(["family", "HF classes", "points", "traits"], rows) + "\n\n")
    out.append("## Which family has which point\n\n")
    header = ["point", *(link(src, arch_src(f.key), f.key) for f in families())]
    grid = []
    for name in POINTS:
        cells = [link(src, point_src(name), name, is_code=True)]
        for fam in families():
            reason = why_absent(name, fam.facts)
            cells.append(
                '<span class="interp-yes">●</span>'
                if reason is None
                else f'<span class="interp-dot" title="{esc(reason)}">·</span>'
            )
        grid.append(cells)
    out.append(table(header, grid, cls="interp-table interp-grid") + "\n")
    return "".join(out)


# --- matrix, translations, compatibility ------------------------------------------------------
def support_matrix_page() -> str:
    src = MATRIX
    columns = backend_columns()
    out = [_front("Backend support matrix", ("toc",)), "# Backend support matrix\n\n"]
    out.append(
        "<p>For every point and every registered backend: on how many of the families that "
        "have the point the backend serves it, asked through each backend's own "
        "<code>supports(point, facts)</code>. A point a family lacks is not counted against a "
        "backend: that refusal is the architecture's, and its reason is on the point's page. "
        "Steerability is the registry's: whether a write is meaningful at that point at all.</p>"
        "\n\n"
    )
    out.append(_generated_note() + "\n\n")
    headers = ["point", "steerable", *(code(c.name) for c in columns)]
    rows = []
    for name, spec in POINTS.items():
        rows.append(
            [
                link(src, point_src(name), name, is_code=True),
                YES if spec.writable else "capture-only",
                *(_served_cell(c, name) for c in columns),
            ]
        )
    out.append(table(headers, rows, cls="interp-table interp-matrix") + "\n\n")
    missing = _unregistered_first_party()
    if missing:
        out.append(
            "<p>First-party backends not registered in the environment that built this site: "
            f"{', '.join(code(m) for m in missing)}. Their columns appear when their package "
            "is installed; until then the install guide describes what they will serve.</p>\n\n"
        )
    for column in columns:
        if column.error:
            out.append(f"## `{column.name}`\n\n<p>Could not be asked: {esc(column.error)}</p>\n\n")
            continue
        if not column.refusals:
            continue
        out.append(f"## Refusals of `{column.name}`\n\n")
        rows = []
        for point, reasons in column.refusals.items():
            for reason, keys in reasons.items():
                rows.append([code(point), esc(reason), esc(", ".join(keys))])
        out.append(table(["point", "reason", "families"], rows) + "\n\n")
    return "".join(out)


def translation_table(engine: str, from_src: str) -> str:
    """The registry's names for one engine, as an HTML table linking to the point pages."""
    rows = []
    for name, spec in POINTS.items():
        eq = spec.equivalent(engine)
        rows.append(
            [
                link(from_src, point_src(name), name, is_code=True),
                code(eq.name) if eq.name else "<em>no equivalent</em>",
                esc(eq.note),
            ]
        )
    return table(["interp-engine", ENGINE_TITLES[engine], "note"], rows)


def translation_page() -> str:
    src = TRANSLATION
    out = [_front("Name translation", ("toc",)), "# Name translation\n\n"]
    out.append(
        "<p>What TransformerLens, nnsight and nnterp call each point. <code>{L}</code> stands "
        "for the layer. Names marked model-aware mean different tensors on different families; "
        "each point's page lists the name per family (from "
        "<code>interp_core.points.equivalent_for</code>).</p>\n\n"
    )
    out.append(_generated_note() + "\n\n")
    for engine in ENGINES:
        out.append(f"## {ENGINE_TITLES[engine]}\n\n")
        out.append(translation_table(engine, src) + "\n\n")
    return "".join(out)


def _range(issue: object) -> str:
    below = getattr(issue, "below", None)
    at_least = getattr(issue, "at_least", None)
    if below and at_least:
        return f">= {at_least}, < {below}"
    if below:
        return f"< {below}"
    if at_least:
        return f">= {at_least}"
    return "all versions"


def compatibility_page() -> str:
    src = COMPAT
    out = [_front("Compatibility", ("toc",)), "# Compatibility\n\n"]
    out.append(
        "<p>Library versions known to compute a family wrongly, and the fix. The backends warn "
        "at load when the running versions match an entry. This page is generated from "
        "<code>interp_core.compat.KNOWN_ISSUES</code>.</p>\n\n"
    )
    out.append(_generated_note() + "\n\n")
    rows = []
    for issue in KNOWN_ISSUES:
        fams = []
        for model_type in issue.model_types:
            fam = family_for_model_type(model_type)
            fams.append(
                link(src, arch_src(fam.key), model_type, is_code=True) if fam else code(model_type)
            )
        rows.append(
            [
                ", ".join(fams),
                esc(issue.library),
                esc(_range(issue)),
                esc(issue.problem),
                esc(issue.fix),
                esc(issue.source),
            ]
        )
    out.append(table(["family", "library", "affected", "problem", "fix", "source"], rows) + "\n")
    return "".join(out)


PAGE_BUILDERS: dict[str, Callable[[], str]] = {
    f"{POINTS_DIR}/index.md": points_index,
    f"{ARCH_DIR}/index.md": architectures_index,
    MATRIX: support_matrix_page,
    TRANSLATION: translation_page,
    COMPAT: compatibility_page,
}
