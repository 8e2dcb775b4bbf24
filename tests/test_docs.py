"""Does the docs site build strictly, say what the code says, and do its examples run?

- The site is built once per session with `mkdocs build --strict` (every broken link, missing
  page or docstring problem fails it), and the generated pages are checked against the registry
  they come from: every point's definition and engine names, every family's absent points with
  their reasons, every point in llms.txt. The pages are generated at build time and never
  committed (a committed copy under docs/ fails the build), so a registry change is on the next
  build; these checks make sure the generator keeps saying all of it.
- Every ```python block of every hand-written page runs, in page order in one namespace per page
  (see docs/guides/writing-docs.md for the conventions: model ids map to the embedded SmolLM2 or
  to the tiny test model of the same architecture; blocks marked `<!-- no-run: why -->` are
  compiled and their interp imports checked).
- Hand-written pages may name only points and addresses that exist.
- Headless Chromium screenshots of a point page and an architecture page show the diagram and the
  tables (skipped without Chromium, unless INTERP_REQUIRE names it).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import html
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from docsgen import LLMS_TXT, generate, generated_assets  # noqa: E402
from docsgen.catalog import families  # noqa: E402
from docsgen.diagram import why_absent  # noqa: E402
from docsgen.llms import QUICK_START  # noqa: E402
from docsgen.results import benchmarks_page, validation_page  # noqa: E402

from interp_core.address import Address  # noqa: E402
from interp_core.errors import AddressError  # noqa: E402
from interp_core.known_models import facts_for, known_model_ids  # noqa: E402
from interp_core.points import ENGINES, POINTS  # noqa: E402

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
NO_RUN = re.compile(r"<!--\s*no-run:\s*(\S.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<info>[^\n`]*)$")
ADDRESS_LIKE = re.compile(r"[a-z][a-z0-9_]*\.\d+(\.[a-z][a-z0-9_]*-\d+)*")
PATH_LIKE = re.compile(r"path\.[A-Za-z0-9_.]+")
BARE_NAME = re.compile(r"[a-z][a-z0-9_]*")
# A point written with a symbolic layer: resid_pre.L, resid_post.L-1, resid_mid.{L}.stream-K
SYMBOLIC = re.compile(r"([a-z][a-z0-9_]*)\.(?:L|\{L\}|N)\b.*")


def _required() -> set[str]:
    raw = os.environ.get("INTERP_REQUIRE", "")
    return {part.strip().lower() for part in raw.replace(";", ",").split(",") if part.strip()}


def _require(name: str, present: bool) -> None:
    if present:
        return
    if name in _required():
        pytest.fail(f"{name} is not available here, and INTERP_REQUIRE names it")
    pytest.skip(f"{name} is not available here")


# --- the built site ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    assert "WARNING" not in log, log[-6000:]
    return out


def _page(site: Path, src: str) -> str:
    url = src[: -len("index.md")] if src.endswith("index.md") else src[: -len(".md")] + "/"
    return (site / url / "index.html").read_text(encoding="utf-8")


def test_the_site_builds_strictly_with_every_section(site: Path) -> None:
    for src in [
        "index.md",
        "guides/install.md",
        "reference/points/index.md",
        "reference/architectures/index.md",
        "reference/support-matrix.md",
        "reference/translation.md",
        "reference/compatibility.md",
        "reference/validation.md",
        "reference/benchmarks.md",
        "reference/agents.md",
        "api/core/points.md",
        "api/eager.md",
        "api/testmodels.md",
    ]:
        assert "</html>" in _page(site, src), src
    assert (site / "llms.txt").is_file()


def test_every_point_page_says_what_the_registry_says(site: Path) -> None:
    index = _page(site, "reference/points/index.md")
    for name, spec in POINTS.items():
        page = _page(site, f"reference/points/{name}.md")
        assert html.escape(spec.definition) in page, f"{name}: definition missing or stale"
        assert f'data-point="{name}"' in page, f"{name}: not on its own diagram"
        for engine in ENGINES:
            eq = spec.equivalent(engine)
            if eq.name:
                assert html.escape(eq.name) in page, f"{name}: {engine} name missing"
            if eq.note:
                assert html.escape(eq.note) in page, f"{name}: {engine} note missing"
        if spec.read_only_reason:
            assert html.escape(spec.read_only_reason) in page
        assert f'href="{name}/"' in index, f"{name}: not linked from the cheat sheet"


def test_every_architecture_page_lists_its_points_and_the_reasons_for_absent_ones(
    site: Path,
) -> None:
    for family in families():
        page = _page(site, f"reference/architectures/{family.key}.md")
        assert '<svg class="interp-diagram"' in page, family.key
        for name in POINTS:
            reason = why_absent(name, family.facts)
            if reason is None:
                assert f'data-point="{name}"' in page, f"{family.key}: {name} not drawn"
            else:
                assert html.escape(reason) in page, f"{family.key}: no reason for {name}"


def test_the_generated_pages_are_never_committed() -> None:
    generated = generate(ROOT)
    committed = [src for src in generated if (DOCS / src).exists()]
    assert not committed, f"generated pages committed under docs/: {committed}"


def test_a_committed_copy_of_a_generated_page_fails_the_build(tmp_path: Path) -> None:
    import docs_hook
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File, Files

    src = "reference/points/resid_mid.md"
    (tmp_path / "reference/points").mkdir(parents=True)
    (tmp_path / src).write_text("# a hand-made copy\n")
    committed = File(
        src, src_dir=str(tmp_path), dest_dir=str(tmp_path / "site"), use_directory_urls=True
    )
    saved = dict(docs_hook._generated)
    docs_hook._generated.clear()
    docs_hook._generated[src] = "# generated\n"
    try:
        with pytest.raises(PluginError, match="generated from the code"):
            docs_hook.on_files(Files([committed]), config={})
    finally:
        docs_hook._generated.clear()
        docs_hook._generated.update(saved)


def test_markers_in_hand_written_pages_expand_or_fail_loudly() -> None:
    from docsgen import expand_markers

    porting = "guides/porting.md"
    table = expand_markers("<!-- interp:translation nnterp -->", porting)
    assert "layers_output[{L}]" in table and 'href="../../reference/points/resid_post/"' in table
    listed = expand_markers("<!-- interp:points resid_pre resid_post -->", porting)
    assert listed.count("<li>") == 2
    for bad in ("<!-- interp:nonsense -->", "<!-- interp:points resid_mdi -->"):
        with pytest.raises(ValueError):
            expand_markers(bad, porting)


def test_the_sae_guide_shows_the_hook_mapping_the_loader_uses() -> None:
    # The table is generated from interp_sae.hooks at build time; this pins that the guide asks
    # for it and that every row the loader maps is on it, linked to its point's page.
    from docsgen import expand_markers
    from interp_sae.hooks import hook_table

    src = "guides/sae.md"
    guide = (DOCS / src).read_text(encoding="utf-8")
    assert "<!-- interp:sae-hooks -->" in guide
    expanded = expand_markers(guide, src)
    rows = hook_table()
    assert len(rows) > 20
    for row in rows:
        point = row.address.partition(".")[0]
        cell = f'<a href="../../reference/points/{point}/"><code>{html.escape(row.address)}</code>'
        assert (
            f"<td>{html.escape(row.format)}</td><td><code>{html.escape(row.hook)}</code></td><td>{cell}"
            in expanded
        )


def test_llms_txt_holds_every_point_and_the_public_api(site: Path) -> None:
    text = (site / "llms.txt").read_text(encoding="utf-8")
    assert text == generate(ROOT)[LLMS_TXT]
    for name, spec in POINTS.items():
        assert f"`{name}`" in text and spec.definition in text, name
    import interp_core

    for name in interp_core.__all__:
        if name != "__version__":
            assert name in text, f"llms.txt lacks interp_core.{name}"


def test_the_backend_matrix_and_translations_come_from_the_registry(site: Path) -> None:
    matrix = _page(site, "reference/support-matrix.md")
    translation = _page(site, "reference/translation.md")
    from interp_core.backends import registered_backends

    for backend in registered_backends():
        assert f"<code>{backend}</code>" in matrix
    for spec in POINTS.values():
        for engine in ENGINES:
            eq = spec.equivalent(engine)
            if eq.name:
                assert html.escape(eq.name) in translation


def test_the_compatibility_page_lists_every_known_issue(site: Path) -> None:
    from interp_core.compat import all_known_issues

    page = _page(site, "reference/compatibility.md")
    for issue in all_known_issues():
        assert html.escape(issue.problem) in page and html.escape(issue.fix) in page


def test_the_http_api_page_lists_every_route_of_the_committed_schema(site: Path) -> None:
    # interp-serve's suite checks the committed schema against its routes; this checks the page.
    from docsgen.http_api import SCHEMA

    spec = json.loads((ROOT / SCHEMA).read_text())
    page = _page(site, "reference/http-api.md")
    for route, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert f"{method.upper()} {route}" in page
            assert html.escape(operation["summary"]) in page


def test_internal_links_of_the_built_site_resolve(site: Path) -> None:
    broken = []
    pattern = re.compile(r'(?:href|src)="([^"#?]+)(?:[#?][^"]*)?"')
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for target in set(pattern.findall(text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
                continue  # external (http:, mailto:, data:)
            base = site if target.startswith("/") else page.parent  # 404.html links from the root
            resolved = (base / target.lstrip("/")).resolve()
            if resolved.is_dir():
                resolved = resolved / "index.html"
            if not resolved.exists():
                broken.append(f"{page.relative_to(site)} -> {target}")
    assert not broken, "\n".join(sorted(broken)[:40])


# --- the results pages ------------------------------------------------------------------------
def test_results_pages_say_plainly_when_nothing_is_committed(tmp_path: Path) -> None:
    assert "No results committed yet" in validation_page(tmp_path)
    assert "No benchmark results committed yet" in benchmarks_page(tmp_path)


def test_results_pages_render_committed_records(tmp_path: Path) -> None:
    results = tmp_path / "packages/interp-validator/results"
    results.mkdir(parents=True)
    records = [
        {
            "backend": "eager",
            "engine": "transformer_lens",
            "family": "gemma2",
            "point": "attn_out_post",
            "layer": layer,
            "status": status,
            "cosine": cosine,
            "rel_error": rel,
            "max_abs": 1e-6,
        }
        for layer, status, cosine, rel in [(0, "pass", 1.0, 1e-7), (1, "fail", 0.25, 0.8)]
    ]
    (results / "summary.json").write_text(json.dumps(records))
    (results / "bench-cpu.json").write_text('{"rows": [{"workload": "P1", "ratio": 1.07}]}')
    page = validation_page(tmp_path)
    assert "2 comparisons" in page and "Failures (1)" in page and "0.25" in page
    bench = benchmarks_page(tmp_path)
    assert "P1" in bench and "1.07" in bench and "No benchmark" not in bench


def test_validation_page_opens_with_the_verdict_and_the_compact_matrix(tmp_path: Path) -> None:
    results = tmp_path / "packages/interp-validator/results"
    results.mkdir(parents=True)
    summary = {
        "format": 2,
        "totals": {"pass": 5, "fail": 1, "refused": 2},
        "cells": [
            {"backend": "vllm", "engine": "hf", "model": "bloom", "counts": {"pass": 3}},
            {
                "backend": "eager",
                "engine": "hf",
                "model": "bloom",
                "counts": {"pass": 2, "fail": 1, "refused": 2},
            },
        ],
        "reasons": ["scale off", "not served"],
        "records": [
            {
                "backend": "eager",
                "engine": "hf",
                "model": "bloom",
                "status": "fail",
                "reason": 0,
                "addresses": ["mlp_out.1"],
                "rel_error": 0.5,
                "cosine": 0.75,
            },
            {
                "backend": "eager",
                "engine": "hf",
                "model": "bloom",
                "status": "refused",
                "reason": 1,
                "addresses": ["z.0", "z.1"],
            },
        ],
    }
    (results / "summary.json").write_text(json.dumps(summary))
    page = validation_page(tmp_path)
    body = page.split("# Validation results\n\n", 1)[1]
    verdict = "1 comparisons failed: 8 comparisons (5 pass, 1 fail, 2 refused)."
    assert body.startswith(f"<p><strong>{verdict}</strong></p>\n\n## Matrix\n\n")
    assert body.index("### eager") < body.index("### vllm") < body.index("How each backend")
    assert ">2/5 ✗1<" in page and ">3/3<" in page
    assert "Failures (1)" in page and "scale off" in page and "0.75" in page
    assert "not served" not in page.split("## Failures")[1]  # a refusal is not a failure


def test_validation_page_shows_the_committed_report_and_plot(tmp_path: Path) -> None:
    results = tmp_path / "packages/interp-validator/results"
    results.mkdir(parents=True)
    (results / "summary.json").write_text('{"format": 1, "records": []}')
    (results / "report.md").write_text(
        "# Validation report\n\nIntro.\n\n## Summary\n\ncounts\n\n"
        "![Relative error by layer](errors-by-layer.png)\n\n## Setup\n\nversions\n\n"
        "## By family and model\n\n### llama\n\n| address | `hf` |\n|---|---|\n"
        "| `resid_post.0` | ✓ |\n"
    )
    (results / "errors-by-layer.png").write_bytes(b"\x89PNG fake")
    page = validation_page(tmp_path)
    assert "## Setup" in page and "### llama" in page and "| `resid_post.0` | ✓ |" in page
    assert "## Summary\n" not in page  # the page has its own summary from summary.json
    assert "(validation-errors-by-layer.png)" in page
    assert "](errors-by-layer.png)" not in page
    assets = generated_assets(tmp_path)
    assert assets == {"reference/validation-errors-by-layer.png": results / "errors-by-layer.png"}


# --- point names in hand-written pages --------------------------------------------------------
def _hand_written() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


@functools.cache
def _code_vocabulary() -> frozenset[str]:
    """Every identifier in the packages' source, and every word of the engines' names: text
    that may legitimately look like a point name without being one."""
    words: set[str] = set()
    for source in (ROOT / "packages").glob("*/src/**/*.py"):
        words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source.read_text(encoding="utf-8")))
    for spec in POINTS.values():
        for engine in ENGINES:
            name = spec.equivalent(engine).name or ""
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", name))
    return frozenset(words)


def _point_problem(text: str) -> str | None:
    """Why `text` is a bad reference to a point, or None when it is fine or not one."""
    text = text.strip()
    if ADDRESS_LIKE.fullmatch(text) or PATH_LIKE.fullmatch(text):
        try:
            Address.parse(text)
        except AddressError as error:
            return str(error)
        return None
    symbolic = SYMBOLIC.fullmatch(text)
    if symbolic:
        text = symbolic.group(1)
    if BARE_NAME.fullmatch(text) and "_" in text:
        if text in POINTS or text in _code_vocabulary():
            return None
        near = difflib.get_close_matches(text, list(POINTS), n=1, cutoff=0.8)
        if near:
            return f"{text!r} is not a point (nearest: {near[0]})"
    return None


@dataclass
class _Block:
    page: Path
    line: int
    code: str
    no_run: str | None


@dataclass
class _Page:
    path: Path
    blocks: list[_Block] = field(default_factory=list)
    prose: list[tuple[int, str]] = field(default_factory=list)  # (line, text outside fences)


def _parse(path: Path) -> _Page:
    page = _Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    previous = ""
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            page.prose.append((i + 1, lines[i]))
            if lines[i].strip():
                previous = lines[i]
            i += 1
            continue
        indent, fence = match.group("indent"), match.group("fence")
        info = match.group("info").strip().split()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if info and info[0] in ("python", "py"):
            marker = NO_RUN.search(previous)
            page.blocks.append(
                _Block(path, start + 2, "\n".join(body) + "\n", marker.group(1) if marker else None)
            )
        previous = ""
    return page


def _guarded_strings(tree: ast.AST) -> set[int]:
    """ids of string constants shown being refused: inside a `try:` body, or in what a loop
    whose body has a `try:` iterates over. Deliberate mistakes, not typos."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        roots: list[ast.AST] = []
        if isinstance(node, ast.Try):
            roots = list(node.body)
        elif isinstance(node, ast.For) and any(isinstance(n, ast.Try) for n in node.body):
            roots = [node.iter]
        for root in roots:
            guarded.update(id(inner) for inner in ast.walk(root) if isinstance(inner, ast.Constant))
    return guarded


