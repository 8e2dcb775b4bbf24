"""The points cheat sheet and one page per point: definition, shape, diagram, engine names,
backends and the architectures that have it."""

from __future__ import annotations

from docsgen.catalog import Family, families
from docsgen.diagram import ROLE_COLORS, block_diagram, diagram_aliases, present_layers, why_absent
from docsgen.markup import code, esc, link, rel, table
from docsgen.page_parts import (
    ENGINE_TITLES,
    MATRIX,
    NO,
    POINTS_DIR,
    ROLE_TITLES,
    YES,
    address_example,
    arch_src,
    backend_columns,
    concrete_width,
    first_layer,
    first_sentence,
    front,
    generated_note,
    layers_text,
    point_src,
    served_cell,
    shape_formula,
    unregistered_first_party,
)
from interp_core.address import Address
from interp_core.points import ENGINES, POINTS, PointSpec, Scope, equivalent_for

__all__ = ["point_page", "points_index"]


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
    out = [front(name, ("navigation", "toc")), f"# `{name}`\n\n", _badges(spec), "\n\n"]
    out.append(f'<p class="interp-definition">{esc(spec.definition)}</p>\n\n')
    if not spec.writable:
        out.append(
            f'<p class="interp-readonly"><strong>Why it cannot be steered:</strong> '
            f"{esc(spec.read_only_reason)}</p>\n\n"
        )
    out.append(generated_note() + "\n\n")

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
    out.append(
        "<p>Layers and widths are those of the checkpoint named in the last column; a family "
        "that ships no real config with interp-core shows its <em>tiny test config</em> "
        "instead (toy sizes from the test suite, not a real model).</p>\n\n"
    )
    rows = []
    for fam in families():
        facts = fam.facts
        reason = why_absent(name, facts)
        fam_link = link(src, arch_src(fam.key), fam.key, is_code=True)
        source = (
            code(fam.facts_source)
            if fam.primary is not None
            else '<span class="interp-test-config">tiny test config</span>'
        )
        if reason is not None:
            rows.append(
                [fam_link, '<span class="interp-no">absent</span>', "", esc(reason), source]
            )
            continue
        layers = present_layers(name, facts)
        where = "trunk" if layers is None else layers_text(layers, facts.n_layers)
        width = concrete_width(name, facts, first_layer(name, facts))
        rows.append(
            [fam_link, f'<span class="interp-yes">✓</span> {where}', code(width), "", source]
        )
    out.append(table(["family", "has it", "width", "why not", "facts from"], rows) + "\n")
    return "".join(out)


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
        rows.append([code(column.name), served_cell(column, name), detail])
    text = ""
    if rows:
        text = table(["backend", "families served", "refusals"], rows) + "\n\n"
    missing = unregistered_first_party()
    if missing:
        text += (
            f"<p>Not registered where this site was built: {', '.join(code(m) for m in missing)}. "
            f"Their verdicts appear here once their package is installed "
            f"({link(src, MATRIX, 'support matrix')}).</p>\n\n"
        )
    return text


def points_index() -> str:
    src = f"{POINTS_DIR}/index.md"
    out = [front("Points cheat sheet", ("toc",)), "# Points cheat sheet\n\n"]
    out.append(
        f"<p>All {len(POINTS)} standardized points in forward order. An address is a point "
        "name, its layer for layer points, and on hyper-connection trunks its stream: "
        "<code>embeddings</code>, <code>resid_post.10</code>, "
        "<code>resid_post.5.stream-2</code>. Each name links to the point's page: definition, "
        "shape, where it sits in the block, its names in other engines, and which backends "
        "and architectures have it.</p>\n\n"
    )
    out.append(generated_note() + "\n\n")
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
