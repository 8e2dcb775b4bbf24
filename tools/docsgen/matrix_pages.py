"""The backend support matrix, the name translations and the compatibility table."""

from __future__ import annotations

from docsgen.catalog import family_for_model_type
from docsgen.markup import code, esc, link, table
from docsgen.page_parts import (
    COMPAT,
    ENGINE_TITLES,
    MATRIX,
    TRANSLATION,
    YES,
    arch_src,
    backend_columns,
    front,
    generated_note,
    point_src,
    served_cell,
    unregistered_first_party,
    version_range,
)
from interp_core.compat import all_known_issues
from interp_core.points import ENGINES, POINTS

__all__ = ["compatibility_page", "support_matrix_page", "translation_page", "translation_table"]


def support_matrix_page() -> str:
    src = MATRIX
    columns = backend_columns()
    out = [front("Backend support matrix", ("toc",)), "# Backend support matrix\n\n"]
    out.append(
        "<p>For every point and every registered backend: on how many of the families that "
        "have the point the backend serves it, asked through each backend's own "
        "<code>supports(point, facts)</code>. A point a family lacks is not counted against a "
        "backend: that refusal is the architecture's, and its reason is on the point's page. "
        "Steerability is the registry's: whether a write is meaningful at that point at all.</p>"
        "\n\n"
    )
    out.append(generated_note() + "\n\n")
    headers = ["point", "steerable", *(code(c.name) for c in columns)]
    rows = []
    for name, spec in POINTS.items():
        rows.append(
            [
                link(src, point_src(name), name, is_code=True),
                YES if spec.writable else "capture-only",
                *(served_cell(c, name) for c in columns),
            ]
        )
    out.append(table(headers, rows, cls="interp-table interp-matrix") + "\n\n")
    missing = unregistered_first_party()
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
    out = [front("Name translation", ("toc",)), "# Name translation\n\n"]
    out.append(
        "<p>What TransformerLens, nnsight and nnterp call each point. <code>{L}</code> stands "
        "for the layer. Names marked model-aware mean different tensors on different families; "
        "each point's page lists the name per family (from "
        "<code>interp_core.points.equivalent_for</code>).</p>\n\n"
    )
    out.append(generated_note() + "\n\n")
    for engine in ENGINES:
        out.append(f"## {ENGINE_TITLES[engine]}\n\n")
        out.append(translation_table(engine, src) + "\n\n")
    return "".join(out)


def compatibility_page() -> str:
    src = COMPAT
    out = [front("Compatibility", ("toc",)), "# Compatibility\n\n"]
    out.append(
        "<p>Library versions known to compute a family wrongly, and the fix. The backends warn "
        "at load when the running versions match an entry. This page is generated from "
        "<code>interp_core.compat.KNOWN_ISSUES</code> and the <code>known_issues</code> of "
        "every registered backend.</p>\n\n"
    )
    out.append(generated_note() + "\n\n")
    rows = []
    for issue in all_known_issues():
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
                esc(version_range(issue)),
                esc(issue.problem),
                esc(issue.fix),
                esc(issue.source),
            ]
        )
    out.append(table(["family", "library", "affected", "problem", "fix", "source"], rows) + "\n")
    return "".join(out)
