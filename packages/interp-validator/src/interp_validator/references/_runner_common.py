"""What every reference runner script shares: the manifest, shapes, and writing results.

Runner scripts run with the python of a reference environment (see `interp_validator.envs`),
where interp-engine is not installed, so this file imports only the standard library, torch and
safetensors. A runner script imports it as a sibling module (`import _runner_common`), which
works because Python puts a script's own folder first on sys.path.

Protocol: `python runner_X.py MANIFEST.json`. The manifest names the mode, an output folder and
jobs (model folder, token ids, reads). For job i the runner writes `job-i.safetensors` (address
→ tensor in our shape) and then `job-i.json` (per-address statuses, versions, seconds, or why
the engine could not load or run the model at all). The JSON is written last, so a job whose
JSON exists is complete even if the process dies on a later job.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

VERSION_PACKAGES = ("torch", "transformers", "transformer-lens", "nnsight", "nnterp", "safetensors")


def versions() -> dict[str, str]:
    """Versions of the engine stack in this environment (absent packages are left out)."""
    found = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in VERSION_PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def describe(exc: BaseException) -> str:
    """An exception as one readable line: type and the first lines of its message.

    nnsight wraps the real error in a traceback-shaped message; then the innermost
    `SomeError: message` line is what matters, so that is what is kept.
    """
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        named = [
            index
            for index, line in enumerate(lines)
            if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Warning)\b.*:", line)
        ]
        if named:
            return " | ".join(lines[named[-1] : named[-1] + 3])
    if len(lines) > 6:
        lines = [*lines[:3], "...", *lines[-2:]]
    return f"{type(exc).__name__}: " + " | ".join(lines)


class ShapeError(ValueError):
    """An engine tensor cannot be brought to our shape."""


def to_ours(value: Any, layout: str, shape: list[int]) -> torch.Tensor:
    """Bring an engine tensor to our shape ([1, seq, ...] or [1, heads, q, k]), or refuse.

    layout: "flat" (already ours), "bshd" ([b, s, heads, d]), "bhsd" ([b, heads, s, d]),
    "heads=N" (either of those two, told apart by where the N heads sit), "tokens"
    (token-flattened [b*s, width]).
    """
    if not isinstance(value, torch.Tensor):
        message = f"the engine returned {type(value).__name__}, not a tensor"
        raise ShapeError(message)
    t = value.detach()
    want = tuple(shape)
    if tuple(t.shape) == want:
        return t
    if layout == "bshd" and t.dim() == 4:
        t = t.reshape(t.shape[0], t.shape[1], -1)
    elif layout == "bhsd" and t.dim() == 4:
        t = t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1)
    elif layout == "tokens" and t.dim() == 2 and t.shape[0] == want[1]:
        t = t.reshape(1, t.shape[0], -1)
    elif layout.startswith("heads") and t.dim() == 4:
        # heads=N: [b, s, N, d] or [b, N, s, d], told apart by where N and seq sit.
        heads, seq = int(layout.partition("=")[2]), want[1]
        seq_major = t.shape[1] == seq and t.shape[2] == heads
        head_major = t.shape[1] == heads and t.shape[2] == seq
        if seq_major and head_major and seq != 1:
            message = (
                f"the engine's tensor {tuple(t.shape)} is ambiguous: the prompt has as many "
                f"tokens as the point has heads ({heads}); use a prompt of another length"
            )
            raise ShapeError(message)
        if head_major and not seq_major:
            t = t.transpose(1, 2)
        t = t.reshape(t.shape[0], t.shape[1], -1)
    if tuple(t.shape) != want:
        message = (
            f"the engine's tensor has shape {tuple(value.shape)} (layout {layout}), which does "
            f"not map onto our shape {want}"
        )
        raise ShapeError(message)
    return t


class Job:
    """One model + prompt + reads, and what the runner found for each read."""

    def __init__(self, spec: dict[str, Any], out_dir: Path) -> None:
        self.spec = spec
        self.index: int = spec["index"]
        self.key: str = spec["key"]
        self.model_dir: str = spec["model_dir"]
        self.tokens: list[int] = spec["tokens"]
        self.facts: dict[str, Any] = spec.get("facts", {})
        self.reads: list[dict[str, Any]] = spec["reads"]
        self.out_dir = out_dir
        self.tensors: dict[str, torch.Tensor] = {}
        self.statuses: dict[str, dict[str, Any]] = {}
        self.unsupported: str | None = None
        self.notes: list[str] = []

    def ids(self) -> torch.Tensor:
        return torch.tensor([self.tokens], dtype=torch.long)

    def put(
        self, read: dict[str, Any], value: Any, *, convention: str | None = None, source: str = ""
    ) -> None:
        """Record a tensor for `read` (reshaped to ours), or an error if it does not fit."""
        try:
            tensor = to_ours(value, read["layout"], read["shape"])
        except ShapeError as exc:
            self.error(read, str(exc))
            return
        if tensor.is_floating_point() and tensor.dtype != torch.float32:
            tensor = tensor.float()
        self.tensors[read["address"]] = tensor.contiguous().clone()
        self.statuses[read["address"]] = {
            "status": "ok",
            "convention": convention or read.get("convention") or "raw",
            "source": source or read["target"],
        }

    def not_expressible(self, read: dict[str, Any], reason: str) -> None:
        self.statuses[read["address"]] = {"status": "not_expressible", "reason": reason}

    def error(self, read: dict[str, Any], reason: str) -> None:
        self.statuses[read["address"]] = {"status": "error", "reason": reason}

    def write(self, seconds: float, found_versions: dict[str, str]) -> None:
        for read in self.reads:
            if read["address"] not in self.statuses and self.unsupported is None:
                self.error(read, "the runner produced nothing for this read")
        tensor_path = self.out_dir / f"job-{self.index}.safetensors"
        if self.tensors:
            save_file(self.tensors, str(tensor_path))
        result = {
            "key": self.key,
            "unsupported": self.unsupported,
            "statuses": self.statuses,
            "versions": found_versions,
            "seconds": round(seconds, 3),
            "notes": self.notes,
            "tensors": tensor_path.name if self.tensors else None,
        }
        tmp = self.out_dir / f"job-{self.index}.json.tmp"
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(self.out_dir / f"job-{self.index}.json")


class Unsupported(Exception):
    """The engine cannot load or run this model at all (the message says exactly why)."""


Runner = Callable[[str, Job], None]


def main(run: Runner) -> int:
    """Run every job of the manifest given on the command line through `run(mode, job)`."""
    manifest_path = Path(sys.argv[1])
    manifest = json.loads(manifest_path.read_text())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    torch.set_num_threads(int(manifest.get("threads", 1)))
    torch.manual_seed(0)
    out_dir = Path(manifest["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    found_versions = versions()
    mode = manifest["mode"]
    for spec in manifest["jobs"]:
        job = Job(spec, out_dir)
        started = time.perf_counter()
        print(f"[{mode}] {job.key}: {len(job.reads)} reads", file=sys.stderr, flush=True)
        try:
            with torch.no_grad():
                run(mode, job)
        except Unsupported as exc:
            job.unsupported = str(exc)
        except Exception as exc:  # one model failing must not take the others down
            job.unsupported = describe(exc)
            job.notes.append(traceback.format_exc()[-4000:])
        job.write(time.perf_counter() - started, found_versions)
    return 0
