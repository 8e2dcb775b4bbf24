"""The generated part of the docs site, computed from the code every time the site is built.

`generate(root)` returns every generated file as {docs-relative path: text}: the points cheat
sheet and one page per point, one page per architecture family, the backend support matrix, the
name translations, the compatibility table, the validation and benchmark pages, the agent page
and `llms.txt`. `tools/docs_hook.py` hands them to MkDocs as virtual files, so nothing generated
is committed and nothing can go stale: change the registry and the next build shows it.

Hand-written pages can embed a generated table with a marker on a line of its own, e.g.
`<!-- interp:translation transformer_lens -->`; `expand_markers` replaces it (see MARKERS).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from docsgen import pages
from docsgen.catalog import families
from docsgen.http_api import HTTP_API, http_api_page
from docsgen.llms import llms_txt
from docsgen.markup import esc, link
from docsgen.results import benchmarks_page, validation_assets, validation_page
from docsgen.sae_pages import sae_hook_table
from interp_core.points import ENGINES, POINTS

__all__ = [
    "AGENTS_PAGE",
    "LLMS_TXT",
    "MARKERS",
    "expand_markers",
    "generate",
    "generated_assets",
    "nav_entries",
]

LLMS_TXT = "llms.txt"
AGENTS_PAGE = "reference/agents.md"
VALIDATION = "reference/validation.md"
BENCHMARKS = "reference/benchmarks.md"


def _agents_page(text: str) -> str:
    return (
        "---\ntitle: For coding agents\nhide:\n  - toc\n---\n\n# For coding agents\n\n"
        "<p>The whole public API and every point definition in one plain-text file: "
        f"{link(AGENTS_PAGE, LLMS_TXT, 'llms.txt')} at the root of this site. It is generated "
        "from the code (signatures and docstrings read statically, points from the registry) on "
        "every build. Its contents:</p>\n\n"
        '<pre class="interp-llms"><code>'
        + text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        + "</code></pre>\n"
    )


def generate(root: Path) -> dict[str, str]:
    """Every generated file, keyed by its path relative to docs/."""
    files: dict[str, str] = {}
    for src, builder in pages.PAGE_BUILDERS.items():
        files[src] = builder()
    for name in POINTS:
        files[pages.point_src(name)] = pages.point_page(name)
    for family in families():
        files[pages.arch_src(family.key)] = pages.architecture_page(family)
    files[VALIDATION] = validation_page(root)
    files[BENCHMARKS] = benchmarks_page(root)
    files[HTTP_API] = http_api_page(root)
    text = llms_txt(root)
    files[LLMS_TXT] = text
    files[AGENTS_PAGE] = _agents_page(text)
    return files


def generated_assets(root: Path) -> dict[str, Path]:
    """Binary files the generated pages show (the validator's plot), keyed by docs/ path."""
    return validation_assets(root)


def nav_entries(section: str) -> list[dict[str, str]]:
    """Nav items for a generated section ("points" or "architectures"), after its index."""
    if section == "points":
        return [{name: pages.point_src(name)} for name in POINTS]
    if section == "architectures":
        return [{family.key: pages.arch_src(family.key)} for family in families()]
    message = f"no generated nav section {section!r}"
    raise KeyError(message)


def _translation(src: str, engine: str) -> str:
    if engine not in ENGINES:
        message = f"interp:translation needs one of {', '.join(ENGINES)}, got {engine!r}"
        raise ValueError(message)
    return pages.translation_table(engine, src)


def _point_list(src: str, *names: str) -> str:
    chosen = names or tuple(POINTS)
    for name in chosen:
        if name not in POINTS:
            message = f"interp:points names {name!r}, which is not a point"
            raise ValueError(message)
    items = "".join(
        f"<li>{link(src, pages.point_src(n), n, is_code=True)}: "
        f"{esc(pages.first_sentence(POINTS[n].definition))}</li>"
        for n in chosen
    )
    return f'<ul class="interp-point-list">{items}</ul>'


def _count(src: str) -> str:
    return str(len(POINTS))


def _public_api(src: str) -> str:
    from docsgen.api_index import public_api_table

    return public_api_table(src, Path(__file__).resolve().parents[2] / "docs")


MARKERS: dict[str, Callable[..., str]] = {
    "translation": _translation,
    "points": _point_list,
    "point-count": _count,
    "public-api": _public_api,
    "sae-hooks": sae_hook_table,
}
_MARKER = re.compile(r"<!--\s*interp:([a-z-]+)((?:\s+[A-Za-z0-9_.-]+)*)\s*-->")


def expand_markers(markdown: str, src: str) -> str:
    """Replace `<!-- interp:NAME args -->` markers with generated HTML; unknown names raise."""

    def replace(match: re.Match[str]) -> str:
        name, args = match.group(1), match.group(2).split()
        builder = MARKERS.get(name)
        if builder is None:
            message = f"{src}: unknown marker interp:{name}; known: {', '.join(MARKERS)}"
            raise ValueError(message)
        return builder(src, *args)

    return _MARKER.sub(replace, markdown)
