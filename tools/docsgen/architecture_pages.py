"""One page per architecture family and their index: block diagram, traits, checkpoints, the
points the family has and why the others are absent."""

from __future__ import annotations

from docsgen.catalog import Family, families
from docsgen.diagram import block_diagram, diagram_aliases, present_layers, why_absent
from docsgen.markup import code, esc, link, rel, table
from docsgen.page_parts import (
    ARCH_DIR,
    COMPAT,
    NO,
    YES,
    address_example,
    arch_src,
    concrete_shape,
    concrete_width,
    first_layer,
    front,
    generated_note,
    layers_text,
    point_src,
    tags_html,
    trait_rows,
    trait_tags,
    version_range,
)
from interp_core.address import Address
from interp_core.compat import all_known_issues
from interp_core.facts import ModelFacts
from interp_core.known_models import config_provenance
from interp_core.points import POINTS, equivalent_for

__all__ = ["architecture_page", "architectures_index"]


def architecture_page(family: Family) -> str:
    src = arch_src(family.key)
    facts = family.facts
    out = [front(f"{family.key} family", ("navigation", "toc")), f"# `{family.key}` family\n\n"]
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
            "are those of its tiny test model (<code>interp_testmodels.configs</code>), "
            "whose config exercises the family's options at toy sizes."
        )
    out.append(f"<p>{' '.join(intro)}</p>\n\n")
    if family.test_notes and family.primary is not None:
        # The diagram and facts are the real checkpoint's; the test model is a different,
        # toy config, so it is said apart and labelled, never beside the facts as if one.
        out.append(
            '<div class="admonition info interp-test-config"><p class="admonition-title">'
            "The tiny test config (not the checkpoint above)</p><p>The test suite builds a "
            f"toy model of this family with random weights: {esc(family.test_notes)}</p>"
            "</div>\n\n"
        )
    elif family.test_notes:
        out.append(
            '<p class="interp-test-config"><strong>Tiny test config:</strong> '
            f"{esc(family.test_notes)}</p>\n\n"
        )
    out.append(f"<p>{tags_html(trait_tags(facts))}</p>\n\n")
    out.append(generated_note() + "\n\n")

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
        layer_text = "trunk" if layers is None else layers_text(layers, facts.n_layers)
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
    issues = [i for i in all_known_issues() if family.model_type in i.model_types]
    if issues:
        out.append("## Known issues\n\n")
        rows = [[esc(i.library), esc(version_range(i)), esc(i.problem), esc(i.fix)] for i in issues]
        out.append(table(["library", "affected", "problem", "fix"], rows) + "\n\n")
        out.append(f"<p>All entries: {link(src, COMPAT, 'compatibility')}.</p>\n")
    return "".join(out)


def _reconstructed_from(entry: dict) -> str:
    """'reconstructed from transformers 5.19 defaults, N keys corrected from public sources'."""
    release = str(entry["source"]).split(" ")[1]
    base = f" for {entry['base']}" if "base" in entry else ""
    if "base" in entry and entry["base"] is None:  # the class's docstring names no checkpoint
        base = " (generic: the class names no checkpoint)"
    text = f"reconstructed from transformers {release} defaults{base}"
    n = len(entry.get("corrections", {}))
    if n:
        text += f", {n} key{'s' if n != 1 else ''} corrected from public sources"
    gone = len(entry.get("omitted", []))
    if gone:
        text += f", {gone} key{'s' if gone != 1 else ''} of a part it lacks left out"
    return text


def _checkpoints_table(family: Family) -> str:
    sources: list[tuple[str, ModelFacts]] = [(c.model_id, c.facts) for c in family.checkpoints]
    if family.test_facts is not None:
        sources.append(("tiny test model", family.test_facts))
    rows = []
    reconstructed = False
    for label, f in sources:
        experts = f"{f.moe.n_experts} / top-{f.moe.experts_per_token}" if f.moe else NO
        name = code(label) if "/" in label else esc(label)
        entry = config_provenance(label) if "/" in label else None
        if entry is not None:
            reconstructed = True
            name += f" <em>({_reconstructed_from(entry)})</em>"
        rows.append(
            [
                name,
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
    note = (
        "\n\n<p><em>Reconstructed</em>: not a downloaded file but transformers' documented "
        "defaults for that checkpoint (or, where it says so, for another size of the family), "
        "with any key the defaults get wrong corrected to the value public sources state, and "
        "bundled after its headline dimensions matched independent public pages "
        "(<code>interp_core/model_configs/PROVENANCE.json</code> names the defaults, every "
        "corrected key's sources and the pages checked).</p>"
        if reconstructed
        else ""
    )
    return (
        table(
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
        + note
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
    out = [front("Architectures", ("toc",)), "# Architectures\n\n"]
    out.append(
        "<p>One page per architecture family: a block diagram with every point on the data "
        "path, the points the family has and why the others are absent, its traits and its "
        "checkpoints. Families are those the engines are tested on (the tiny-model factory) and "
        "those whose real configs ship with interp-core.</p>\n\n"
    )
    out.append(generated_note() + "\n\n")
    rows = []
    for fam in families():
        present = sum(1 for n in POINTS if why_absent(n, fam.facts) is None)
        rows.append(
            [
                link(src, arch_src(fam.key), fam.key, is_code=True),
                ", ".join(code(c) for c in fam.architectures) or "<em>test config only</em>",
                f"{present}",
                tags_html(trait_tags(fam.facts)),
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
