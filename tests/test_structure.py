"""Does each part of the monorepo import only what its place in the architecture allows?

Read from the import statements themselves (an AST scan, so nothing is imported to check it):
`import x`, `from x import y` at any depth — inside functions and `if TYPE_CHECKING:` blocks
too, since a lazy import is still a dependency — and `importlib.import_module("x")` /
`__import__("x")` with a literal name. The rules, each its own test:

- Backends are reached by name through the registry (`interp_core.load_model(path,
  backend="eager")`), never imported: no file outside `packages/interp-eager` imports
  `interp_eager`, and none under `packages/interp-validator`, `packages/interp-sizer`,
  `tools/docsgen` or `apps/` (sources and tests alike) imports `interp_eager` or `interp_vllm`.
- The test models (`interp_testmodels`) import no backend and no validator: among our packages,
  only the core.
- The sizer's and the validator's sources import, among our packages, only the core. The one
  exception is the validator's `run` extra, which brings `interp-testmodels` (the tiny families
  and the SmolLM2 conversion a sweep runs on): the validator may import `interp_testmodels`, but
  only inside functions, so every validator module still imports with the core alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Our import names, one per distribution under packages/.
OURS = frozenset(p.name for p in ROOT.glob("packages/*/src/*") if (p / "__init__.py").is_file())
BACKENDS = frozenset({"interp_eager", "interp_vllm"})


@dataclass(frozen=True)
class _Import:
    module: str  # the dotted name imported
    line: int
    lazy: bool  # inside a function, or under `if TYPE_CHECKING:`: not run at module import

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]


def _literal_import(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module("x")`, `import_module("x")`, `__import__`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_in(source: str, filename: str = "<source>") -> list[_Import]:
    found: list[_Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(_Import(alias.name, node.lineno, lazy) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(_Import(node.module, node.lineno, lazy))
        elif isinstance(node, ast.Call):
            named = _literal_import(node)
            if named is not None:
                found.append(_Import(named, node.lineno, lazy))
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, lazy)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source, filename=filename), False)
    return found


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _violations(files: Iterator[Path], allowed: set[str] | None, banned: set[str]) -> list[str]:
    """`file:line imports x` for each import of a banned name, or of one of ours not allowed."""
    problems = []
    for path in files:
        for found in _imports_in(path.read_text(), str(path)):
            ours = found.top in OURS
            if found.top in banned or (allowed is not None and ours and found.top not in allowed):
                problems.append(f"{path.relative_to(ROOT)}:{found.line} imports {found.module}")
    return problems


def test_the_scanner_sees_lazy_guarded_and_string_imports() -> None:
    # Guards the scanner: one that missed a kind of import would make every rule here vacuous.
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from interp_vllm.model import VLLMModel\n"
        "def load():\n"
        "    from interp_eager.model import EagerModel\n"
        "    import importlib\n"
        "    return importlib.import_module('interp_eager.backend')\n"
        "class Holder:\n"
        "    sizer = __import__('interp_sizer')\n"
        "from . import sibling\n"
    )
    found = {(i.module, i.lazy) for i in _imports_in(source)}
    assert ("interp_vllm.model", True) in found
    assert ("interp_eager.model", True) in found
    assert ("interp_eager.backend", True) in found
    assert ("interp_sizer", False) in found
    assert ("os", False) in found
    assert not any(module.startswith("sibling") for module, _ in found)
    assert {"interp_core", "interp_eager", "interp_vllm", "interp_testmodels"} <= OURS


def test_no_file_outside_the_eager_package_imports_it() -> None:
    everywhere = [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not path.relative_to(ROOT).parts[0].startswith(".")
        and "site-packages" not in path.parts
        and not path.is_relative_to(ROOT / "packages" / "interp-eager")
    ]
    problems = _violations(iter(everywhere), None, {"interp_eager"})
    assert not problems, "load the eager backend by name (load_model(..., backend='eager')):\n" + (
        "\n".join(problems)
    )


def test_validator_sizer_docs_and_apps_import_no_backend() -> None:
    files = _python_files(
        "packages/interp-validator", "packages/interp-sizer", "tools/docsgen", "apps"
    )
    problems = _violations(files, None, set(BACKENDS))
    assert not problems, "reach backends through the registry, never by import:\n" + (
        "\n".join(problems)
    )


def test_test_models_import_no_backend_and_no_validator() -> None:
    files = _python_files("packages/interp-testmodels")
    problems = _violations(files, {"interp_core", "interp_testmodels"}, set())
    assert not problems, "interp-testmodels depends on the core only among ours:\n" + (
        "\n".join(problems)
    )


def test_sizer_and_validator_sources_import_only_the_core() -> None:
    sizer = _violations(
        _python_files("packages/interp-sizer/src"), {"interp_core", "interp_sizer"}, set()
    )
    validator = _violations(
        _python_files("packages/interp-validator/src"),
        {"interp_core", "interp_validator", "interp_testmodels", "interp_torch"},
        set(),
    )
    # The run extra's interp_testmodels and interp_torch (the bench's patching sweeps) only
    # inside functions: modules import with the core.
    module_level = [
        f"{path.relative_to(ROOT)}:{found.line} imports {found.module} at module level"
        for path in _python_files("packages/interp-validator/src")
        for found in _imports_in(path.read_text(), str(path))
        if found.top in ("interp_testmodels", "interp_torch") and not found.lazy
    ]
    problems = sizer + validator + module_level
    assert not problems, "among our packages only interp_core (see the docstring):\n" + (
        "\n".join(problems)
    )
