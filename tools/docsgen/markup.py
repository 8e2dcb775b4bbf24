"""Small HTML and URL helpers shared by the page generators.

Generated pages put their tables in raw HTML blocks: registry prose contains `*` and `_` (widths
such as n_heads*head_dim) that Markdown would read as emphasis, and raw HTML is passed through
untouched. Links inside raw HTML are not rewritten by MkDocs, so they are computed here for
directory URLs (`use_directory_urls: true`) and checked against the built site by the tests.
"""

from __future__ import annotations

import html
import posixpath
from collections.abc import Iterable, Sequence

__all__ = ["code", "esc", "link", "page_url", "rel", "table"]


def esc(text: object) -> str:
    return html.escape(str(text))


def code(text: object) -> str:
    return f"<code>{esc(text)}</code>"


def page_url(src: str) -> str:
    """The site-relative directory URL of a docs source path ('' for the home page)."""
    if src == "index.md":
        return ""
    if src.endswith("/index.md"):
        return src[: -len("index.md")]
    if src.endswith(".md"):
        return src[: -len(".md")] + "/"
    return src


def rel(from_src: str, to_src: str) -> str:
    """A relative link from one generated page to another page or file."""
    base = page_url(from_src) or "./"
    target = page_url(to_src)
    is_page = to_src.endswith(".md")
    path = posixpath.relpath(target or ".", base)
    if is_page:
        return "./" if path == "." else path + "/"
    return path


def link(from_src: str, to_src: str, text: str, *, is_code: bool = False) -> str:
    inner = code(text) if is_code else esc(text)
    return f'<a href="{esc(rel(from_src, to_src))}">{inner}</a>'


def table(
    headers: Sequence[str] | None,
    rows: Iterable[Sequence[str]],
    *,
    cls: str = "interp-table",
) -> str:
    """A raw HTML table; cells are HTML already (escape text with `esc`). No header row when
    `headers` is None (a key/value table)."""
    head = ""
    if headers is not None:
        head = "<thead><tr>" + "".join(f"<th>{h}</th>" for h in headers) + "</tr></thead>"
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    # One line, no blank lines: Markdown treats the whole block as raw HTML.
    return f'<table class="{cls}">{head}<tbody>{body}</tbody></table>'
