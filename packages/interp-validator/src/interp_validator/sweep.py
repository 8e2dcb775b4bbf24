"""One validation sweep: every subject backend against every reference engine on every model.

The order keeps the expensive parts few: each model's token ids and addresses are planned once
(`plan`); each subject backend loads each model once and captures every address it serves in
one call (`subjects`); each reference engine runs once for all models — one process per engine
for the subprocess engines (`engines`); then every (backend, engine, model, address) is scored
(`scoring`) into a `Record`. A progress bar on stderr counts those steps.

`run_sweep` returns a `SweepResult`; `interp_validator.report` writes it out.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_core.address import Address
from interp_validator.plan import (
    PROMPT,
    REAL_MODEL,
    Target,
    family_names,
    family_target,
    layers_to_check,
    model_target,
    planned_addresses,
    prompt_tokens,
    real_model_target,
)
from interp_validator.records import Record, Status
from interp_validator.scoring import Tolerance, compare, tolerance_for

__all__ = [
    "DTYPE",
    "SweepError",
    "SweepOptions",
    "SweepResult",
    "TargetPlan",
    "run_sweep",
    "score",
]

DTYPE = "float32"  # both sides load in float32 with eager attention: exact comparisons


class SweepError(RuntimeError):
    """The sweep cannot start as asked (an unknown or unrunnable backend or engine)."""


@dataclass(frozen=True)
class SweepOptions:
    """What to sweep. None means "all": every runnable backend, every engine, every family."""

    backends: tuple[str, ...] | None = None
    engines: tuple[str, ...] | None = None
    families: tuple[str, ...] | None = None
    models: tuple[Path, ...] = ()
    real_model: bool = True
    workdir: Path | None = None
    timeout: float = 900
    progress: bool = True


@dataclass
class TargetPlan:
    """One model as planned: its target, facts-derived layers, token ids and addresses."""

    target: Target
    architecture: str
    n_layers: int
    layers: tuple[int, ...]
    tokens: tuple[int, ...]
    addresses: list[Address]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.target.name,
            "kind": self.target.kind,
            "architecture": self.architecture,
            "n_layers": self.n_layers,
            "layers": list(self.layers),
            "tokens": list(self.tokens),
            "addresses": len(self.addresses),
        }


@dataclass
class SweepResult:
    """Everything a sweep found, ready for `report.write_results`."""

    records: list[Record]
    plans: list[TargetPlan]
    backends: dict[str, dict[str, Any]]  # name -> {"versions", "seconds"} or {"skipped": why}
    engines: dict[str, dict[str, Any]]  # name -> {"versions", "seconds", "error"?}
    skipped_models: dict[str, str]
    tolerances: dict[str, Tolerance]  # "backend/engine" -> tolerance
    seconds: float
    prompt: str = PROMPT
    dtype: str = DTYPE
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def failures(self) -> list[Record]:
        return [r for r in self.records if r.status is Status.FAIL]

    @property
    def errors(self) -> list[str]:
        """Engines that crashed as a whole: not a failure of a backend, but not a clean run."""
        crashed = [(name, info) for name, info in self.engines.items() if "error" in info]
        return [f"{name}: {info['error']}" for name, info in crashed]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.errors


class _Progress:
    """A tqdm bar on stderr when tqdm is installed, else one line per step."""

    def __init__(self, total: int, enabled: bool) -> None:
        self._bar: Any = None
        self._enabled = enabled
        self._done = 0
        self._total = total
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, unit="step", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self._bar = None

    def step(self, what: str, amount: int = 1) -> None:
        self._done += amount
        if self._bar is not None:
            self._bar.set_description_str(what[:48])
            self._bar.update(amount)
        elif self._enabled:
            print(f"[{self._done}/{self._total}] {what}", file=sys.stderr, flush=True)

    def describe(self, what: str) -> None:
        if self._bar is not None:
            self._bar.set_description_str(what[:48])
            self._bar.refresh()
        elif self._enabled:
            print(f"[{self._done}/{self._total}] {what} ...", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No per-load "Loading weights" bars and config warnings from transformers under the
    sweep's own bar; the previous settings come back afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers comes with the run extra
        yield
        return
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _resolve_backends(requested: tuple[str, ...] | None) -> tuple[list[str], dict[str, str]]:
    from interp_core.backends import FIRST_PARTY
    from interp_validator.subjects import runnable_backends

    # Subjects are found only through the registry: the validator imports no backend, so a
    # missing one is an install line, never an ImportError.
    verdicts = runnable_backends()
    if requested is None:
        chosen = sorted((n for n, why in verdicts.items() if why is None), key=_subject_order)
        skipped = {name: why for name, why in verdicts.items() if why is not None}
        if not chosen:
            reasons = "; ".join(f"{name}: {why}" for name, why in sorted(skipped.items()))
            message = (
                f"no backend can run here ({reasons or 'none is installed'}): install the eager "
                f"backend, the default subject, with: pip install {FIRST_PARTY['eager']}"
            )
            raise SweepError(message)
        return chosen, skipped
    for name in requested:
        if name not in verdicts and name in FIRST_PARTY:
            message = (
                f"backend {name!r} is not installed here: it ships in the {FIRST_PARTY[name]} "
                f"package; install it with: pip install {FIRST_PARTY[name]}"
            )
            raise SweepError(message)
        if name not in verdicts:
            message = (
                f"no backend named {name!r} is registered here; registered: "
                f"{', '.join(sorted(verdicts)) or 'none'} (install its package to add it)"
            )
            raise SweepError(message)
        if verdicts[name] is not None:
            message = f"backend {name!r} cannot run here: {verdicts[name]}"
            raise SweepError(message)
    return sorted(requested, key=_subject_order), {}


def _subject_order(name: str) -> tuple[bool, str]:
    """eager first (it must see transformers before vLLM patches it), then by name."""
    return (name != "eager", name)


def _resolve_engines(requested: tuple[str, ...] | None) -> list[str]:
    from interp_validator.engines import default_engines, known_engines

    known = known_engines()
    if requested is None:
        return list(default_engines())
    unknown = [name for name in requested if name not in known]
    if unknown:
        message = f"unknown reference engine {unknown[0]!r}; the engines are {', '.join(known)}"
        raise SweepError(message)
    return list(requested)


def _targets(options: SweepOptions) -> tuple[list[Target], dict[str, str]]:
    names = family_names() if options.families is None else options.families
    unknown = [n for n in names if n not in family_names()]
    if unknown:
        message = (
            f"no test family named {unknown[0]!r}; the families are {', '.join(family_names())}"
        )
        raise SweepError(message)
    targets = [family_target(name) for name in names]
    skipped: dict[str, str] = {}
    if options.real_model:
        from interp_testmodels.smollm2 import RealModelUnavailable

        try:
            targets.append(real_model_target())
        except RealModelUnavailable as exc:
            skipped[REAL_MODEL] = str(exc)
    targets.extend(model_target(path) for path in options.models)
    return targets, skipped


def _plan(target: Target) -> TargetPlan:
    facts = target.facts
    layers = layers_to_check(facts.n_layers)
    return TargetPlan(
        target=target,
        architecture=facts.architecture,
        n_layers=facts.n_layers,
        layers=layers,
        tokens=prompt_tokens(target.path),
        addresses=planned_addresses(facts, layers),
    )


def _record(
    model: str,
    address: Address,
    backend: str,
    engine: str,
    status: Status,
    reason: str | None = None,
    m: Any = None,
) -> Record:
    return Record(
        backend=backend,
        engine=engine,
        model=model,
        point=address.name,
        layer=address.layer,
        stream=address.stream,
        status=status,
        max_abs=None if m is None else m.max_abs,
        rel_error=None if m is None else m.rel_error,
        cosine=None if m is None else m.cosine,
        reason=reason,
    )


def score(
    plan: TargetPlan,
    capture: Any,
    reading: Any,
    *,
    backend: str,
    engine: str,
    tolerance: Tolerance,
    engine_error: str | None = None,
) -> list[Record]:
    """One record per planned address of one model, for one backend and one engine."""
    records = []
    for address in plan.addresses:
        text = str(address)
        record = functools.partial(_record, plan.target.name, address, backend, engine)
        if text in capture.refused:
            records.append(record(Status.REFUSED, capture.refused[text]))
        elif text in capture.failed:
            records.append(record(Status.FAIL, capture.failed[text]))
        elif engine_error is not None:
            why = f"the {engine} engine failed: {engine_error}"
            records.append(record(Status.UNSUPPORTED, why))
        elif reading is None:
            why = f"the {engine} engine returned no reading for {plan.target.name}"
            records.append(record(Status.UNSUPPORTED, why))
        elif reading.unsupported:
            records.append(record(Status.UNSUPPORTED, reading.unsupported))
        elif text in reading.not_expressible:
            records.append(record(Status.NOT_EXPRESSIBLE, reading.not_expressible[text]))
        elif text in getattr(reading, "errors", {}):
            why = f"the {engine} engine could not read it: {reading.errors[text]}"
            records.append(record(Status.UNSUPPORTED, why))
        elif text not in reading.tensors:
            why = f"the {engine} engine returned neither a tensor nor a reason for {text}"
            records.append(record(Status.FAIL, why))
        elif text not in capture.tensors:
            records.append(record(Status.FAIL, f"{backend} served {text} but returned nothing"))
        else:
            verdict = compare(
                capture.tensors[text],
                reading.tensors[text],
                point=address.name,
                tolerance=tolerance,
                centred=reading.conventions.get(text, "raw") == "centred",
            )
            records.append(record(verdict.status, verdict.reason, verdict.metrics))
    return records


def _jobs(plans: Iterable[TargetPlan]) -> list[Any]:
    from interp_validator.references import Job

    return [
        Job(
            key=p.target.name,
            model_dir=str(p.target.path),
            tokens=p.tokens,
            points=tuple(str(a) for a in p.addresses),
        )
        for p in plans
    ]


def _run_engines(
    engine_list: list[str],
    plans: list[TargetPlan],
    options: SweepOptions,
    run_engine: Callable[..., dict[str, Any]],
    progress: _Progress,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Every engine on every plan: engine -> job key -> Reading, and engine -> versions/timing.

    An engine that raises as a whole is recorded with its error; its comparisons become
    unsupported and the sweep is not clean (`SweepResult.errors`).
    """
    readings: dict[str, dict[str, Any]] = {}
    info: dict[str, dict[str, Any]] = {}
    jobs = _jobs(plans)
    with tempfile.TemporaryDirectory(prefix="interp-validate-") as scratch:
        workdir = options.workdir or Path(scratch)
        for engine in engine_list:
            progress.describe(f"reference engine {engine}")
            began = time.perf_counter()
            try:
                readings[engine] = run_engine(
                    engine, jobs, workdir=workdir / engine, timeout=options.timeout
                )
                versions: dict[str, str] = {}
                for reading in readings[engine].values():
                    versions.update(reading.versions or {})
                info[engine] = {"versions": versions}
            except Exception as exc:
                readings[engine] = {}
                info[engine] = {"error": f"{type(exc).__name__}: {exc}"}
            info[engine]["seconds"] = round(time.perf_counter() - began, 2)
            progress.step(f"reference engine {engine}")
    return readings, info


