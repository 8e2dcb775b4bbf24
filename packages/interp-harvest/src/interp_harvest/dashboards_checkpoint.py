"""A dashboards job that can be killed and resumed: its reductions saved at batch boundaries.

The dashboards job keeps no per-token data, only per-feature reductions (`dashboard_reduce`),
so its whole state after any batch is a few tensors per SAE: the totals and running top
examples of the first pass, and in the second the histogram, interval counts and samples. A
`Checkpoint` writes them, with which pass and how many contexts it has consumed, into one
safetensors file (atomically: a kill mid-write leaves the previous one) at most every `every`
seconds; `restore` puts them back, and the job skips the batches already reduced. The batches
are the same on a resumed run (fixed-size groups of the packed corpus from its start), and every
reduction is a deterministic function of its batches in order, so a resumed job gives exactly
the dashboards an uninterrupted one gives (a test kills one mid-pass and compares).

A checkpoint names the job that wrote it (model, corpus, SAEs, budget, packing, batch size,
settings, ignored tokens); resuming a different job is refused with the fields that differ.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from interp_core.errors import InvalidArgument
from interp_harvest.shards import atomic_write_bytes

__all__ = ["CHECKPOINT_FILE", "Checkpoint"]

CHECKPOINT_FILE = "dashboards-checkpoint.safetensors"
_FORMAT = "interp-harvest/dashboards-checkpoint"
_SELECTION = ("score", "token", "values", "ids")
_TOTALS = ("fired", "total", "max", "min_fired")


@dataclasses.dataclass
class Checkpoint:
    """The state of one dashboards job in `folder`; `identity` names the job."""

    folder: Path
    identity: dict[str, Any]
    every: float = 600.0
    _saved_at: float = dataclasses.field(default_factory=time.monotonic)

    @property
    def path(self) -> Path:
        return self.folder / CHECKPOINT_FILE

    def exists(self) -> bool:
        return self.path.is_file()

    def maybe_save(self, phase: int, done: int, results: list[Any]) -> None:
        """Save after a batch when `every` seconds have passed since the last save."""
        if time.monotonic() - self._saved_at >= self.every:
            self.save(phase, done, results)

    def save(self, phase: int, done: int, results: list[Any]) -> None:
        """`results` after `done` contexts of pass `phase` (0 or 1)."""
        from safetensors.torch import save

        tensors: dict[str, Any] = {}
        scalars = []
        for i, result in enumerate(results):
            for name in _TOTALS:
                tensors[f"{i}.totals.{name}"] = getattr(result.totals, name)
            _put_selection(tensors, f"{i}.top", result.top)
            if phase == 1:
                for j, selection in enumerate(result.samples):
                    _put_selection(tensors, f"{i}.samples.{j}", selection)
                for name in ("histogram", "interval_tokens", "hist_low", "hist_high"):
                    tensors[f"{i}.{name}"] = getattr(result, name)
            scalars.append({"tokens": result.totals.tokens, "contexts": result.contexts})
        state = {"format": _FORMAT, "job": self.identity, "phase": phase, "done": done}
        state["results"] = scalars
        self.folder.mkdir(parents=True, exist_ok=True)
        blob = save({k: v.contiguous() for k, v in tensors.items()}, {"state": json.dumps(state)})
        atomic_write_bytes(self.path, blob)
        self._saved_at = time.monotonic()

    def restore(self, results: list[Any]) -> tuple[int, int]:
        """Put the saved state into `results` (fresh, as the job builds them); the pass and the
        contexts of it already reduced."""
        from safetensors import safe_open

        with safe_open(str(self.path), framework="pt") as handle:
            state = json.loads((handle.metadata() or {}).get("state", "{}"))
            if state.get("format") != _FORMAT:
                message = f"{str(self.path)!r} is not a dashboards checkpoint"
                raise InvalidArgument(message)
            self._check_job(state["job"])
            phase = int(state["phase"])
            for i, (result, scalars) in enumerate(zip(results, state["results"], strict=True)):
                for name in _TOTALS:
                    setattr(result.totals, name, handle.get_tensor(f"{i}.totals.{name}"))
                result.totals.tokens = int(scalars["tokens"])
                result.contexts = int(scalars["contexts"])
                _get_selection(handle, f"{i}.top", result.top)
                if phase == 1:
                    result.samples = _samples(handle, i, result)
                    for name in ("histogram", "interval_tokens", "hist_low", "hist_high"):
                        setattr(result, name, handle.get_tensor(f"{i}.{name}"))
        return phase, int(state["done"])

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def _check_job(self, saved: dict[str, Any]) -> None:
        differ = sorted(k for k in {*saved, *self.identity} if saved.get(k) != self.identity.get(k))
        if differ:
            shown = "; ".join(
                f"{k}: {saved.get(k)!r} then, {self.identity.get(k)!r} now" for k in differ
            )
            message = (
                f"the checkpoint in {str(self.folder)!r} was written by another job ({shown}); "
                f"rerun that job with --resume, or remove {CHECKPOINT_FILE} to start over"
            )
            raise InvalidArgument(message)


def _put_selection(tensors: dict[str, Any], prefix: str, selection: Any) -> None:
    for name in _SELECTION:
        tensors[f"{prefix}.{name}"] = getattr(selection, name)


def _get_selection(handle: Any, prefix: str, selection: Any) -> None:
    for name in _SELECTION:
        setattr(selection, name, handle.get_tensor(f"{prefix}.{name}"))


def _samples(handle: Any, i: int, result: Any) -> list[Any]:
    from interp_harvest.dashboard_reduce import Selection

    settings = result.settings
    samples = []
    for j in range(settings.intervals):
        selection = Selection(settings.samples_per_interval, result.d_sae, result.context_size)
        _get_selection(handle, f"{i}.samples.{j}", selection)
        samples.append(selection)
    return samples
