"""What a benchmark run produces (rows, a result with its Markdown table) and how it times.

Kept apart from the workloads so that every workload module (the CPU workloads, the static tier's
P3, the GPU suite) builds on it without importing the others.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["PROMPT_TOKENS", "BenchResult", "Row", "interleave", "prompt_tokens", "time_rows"]

PROMPT_TOKENS = 128


@dataclass(frozen=True)
class Row:
    """One measured variant: its median and its ratio to the baseline it ran beside."""

    workload: str
    subject: str  # "eager", "vllm", "tl_bridge (TL 3.9.0)", ...
    variant: str
    value: float  # seconds (unit "s") or tokens per second (unit "tok/s")
    unit: str
    baseline: str
    ratio: float | None
    note: str = ""
    goal: float | None = None  # the least ratio this row is meant to reach, where one is set


@dataclass
class BenchResult:
    rows: list[Row] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {"meta": self.meta, "rows": [asdict(r) for r in self.rows], "errors": self.errors},
            indent=2,
        )

    def merged_into(self, previous: dict[str, Any], workloads: set[str]) -> BenchResult:
        """`previous` (a bench.json document) with `workloads`' rows and errors replaced by
        this run's: a run of some workloads lands beside the committed others. The previous
        meta stays (same model and machine); this run's settings are added where it lacks them."""
        ran = workloads | {row.workload for row in self.rows}
        rows = [Row(**r) for r in previous.get("rows", []) if r.get("workload") not in ran]
        # Error keys start with the workload ("S smollm2") or name an engine; this run's win.
        errors = {k: v for k, v in previous.get("errors", {}).items() if k.split()[0] not in ran}
        meta = {**self.meta, **previous.get("meta", {})}
        return BenchResult(rows + self.rows, meta, {**errors, **self.errors})

    def markdown(self) -> str:
        lines = [
            f"Model: {self.meta.get('model', '?')}; {self.meta.get('machine', '')}",
            "",
            "| workload | subject | variant | value | baseline | ratio |",
            "|---|---|---|---:|---|---:|",
        ]
        for row in self.rows:
            value = (
                f"{row.value * 1000:.1f} ms" if row.unit == "s" else f"{row.value:.0f} {row.unit}"
            )
            ratio = "" if row.ratio is None else f"{row.ratio:.3f}×"
            if row.goal is not None and row.ratio is not None:
                verdict = "met" if row.ratio >= row.goal else "MISSED"
                ratio += f" (goal ≥ {row.goal:g}×: {verdict})"
            note = f" ({row.note})" if row.note else ""
            lines.append(
                f"| {row.workload} | {row.subject} | {row.variant}{note} | {value} | "
                f"{row.baseline} | {ratio} |"
            )
        for name, error in sorted(self.errors.items()):
            first = error.strip().splitlines()[0] if error.strip() else "failed"
            lines.append(f"| {name} | — | not measured: {first} | | | |")
        return "\n".join(lines) + "\n"


# --- the model -----------------------------------------------------------------------------------
def prompt_tokens(length: int = PROMPT_TOKENS, seed: int = 0) -> list[int]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    # Below the tokenizer's size (and never the end-of-sequence id).
    return torch.randint(3, 400, (length,), generator=generator).tolist()


# --- timing --------------------------------------------------------------------------------------
def interleave(
    variants: dict[str, Callable[[], Any]], *, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call of each variant, run round-robin so noise hits all of them alike."""
    for _ in range(warmup):
        for run in variants.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def time_rows(
    workload_of: dict[str, str], subject: str, times: dict[str, list[float]], baseline: str
) -> list[Row]:
    base = statistics.median(times[baseline])
    rows = []
    for name, samples in times.items():
        if name == baseline:
            continue
        median = statistics.median(samples)
        rows.append(Row(workload_of[name], subject, name, median, "s", baseline, median / base))
    return rows