def _run_subjects(
    backends: list[str],
    plans: list[TargetPlan],
    capture: Callable[..., Any],
    progress: _Progress,
) -> tuple[dict[tuple[str, str], Any], dict[str, dict[str, Any]]]:
    """Every backend on every plan: (backend, model) -> Capture, and backend -> versions/timing."""
    from interp_validator.subjects import backend_versions

    captures: dict[tuple[str, str], Any] = {}
    info: dict[str, dict[str, Any]] = {}
    for backend in backends:
        spent = 0.0
        for plan in plans:
            progress.describe(f"{backend} on {plan.target.name}")
            got = capture(
                backend,
                str(plan.target.path),
                plan.target.name,
                plan.tokens,
                plan.addresses,
                dtype=DTYPE,
            )
            captures[(backend, plan.target.name)] = got
            spent += got.seconds
            progress.step(f"{backend} on {plan.target.name}")
        mine = [captures[(backend, plan.target.name)] for plan in plans]
        if mine and not any(getattr(c, "loaded", True) for c in mine):
            # It declares, from the facts alone, that it captures none of the points on any
            # model (vllm-generate generates only): not a subject, and no records.
            why = next(iter(mine[0].refused.values()), "it serves none of the points")
            info[backend] = {"skipped": f"it captures none of the points: {why}"}
            for plan in plans:
                del captures[(backend, plan.target.name)]
            continue
        info[backend] = {"versions": backend_versions(backend), "seconds": round(spent, 2)}
    return captures, info


