"""Reference engines: what TransformerLens, nnsight and nnterp read at our points.

Each engine runs as a subprocess with the python of a pinned environment (`interp_validator.envs`)
executing a standalone runner script from this folder (`runner_tl.py`, `runner_nnsight.py`),
which imports only the engine, transformers, torch and safetensors. This process, which has
interp-core, translates our addresses into engine terms (`translate`), writes a manifest, and
reads back one safetensors file and one JSON of statuses per job. One subprocess serves every job
of one engine, so the engine is imported once.

Outcomes per point are never silent: a tensor (with its comparison convention), "not
expressible" (the engine has no tensor equal to this point on this model, with the reason), or
an error (the engine should have produced it but did not, with the reason). An engine that
cannot load or run a model at all marks the whole job `unsupported` with the exact error.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_validator.references.models import check_model_folder, real_model_folder
from interp_validator.references.translate import (
    ENGINE_FAMILY,
    NotExpressible,
    Read,
    expected_shape,
    known_defect,
    translate,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "ENGINE_ENV",
    "EXTRA_ENGINES",
    "REFERENCE_ENGINES",
    "Job",
    "NotExpressible",
    "Read",
    "Reading",
    "ReferenceEngineError",
    "build_manifest",
    "engine_description",
    "real_model_folder",
    "run_reference",
    "runner_scripts",
    "translate",
]

REFERENCE_ENGINES: tuple[str, ...] = (
    "tl_bridge",
    "tl_bridge_compat",
    "tl_hooked",
    "nnsight",
    "nnterp",
)
# The newest TransformerLens (4.x, Bridge only) and nnsight (0.8); nnterp cannot run there.
EXTRA_ENGINES: tuple[str, ...] = ("tl_bridge_latest", "nnsight_latest")

ENGINE_ENV: dict[str, str] = {
    "tl_bridge": "refs",
    "tl_bridge_compat": "refs",
    "tl_hooked": "refs",
    "nnsight": "refs",
    "nnterp": "refs",
    "tl_bridge_latest": "refs-latest",
    "nnsight_latest": "refs-latest",
}

_RUNNER = {
    "tl_bridge": "runner_tl.py",
    "tl_bridge_compat": "runner_tl.py",
    "tl_hooked": "runner_tl.py",
    "nnsight": "runner_nnsight.py",
    "nnterp": "runner_nnsight.py",
}

_DESCRIPTIONS = {
    "tl_bridge": "TransformerLens TransformerBridge.boot_transformers, raw HF numerics",
    "tl_bridge_compat": "TransformerLens TransformerBridge with enable_compatibility_mode() "
    "(fold_ln, center_writing_weights, center_unembed, fold_value_biases)",
    "tl_hooked": "TransformerLens HookedTransformer, explicit config, no weight processing",
    "nnsight": "nnsight LanguageModel, eager attention",
    "nnterp": "nnterp StandardizedTransformer (enable_attention_probs where it works)",
    "tl_bridge_latest": "TransformerLens 4 TransformerBridge, raw HF numerics",
    "nnsight_latest": "nnsight 0.8 LanguageModel, eager attention",
}


class ReferenceEngineError(RuntimeError):
    """A reference engine could not be run at all (no environment, runner crashed early)."""


@dataclass(frozen=True)
class Job:
    """One model and one prompt to read at some of our points."""

    key: str  # e.g. the family name or "smollm2"
    model_dir: str  # HF folder (config.json, safetensors, tokenizer)
    tokens: tuple[int, ...]  # one prompt, token ids
    points: tuple[str, ...]  # our canonical address strings, e.g. "resid_post.1", "embeddings"


@dataclass
class Reading:
    """What one engine read for one job, in our shapes."""

    engine: str
    key: str
    tensors: dict[str, torch.Tensor]  # address -> [1, seq, ...] (attention: [1, heads, q, k])
    conventions: dict[str, str]  # address -> "raw" | "centred"
    not_expressible: dict[str, str]  # address -> reason
    unsupported: str | None  # the engine could not load/run this model at all: why
    versions: dict[str, str]
    seconds: float
    errors: dict[str, str] = field(default_factory=dict)  # address -> why it failed
    sources: dict[str, str] = field(default_factory=dict)  # address -> engine name read
    notes: list[str] = field(default_factory=list)


def engine_description(engine: str) -> str:
    """One line saying what the engine is and how it is configured."""
    return _DESCRIPTIONS[engine]


def _facts(model_dir: str) -> Any:
    from interp_core.facts import ModelFacts

    config = json.loads((Path(model_dir) / "config.json").read_text())
    return ModelFacts.from_config(config)


def _mode(engine: str) -> str:
    return engine.removesuffix("_latest")


def build_manifest(
    engine: str, jobs: Sequence[Job], out_dir: Path, *, threads: int = 1
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """The runner's manifest, plus what translation already ruled out (key → address → reason)."""
    ruled_out: dict[str, dict[str, str]] = {}
    specs = []
    for index, job in enumerate(jobs):
        check_model_folder(job.model_dir)
        facts = _facts(job.model_dir)
        reads = []
        ruled_out[job.key] = {}
        for address in job.points:
            found = translate(engine, address, facts)
            if isinstance(found, NotExpressible):
                ruled_out[job.key][address] = found.reason
                continue
            read = found.to_json()
            read["address"] = address  # keep the caller's spelling as the key
            read["shape"] = list(expected_shape(address, facts, len(job.tokens)))
            reads.append(read)
        specs.append(
            {
                "index": index,
                "key": job.key,
                "model_dir": str(Path(job.model_dir).resolve()),
                "tokens": list(job.tokens),
                "facts": {"model_type": facts.model_type, "architecture": facts.architecture},
                "reads": reads,
            }
        )
    manifest = {
        "engine": engine,
        "mode": _mode(engine),
        "out_dir": str(out_dir),
        "threads": threads,
        "jobs": specs,
    }
    return manifest, ruled_out