def test_hand_written_pages_name_only_points_that_exist() -> None:
    problems = []
    span = re.compile(r"`([^`\n]+)`")
    for path in _hand_written():
        page = _parse(path)
        where = path.relative_to(ROOT)
        for line, text in page.prose:
            for found in span.findall(text):
                problem = _point_problem(found)
                if problem:
                    problems.append(f"{where}:{line}: `{found}`: {problem}")
        for block in page.blocks:
            tree = ast.parse(block.code)
            guarded = _guarded_strings(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in guarded
                ):
                    problem = _point_problem(node.value)
                    if problem:
                        problems.append(f"{where}:{block.line}: {node.value!r}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_point_name_check_catches_typos_and_bad_addresses() -> None:
    assert _point_problem("resid_mdi") is not None
    assert _point_problem("attn_out_pots") is not None
    assert _point_problem("resid_post.3") is None
    assert _point_problem("resid_pots.3") is not None
    assert _point_problem("resid_post.3.stream-1") is None
    assert _point_problem("resid_post.3.head-1") is not None
    assert _point_problem("load_model") is None
    assert _point_problem("resid_post.L-1") is None
    assert _point_problem("resid_psot.L") is not None


# --- examples ---------------------------------------------------------------------------------
def _pages_with_python() -> list[Path]:
    return [p for p in _hand_written() if _parse(p).blocks]


def _check_interp_names(block: _Block, tree: ast.AST) -> list[str]:
    """Every interp name a block imports or reads as a module attribute must exist."""
    problems = []
    modules: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("interp_"):
            try:
                module = importlib.import_module(node.module or "")
            except ImportError as error:
                problems.append(f"cannot import {node.module}: {error}")
                continue
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        problems.append(f"{node.module} has no {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("interp_"):
                    try:
                        modules[alias.asname or alias.name.split(".")[0]] = importlib.import_module(
                            alias.name.split(".")[0]
                        )
                        importlib.import_module(alias.name)
                    except ImportError as error:
                        problems.append(f"cannot import {alias.name}: {error}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain = []
            current: ast.AST = node
            while isinstance(current, ast.Attribute):
                chain.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id in modules:
                target: Any = modules[current.id]
                for attr in reversed(chain):
                    if not hasattr(target, attr):
                        problems.append(f"{current.id} has no attribute path {'.'.join(chain)}")
                        break
                    target = getattr(target, attr)
    return [f"{block.page.relative_to(ROOT)}:{block.line}: {p}" for p in problems]


def _load_calls(tree: ast.AST) -> list[str]:
    """Model ids passed literally to load_model / size: each must have a stand-in here."""
    ids = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("load_model", "select_backend", "size") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    ids.append(first.value)
    return ids


@functools.cache
def _smollm2() -> str | None:
    try:
        from interp_testmodels.smollm2 import RealModelUnavailable, smollm2_path
    except ImportError:
        return None
    try:
        return str(smollm2_path())
    except RealModelUnavailable:
        return None


@functools.cache
def _stand_in(model_id: str) -> str:
    """The local folder a documented model id runs on: the embedded SmolLM2 for its own id, else
    the tiny test model of the same architecture family."""
    if model_id == SMOLLM2:
        path = _smollm2()
        if path is None:
            from interp_testmodels.smollm2 import INSTALL_HINT

            pytest.fail(
                f"the docs examples run on the embedded SmolLM2; install it: {INSTALL_HINT}"
            )
        return path
    from interp_testmodels.families import build_family

    facts = facts_for(model_id)
    family = next(f for f in families() if facts.model_type in {f.model_type, f.facts.model_type})
    return str(build_family(family.key))


@pytest.fixture(scope="module")
def stand_in_loader() -> Iterator[Callable[..., Any]]:
    """load_model with documented repo ids mapped to local folders; models are reused."""
    import torch

    import interp_core
    import interp_core.backends as backends_module
    import interpoint

    real = backends_module.load_model
    loaded: dict[tuple[Any, ...], Any] = {}
    # The examples run batch-1 forward passes of small models, where a second thread only adds
    # synchronisation (and spin-waits whenever the machine is busy): one thread is several
    # times faster. Restored afterwards, since the setting is process-wide.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)

    def load(model_id_or_path: Any, backend: Any = "auto", **kwargs: Any) -> Any:
        model_id = str(model_id_or_path)
        path = _stand_in(model_id) if model_id in known_model_ids() else model_id
        key = (path, backend, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        if key not in loaded:
            loaded[key] = real(path, backend, **kwargs)
        return loaded[key]

    saved = [(m, m.load_model) for m in (interp_core, backends_module, interpoint)]
    for module, _ in saved:
        module.load_model = load
    try:
        yield load
    finally:
        for module, original in saved:
            module.load_model = original
        torch.set_num_threads(threads)


def _run_blocks(blocks: list[_Block], label: str) -> None:
    from interp_core.backends import _reset_registry

    namespace: dict[str, Any] = {"__name__": f"docs_{label}"}
    try:
        for block in blocks:
            code = compile(block.code, f"{block.page.relative_to(ROOT)}:{block.line}", "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
    finally:
        # A page may register an example backend; the next page starts from the real registry.
        _reset_registry()


@pytest.mark.parametrize("path", _pages_with_python(), ids=lambda p: str(p.relative_to(DOCS)))
def test_every_python_example_runs(path: Path, stand_in_loader: Callable[..., Any]) -> None:
    page = _parse(path)
    problems = []
    for block in page.blocks:
        tree = ast.parse(block.code, filename=str(path))
        problems += _check_interp_names(block, tree)
        if block.no_run is None:
            for model_id in _load_calls(tree):
                if model_id not in known_model_ids():
                    problems.append(
                        f"{path.relative_to(ROOT)}:{block.line}: {model_id!r} has no stand-in: "
                        "use a bundled id (interp_core.known_models) or mark the block no-run"
                    )
    assert not problems, "\n".join(problems)
    _run_blocks([b for b in page.blocks if b.no_run is None], path.stem)


def test_the_llms_txt_quick_start_runs(stand_in_loader: Callable[..., Any]) -> None:
    block = _Block(ROOT / "tools/docsgen/llms.py", 1, QUICK_START, None)
    _run_blocks([block], "llms")


# --- screenshots --------------------------------------------------------------------------------
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@contextlib.contextmanager
def _serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _browser(binary: str, profile: Path, *args: str, url: str) -> subprocess.CompletedProcess:
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _color_pixels(image: Any, rgb: tuple[int, int, int], box: tuple[int, int, int, int]) -> int:
    region = image.crop(box).convert("RGB")
    return sum(
        count
        for count, pixel in region.getcolors(maxcolors=1 << 24)
        if all(abs(a - b) <= 24 for a, b in zip(pixel, rgb, strict=True))
    )


def _hex(color: str) -> tuple[int, int, int]:
    return (int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16))


@pytest.mark.parametrize(
    ("src", "role_points"),
    [
        ("reference/points/attn_out_post.md", ("attn_out_post", "mlp_act")),
        ("reference/architectures/gemma2.md", ("attn_out", "mlp_act")),
    ],
)
def test_a_screenshot_shows_the_diagram_and_the_tables(
    site: Path, tmp_path: Path, src: str, role_points: tuple[str, ...]
) -> None:
    binary = _chromium()
    _require("chromium", binary is not None)
    assert binary is not None
    from docsgen.diagram import ROLE_COLORS
    from PIL import Image

    url_path = src[: -len(".md")] + "/"
    with _serve(site) as base:
        url = f"{base}/{url_path}"
        dom = _browser(binary, tmp_path / "dom", "--dump-dom", url=url)
        assert dom.returncode == 0, dom.stderr[-2000:]
        shot = tmp_path / "page.png"
        taken = _browser(
            binary,
            tmp_path / "shot",
            f"--screenshot={shot}",
            "--window-size=1600,2000",
            url=url,
        )
        assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    page = dom.stdout
    assert '<svg class="interp-diagram"' in page, "the diagram is not in the rendered page"
    assert page.count("<table") >= 3, "the tables are not in the rendered page"
    assert "<td>" in page or "<td " in page
    image = Image.open(shot)
    assert image.size == (1600, 2000)
    colors = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert colors is not None and len(colors) > 50, "the screenshot is blank"
    # The diagram draws its markers in the role colours; they must be on screen, in the upper
    # part of the page where the diagram sits, in more than a stray pixel or two.
    upper = (0, 0, 1600, 1300)
    for point in role_points:
        color = _hex(ROLE_COLORS[POINTS[point].role])
        assert _color_pixels(image, color, upper) > 80, f"no {point} markers in the screenshot"
    # Table text sits below the diagram: the lower part of the page is not empty either.
    lower = image.crop((0, 1300, 1600, 2000)).convert("L")
    assert lower.getextrema()[0] < 128, "nothing dark (no table text) below the diagram"


# --- what a newcomer reads first (issue #18) ------------------------------------------------------
def _text(page: str) -> str:
    """The article's visible text, tags dropped and whitespace folded."""
    body = page[page.index("<article") : page.index("</article>")]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def test_home_points_at_steering_choosing_a_backend_and_the_sizer(site: Path) -> None:
    page = _page(site, "index.md")
    start = page[page.index('id="where-to-start"') : page.index('id="the-packages"')]
    for href in ('href="guides/steering/"', 'href="guides/loading/#choosing-a-backend"'):
        assert href in start, href
    assert 'href="guides/sizer/"' in start


def test_the_vllm_and_engine_api_pages_document_the_model_and_every_name(site: Path) -> None:
    vllm = _page(site, "api/vllm.md")
    for anchor in (
        "interp_vllm.model.VLLMModel",
        "interp_vllm.model.VLLMModel.capture",
        "interp_vllm.model.VLLMModel.generate",
        "interp_vllm.model.VLLMModel.to_tokens",  # inherited from the conveniences
        "interp_vllm.backend.VLLMStaticBackend",
        "interp_vllm.engine.EngineSettings",
    ):
        assert f'id="{anchor}"' in vllm, anchor
    engine = _page(site, "api/engine.md")
    import interp_core

    for name in interp_core.__all__:
        if name != "__version__":
            assert f"<td><code>{name}</code></td>" in engine, name
    assert '<a href="../core/running/">Running models</a>' in engine


def test_the_benchmarks_page_explains_its_workloads_in_milliseconds(site: Path) -> None:
    page = _page(site, "reference/benchmarks.md")
    text = _text(page)
    assert not re.search(r"<h2[^>]*>\s*<code>", page), "a file path as a heading"
    assert "CPU suite" in text
    for workload in ("P1", "P2", "P3", "P4", "L"):
        assert re.search(rf"\b{workload} ?: \w", text), workload
    assert re.search(r"\d+\.\d ms", text) and "0.0996" not in text  # not raw seconds


def test_benchmark_rows_in_seconds_are_shown_in_milliseconds(tmp_path: Path) -> None:
    results = tmp_path / "packages/interp-validator/results"
    results.mkdir(parents=True)
    row = {"workload": "P1", "subject": "eager (ours)", "variant": "resid_post", "value": 0.0997}
    rows = [{**row, "unit": "s", "baseline": "plain HF forward", "ratio": 1.02}]
    meta = {"model": "Llama, 8 layers", "repeats": 10, "warmup": 2}
    (results / "bench.json").write_text(json.dumps({"meta": meta, "rows": rows, "errors": {}}))
    page = benchmarks_page(tmp_path)
    assert "## CPU suite" in page and "### P1" in page
    assert "<td>99.7 ms</td>" in page and "<td>1.020×</td>" in page
    assert "medians of 10 runs after 2 warm-up runs" in page


def test_the_validation_page_says_why_the_references_run_a_newer_transformers(site: Path) -> None:
    text = _text(_page(site, "reference/validation.md"))
    assert "Why two transformers versions" in text
    summary = json.loads(
        (ROOT / "packages/interp-validator/results/summary.json").read_text(encoding="utf-8")
    )
    ours = summary["backends"]["eager"]["versions"]["transformers"]
    theirs = summary["engines"]["nnsight"]["versions"]["transformers"]
    assert f"backends ran on transformers {ours}" in text
    assert f"on transformers {theirs}" in text


def test_tiny_test_configs_are_labelled_as_such(site: Path) -> None:
    resid = _page(site, "reference/points/resid_post.md")
    row = re.search(r"<tr><td><a [^>]*><code>gptj</code></a></td>.*?</tr>", resid)
    assert row and "tiny test config" in row.group(0)
    llama = re.search(r"<tr><td><a [^>]*><code>llama</code></a></td>.*?</tr>", resid)
    assert llama and "SmolLM2" in llama.group(0) and "tiny test config" not in llama.group(0)
    gemma2 = _page(site, "reference/architectures/gemma2.md")
    label = "The tiny test config (not the checkpoint above)"
    assert label in gemma2
    notes = next(f for f in families() if f.key == "gemma2").test_notes
    assert gemma2.index(label) < gemma2.index(html.escape(notes[:40], quote=False))


_PROBE = """<!doctype html><html><body><pre id="out">pending</pre><script>
const pages = %s;
const found = {};
function measure(doc, win) {
  const code = [...doc.querySelectorAll("article pre > code")];
  const hidden = code.filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.split("\\n").find(l => l.length > 60) || c.textContent.slice(0, 60));
  const cheat = doc.querySelector("table.interp-cheatsheet");
  let what = null;
  if (cheat) { what = cheat.querySelector("thead th:last-child").getBoundingClientRect().width; }
  const fonts = [];
  for (const svg of doc.querySelectorAll("svg.interp-diagram")) {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    for (const t of svg.querySelectorAll("text")) {
      fonts.push(parseFloat(win.getComputedStyle(t).fontSize) * scale);
    }
  }
  return {blocks: code.length, hidden: hidden, what_width: what,
          min_label_px: fonts.length ? Math.min(...fonts) : null};
}
let i = 0;
function next() {
  if (i >= pages.length) {
    document.getElementById("out").textContent = JSON.stringify(found);
    return;
  }
  const frame = document.createElement("iframe");
  frame.style.width = "1280px"; frame.style.height = "900px";
  frame.onload = () => {
    setTimeout(() => {
      found[pages[i]] = measure(frame.contentDocument, frame.contentWindow);
      frame.remove(); i += 1; next();
    }, 300);
  };
  frame.src = pages[i];
  document.body.appendChild(frame);
}
next();
</script></body></html>"""

_LAYOUT_PAGES = (
    "",
    "guides/loading/",
    "guides/sizer/",
    "guides/multi-gpu/",
    "guides/steering/",
    "guides/capture/",
    "reference/points/",
    "reference/points/resid_post/",
    "reference/architectures/gemma2/",
)


def test_in_a_browser_code_fits_the_column_and_labels_are_legible(
    site: Path, tmp_path: Path
) -> None:
    """Laid out by Chromium at a laptop's width: what a reader sees, not what the HTML says."""
    binary = _chromium()
    _require("chromium", binary is not None)
    assert binary is not None
    probe = site / "layout-probe.html"
    probe.write_text(_PROBE % json.dumps(["/" + p for p in _LAYOUT_PAGES]), encoding="utf-8")
    try:
        with _serve(site) as base:
            dom = _browser(
                binary,
                tmp_path / "probe",
                "--dump-dom",
                "--window-size=1400,1000",
                "--virtual-time-budget=60000",
                url=f"{base}/layout-probe.html",
            )
    finally:
        probe.unlink()
    assert dom.returncode == 0, dom.stderr[-2000:]
    match = re.search(r'<pre id="out">(.*?)</pre>', dom.stdout, re.S)
    assert match and match.group(1) != "pending", dom.stdout[-2000:]
    found = json.loads(html.unescape(match.group(1)))
    assert set(found) == {"/" + p for p in _LAYOUT_PAGES}
    for page, seen in found.items():
        # A block wider than the column hides its end, where the expected output is written.
        assert not seen["hidden"], f"{page}: code cut off at the column's edge: {seen['hidden']}"
    assert sum(seen["blocks"] for seen in found.values()) > 20
    assert found["/reference/points/"]["what_width"] >= 250  # was squeezed to ~130 px
    for page in ("/reference/points/resid_post/", "/reference/architectures/gemma2/"):
        assert found[page]["min_label_px"] is not None and found[page]["min_label_px"] >= 9, page


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("falcon_h1", "a Mamba-2 mixer beside the attention"),
        ("minimax", "alpha·(its normed input) + beta·(its output)"),
        ("gptj", "parallel"),
        ("llama", "sequential"),
    ],
)
def test_each_architecture_page_says_how_its_block_combines(key: str, words: str) -> None:
    from docsgen.page_parts import trait_rows

    family = next(f for f in families() if f.key == key)
    assert words in dict(trait_rows(family.facts))["block"]


def test_a_reconstructed_checkpoint_is_labelled_with_its_corrections_and_base() -> None:
    from docsgen.architecture_pages import _reconstructed_from

    plain = {"source": "transformers 5.19 GlmConfig defaults (docstring names a/b)"}
    assert _reconstructed_from(plain) == "reconstructed from transformers 5.19 defaults"
    corrected = {**plain, "corrections": {"hidden_size": 5120}}
    assert _reconstructed_from(corrected) == (
        "reconstructed from transformers 5.19 defaults, 1 key corrected from public sources"
    )
    other_size = {**plain, "base": "a/big", "corrections": {"hidden_size": 1, "vocab_size": 2}}
    assert _reconstructed_from(other_size) == (
        "reconstructed from transformers 5.19 defaults for a/big, "
        "2 keys corrected from public sources"
    )
    without_experts = {**other_size, "omitted": ["n_routed_experts"]}
    assert _reconstructed_from(without_experts).endswith(
        "2 keys corrected from public sources, 1 key of a part it lacks left out"
    )
