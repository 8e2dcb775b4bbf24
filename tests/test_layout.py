"""Does the code still read as its architecture: no import circles, no module doing too much?

Two rules of the house checked over every source file of the monorepo (packages' `src/`,
`tools/`, `apps/`), from the import statements themselves — imports inside functions included,
because a circle closed lazily is still a circle a reader has to untangle:

- no import circle anywhere: the module graph has no strongly connected component of two or
  more modules (a package `__init__` that re-exports its submodules is not an edge back from
  them, since importing `a.b` does not require anything `a/__init__` re-exports);
- no module over `MAX_LINES` lines unless it is a single table of data, named here with why.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 800

# Modules allowed past MAX_LINES: each is one table of data (definitions a reader scans, not
# logic a reader follows). Adding one needs the same justification.
DATA_TABLES: dict[str, str] = {}


def _source_roots() -> Iterator[tuple[Path, str]]:
    """(folder, dotted prefix) for each import root of the repository."""
    for src in sorted(ROOT.glob("packages/*/src")):
        yield src, ""
    yield ROOT / "tools", "tools."
    yield ROOT / "apps", "apps."


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, prefix in _source_roots():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                found[prefix + ".".join(parts)] = path
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `module` imports, resolved to the most specific module that exists."""
    tree = ast.parse(path.read_text(), filename=str(path))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module, path)
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from a import b` names the submodule a.b when there is one, else a's attribute.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            # tools/ runs with itself on sys.path, so `docsgen.x` there means tools.docsgen.x
            for candidate in (name, f"tools.{name}"):
                while candidate and candidate not in known:
                    candidate = candidate.rpartition(".")[0]
                if candidate:
                    targets.add(candidate)
                    break
    targets.discard(module)
    return targets


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {module: _imports(module, path, known) for module, path in known.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read_from_real_imports() -> None:
    # Guards the reader itself: a resolver that lost edges would make the circle test vacuous.
    graph = _graph()
    assert "interp_core.points" in graph["interp_core"]
    assert "interp_core.errors" in graph["interp_core.address"]
    assert any(m.startswith("interp_core") for m in graph["interp_eager.model"])
    assert len(graph) > 100


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_anywhere_in_the_source() -> None:
    graph = _graph()
    circles = _circles(graph)
    described = [
        " <-> ".join(c) + ": " + "; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c)
        for c in circles
    ]
    assert not circles, "import circles:\n" + "\n".join(described)


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_holds_more_than_it_should(module: str) -> None:
    path = _modules()[module]
    lines = len(path.read_text().splitlines())
    if module in DATA_TABLES:
        return
    assert lines <= MAX_LINES, (
        f"{path.relative_to(ROOT)} has {lines} lines (limit {MAX_LINES}): split it along the "
        "concepts it holds, or, if it is one table of data, list it in DATA_TABLES with why"
    )
