"""A dashboards job that can be killed and resumed: its reductions saved at batch boundaries.

The dashboards job keeps no per-token data, only per-feature reductions
(`interp_sae.dashboard_reduce.FeaturePasses`), so its whole state after any batch is a few
tensors per SAE: the totals and running top examples of the first pass, and in the second the
histogram, interval counts and samples (`FeaturePasses.state`, whichever process reduced them:
on vLLM the job fetches them from the workers before it saves). A
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
_VERSION = 2  # 1 kept the counts in the metadata and named tensors per field


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

    def due(self) -> bool:
        """Whether `every` seconds have passed since the last save (checked after a batch)."""
        return time.monotonic() - self._saved_at >= self.every

    def save(self, phase: int, done: int, results: list[Any]) -> None:
        """`results` after `done` contexts of pass `phase` (0 or 1)."""
        from safetensors.torch import save

        parts = ("first",) if phase == 0 else ("first", "second")
        tensors = {
            f"{i}.{name}": tensor
            for i, result in enumerate(results)
            for part in parts
            for name, tensor in result.passes.state(part).items()
        }
        state = {"format": _FORMAT, "version": _VERSION, "job": self.identity}
        state |= {"phase": phase, "done": done}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path, save(tensors, {"state": json.dumps(state)}))
        self._saved_at = time.monotonic()

    def restore(self, results: list[Any]) -> tuple[int, int]:
        """Put the saved state into `results` (fresh, as the job builds them); the pass and the
        contexts of it already reduced."""
        from safetensors import safe_open

        with safe_open(str(self.path), framework="pt") as handle:
            state = json.loads((handle.metadata() or {}).get("state", "{}"))
            if state.get("format") != _FORMAT or state.get("version") != _VERSION:
                message = (
                    f"{str(self.path)!r} is not a dashboards checkpoint this version reads "
                    f"(format {state.get('format')!r}, version {state.get('version')!r}); "
                    f"remove it to start over"
                )
                raise InvalidArgument(message)
            self._check_job(state["job"])
            phase = int(state["phase"])
            parts = ("first",) if phase == 0 else ("first", "second")
            for i, result in enumerate(results):
                prefix = f"{i}."
                mine = {
                    key.removeprefix(prefix): handle.get_tensor(key)
                    for key in handle.keys()
                    if key.startswith(prefix)
                }
                for part in parts:
                    result.passes.load(mine, part)
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
