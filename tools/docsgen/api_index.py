"""Where each name of `import interpoint` is documented: the umbrella's API page lists them.

`interpoint` re-exports `interp_core.__all__`; the reference for each name lives on the
interp-core page whose `::: module` directive covers the module that defines it. The list is
read from the code and the pages on every build, so a new public name appears by itself, and
one whose module no API page documents fails the build instead of being left out.
"""

from __future__ import annotations

import re
from pathlib import Path

from docsgen.markup import code, link, table

__all__ = ["public_api_table"]

_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)


def _pages_by_module(docs: Path) -> dict[str, tuple[str, str]]:
    """module documented -> (its API page relative to docs/, the page's title); first page wins."""
    found: dict[str, tuple[str, str]] = {}
    for page in sorted((docs / "api" / "core").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), "")
        for module in _DIRECTIVE.findall(text):
            found.setdefault(module, (page.relative_to(docs).as_posix(), title or page.stem))
    return found


def _defining_module(name: str, documented: list[str]) -> str:
    """The module a reader finds `name` under: its own, else a documented one exporting it."""
    import importlib

    import interp_core

    value = getattr(interp_core, name)
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module in documented:
        return module
    # Defined in an undocumented helper module (or a constant such as POINTS): the documented
    # module that exports the very same object in its __all__ is where its reference is.
    for candidate in documented:
        loaded = importlib.import_module(candidate)
        if name in getattr(loaded, "__all__", ()) and getattr(loaded, name, None) is value:
            return candidate
    return module if isinstance(module, str) else f"interp_core.{name}"


def public_api_table(src: str, docs: Path) -> str:
    """A table of every public name with the interp-core page that documents it."""
    import interp_core

    pages = _pages_by_module(docs)
    longest_first = sorted(pages, key=len, reverse=True)
    rows = []
    for name in sorted(n for n in interp_core.__all__ if n != "__version__"):
        module = _defining_module(name, sorted(pages))
        owner = next((m for m in longest_first if module == m or module.startswith(m + ".")), None)
        if owner is None:
            message = f"interp_core.{name} is defined in {module}, which no API page documents"
            raise ValueError(message)
        page, title = pages[owner]
        rows.append([code(name), code(module), link(src, page, title)])
    return table(["name", "module", "documented on"], rows)
