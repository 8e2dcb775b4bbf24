"""Which reference engines exist, and how each one is run on a batch of jobs.

"hf" (plain transformers hooks) runs in this process (`hf_engine`); the others —
TransformerLens `TransformerBridge` in raw and in compatibility mode, `HookedTransformer`,
nnsight and nnterp, plus the newest TransformerLens and nnsight on request — run in their own
pinned environments as subprocesses (`interp_validator.references`), one process per engine for
all the models of a sweep. Every engine answers with one `Reading` per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp_validator.hf_engine import ENGINE as HF

__all__ = ["HF", "default_engines", "engine_env", "known_engines", "run_engine"]


def default_engines() -> tuple[str, ...]:
    """The engines a sweep compares against unless told otherwise: "hf" and the pinned five."""
    from interp_validator.references import REFERENCE_ENGINES

    return (HF, *REFERENCE_ENGINES)


def known_engines() -> tuple[str, ...]:
    """Every engine that can be asked for, including the newest-release ones (opt-in)."""
    from interp_validator.references import EXTRA_ENGINES

    return (*default_engines(), *EXTRA_ENGINES)


def engine_env(engine: str) -> str | None:
    """The pinned environment an engine runs in; None for "hf", which runs in-process."""
    if engine == HF:
        return None
    from interp_validator.references import ENGINE_ENV

    return ENGINE_ENV[engine]


def run_engine(
    engine: str, jobs: Sequence[Any], *, workdir: Path, timeout: float = 900
) -> dict[str, Any]:
    """Run `engine` on every job; returns job key -> `Reading`."""
    if engine == HF:
        from interp_validator.hf_engine import run_hf

        return run_hf(jobs)
    known = known_engines()
    if engine not in known:
        message = f"no reference engine is named {engine!r}; use one of {', '.join(known)}"
        raise ValueError(message)
    from interp_validator.references import run_reference

    return run_reference(engine, list(jobs), workdir=workdir, timeout=timeout)