def _load_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path)) if path.is_file() else {}


def _normalise(address: str, tensor: torch.Tensor) -> torch.Tensor:
    """attn_scores: masked entries hold the dtype minimum on every side (TL writes -inf)."""
    import torch

    if address.startswith("attn_scores") and tensor.is_floating_point():
        floor = torch.finfo(tensor.dtype).min
        return torch.where(tensor <= floor, torch.full_like(tensor, floor), tensor)
    return tensor


def run_reference(
    engine: str,
    jobs: Sequence[Job],
    *,
    workdir: Path,
    timeout: float = 900,
    python: str | os.PathLike[str] | None = None,
    threads: int = 1,
) -> dict[str, Reading]:
    """Read every job's points with one engine, in one subprocess; keyed by job.key.

    `python` overrides the environment's interpreter (default: `envs.ensure_env`, which builds
    the pinned environment on first use). Never raises for a model the engine cannot handle:
    such a job comes back with `unsupported` set. Raises ReferenceEngineError only when the engine
    cannot be started at all.
    """
    if engine not in ENGINE_ENV:
        message = (
            f"unknown reference engine {engine!r}; known: "
            f"{', '.join(REFERENCE_ENGINES + EXTRA_ENGINES)}"
        )
        raise ValueError(message)
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        message = f"job keys must be unique; got {keys}"
        raise ValueError(message)
    workdir = Path(workdir)
    out_dir = workdir / f"{engine}-{os.getpid()}-{time.time_ns()}"
    out_dir.mkdir(parents=True)
    manifest, ruled_out = build_manifest(engine, jobs, out_dir, threads=threads)
    manifest_path = out_dir / "manifest.json"
    manifest_path.write_text(json.dumps(manifest, indent=1))
    if python is None:
        from interp_validator.envs import ensure_env

        python = ensure_env(ENGINE_ENV[engine])
    script = Path(__file__).with_name(_RUNNER[_mode(engine)])
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        WANDB_MODE="disabled",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        TQDM_DISABLE="1",
    )
    log_path = out_dir / "runner.log"
    started = time.perf_counter()
    failure: str | None = None
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(
                [str(python), str(script), str(manifest_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=out_dir,
                timeout=timeout,
                check=False,
            )
            if proc.returncode != 0:
                failure = f"the {engine} runner exited with code {proc.returncode}"
        except subprocess.TimeoutExpired:
            failure = f"the {engine} runner was stopped after the {timeout:.0f} s timeout"
        except OSError as exc:
            message = f"cannot start the {engine} runner with {python}: {exc}"
            raise ReferenceEngineError(message) from exc
    elapsed = time.perf_counter() - started
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
    readings: dict[str, Reading] = {}
    for index, job in enumerate(jobs):
        result_path = out_dir / f"job-{index}.json"
        reading = Reading(
            engine=engine,
            key=job.key,
            tensors={},
            conventions={},
            not_expressible=dict(ruled_out[job.key]),
            unsupported=None,
            versions={},
            seconds=0.0,
        )
        if not result_path.is_file():
            why = failure or f"the {engine} runner finished without a result for this job"
            reading.unsupported = f"{why} before finishing {job.key}; log {log_path}:\n{tail}"
            reading.seconds = elapsed
            readings[job.key] = reading
            continue
        result = json.loads(result_path.read_text())
        reading.unsupported = result["unsupported"]
        reading.versions = result["versions"]
        reading.seconds = result["seconds"]
        reading.notes = result.get("notes", [])
        tensors = _load_tensors(out_dir / (result.get("tensors") or "missing"))
        facts = _facts(job.model_dir)
        for address, status in result["statuses"].items():
            defect = known_defect(engine, facts, address, reading.versions)
            if defect is not None:
                reading.not_expressible[address] = defect
            elif status["status"] == "ok" and address in tensors:
                reading.tensors[address] = _normalise(address, tensors[address])
                reading.conventions[address] = status["convention"]
                reading.sources[address] = status.get("source", "")
            elif status["status"] == "not_expressible":
                reading.not_expressible[address] = status["reason"]
            else:
                reading.errors[address] = status.get("reason", "no tensor was written")
        readings[job.key] = reading
    return readings


def runner_scripts() -> dict[str, Path]:
    """Engine → the runner script it executes (for docs and diagnostics)."""
    return {engine: Path(__file__).with_name(_RUNNER[_mode(engine)]) for engine in ENGINE_ENV}


# Keep the translation table's engines and ours in step.
assert set(ENGINE_FAMILY) == set(ENGINE_ENV), "translate.ENGINE_FAMILY and ENGINE_ENV disagree"