def run_sweep(
    options: SweepOptions,
    *,
    run_engine: Callable[..., dict[str, Any]] | None = None,
    capture: Callable[..., Any] | None = None,
) -> SweepResult:
    """Run the sweep `options` describe. `run_engine`/`capture` replace the real ones in tests."""
    import torch

    from interp_validator import engines as engine_module
    from interp_validator import subjects

    started = time.perf_counter()
    run_engine = run_engine or engine_module.run_engine
    capture = capture or subjects.capture
    backends, skipped_backends = _resolve_backends(options.backends)
    engine_list = _resolve_engines(options.engines)
    targets, skipped_models = _targets(options)
    timings: dict[str, float] = {}

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: a second thread only spins (interp_testmodels.threads)
    steps = len(targets) * (1 + len(backends)) + len(engine_list)
    progress = _Progress(steps, options.progress)
    restore = contextlib.ExitStack()
    restore.enter_context(_quiet_transformers())
    try:
        plans = []
        for target in targets:
            plans.append(_plan(target))
            progress.step(f"plan {target.name}")
        timings["plan"] = time.perf_counter() - started

        # Engines before subjects: importing vLLM registers its own config classes with
        # transformers (its DeepSeek-V4 class rejects the factory's config), so the in-process
        # HF engine must run first; for the same reason the eager subject runs before any other.
        readings, engine_info = _run_engines(engine_list, plans, options, run_engine, progress)
        timings.update({f"engine {e}": info["seconds"] for e, info in engine_info.items()})
        captures, backend_info = _run_subjects(backends, plans, capture, progress)
        timings.update({f"backend {b}": i.get("seconds", 0.0) for b, i in backend_info.items()})
        for backend, why in skipped_backends.items():
            backend_info[backend] = {"skipped": why}
    finally:
        restore.close()
        progress.close()
        torch.set_num_threads(previous_threads)

    records: list[Record] = []
    tolerances: dict[str, Tolerance] = {}
    for backend in backends:
        if "skipped" in backend_info[backend]:
            continue
        for engine in engine_list:
            tolerance = tolerance_for(DTYPE, backend, engine)
            tolerances[f"{backend}/{engine}"] = tolerance
            for plan in plans:
                records.extend(
                    score(
                        plan,
                        captures[(backend, plan.target.name)],
                        readings[engine].get(plan.target.name),
                        backend=backend,
                        engine=engine,
                        tolerance=tolerance,
                        engine_error=engine_info[engine].get("error"),
                    )
                )
    return SweepResult(
        records=records,
        plans=plans,
        backends=backend_info,
        engines=engine_info,
        skipped_models=skipped_models,
        tolerances=tolerances,
        seconds=time.perf_counter() - started,
        timings={k: round(v, 2) for k, v in timings.items()},
    )
