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

__all__ = [
    "PROMPT_TOKENS",
    "BenchResult",
    "Row",
    "interleave",
    "paired_ratios",
    "prompt_tokens",
    "spread_note",
    "time_rows",
]

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
    goal: float | None = None  # the ratio this row is meant to reach, where one is set
    # ">=": the ratio must reach the goal (a speed-up); "<=": stay under it (an overhead, P2).
    goal_kind: str = ">="
    # The least and greatest of the paired runs' ratios behind `ratio` (their median), and how
    # many pairs there were: a goal met by the median but not by the spread is a noisy goal.
    spread: tuple[float, float] | None = None
    pairs: int | None = None

    def __post_init__(self) -> None:
        if self.goal_kind not in (">=", "<="):
            msg = f"Row.goal_kind must be '>=' or '<=', not {self.goal_kind!r}"
            raise ValueError(msg)
        if self.spread is not None:
            # JSON brings the pair back as a list; keep one type so rows compare equal.
            object.__setattr__(self, "spread", (float(self.spread[0]), float(self.spread[1])))

    @property
    def met(self) -> bool | None:
        """Whether the goal is met (None where the row has no goal or no ratio)."""
        if self.goal is None or self.ratio is None:
            return None
        return self.ratio >= self.goal if self.goal_kind == ">=" else self.ratio <= self.goal

    def ratio_text(self) -> str:
        if self.ratio is None:
            return ""
        text = f"{self.ratio:.3f}×"
        if self.spread is not None:
            low, high = self.spread
            text += f" [{low:.3f}–{high:.3f}, {self.pairs} pairs]"
        if self.met is not None:
            sign = "≥" if self.goal_kind == ">=" else "≤"
            text += f" (goal {sign} {self.goal:g}×: {'met' if self.met else 'MISSED'})"
        return text


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

    def missed(self) -> list[Row]:
        """The rows whose goal this run missed (what `interp-bench --check` fails on)."""
        return [row for row in self.rows if row.met is False]

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
            ratio = row.ratio_text()
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
    variants: dict[str, Callable[[], Any]], *, repeats: int, warmup: int, settle: float = 0.0
) -> dict[str, list[float]]:
    """Seconds per call of each variant, run round-robin so noise hits all of them alike.

    `settle` seconds pass before each timed call, so that what the previous call left running
    (a vLLM engine's processes spin for a while after their last step) has stopped before the
    next is timed, whichever variant comes next."""
    for _ in range(warmup):
        for run in variants.values():
            run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            if settle:
                time.sleep(settle)
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def token_rates(
    variants: dict[str, Callable[[], int]],
    rounds: int,
    *,
    alternate: bool = False,
    settle: float = 0.0,
) -> dict[str, list[float]]:
    """Tokens per second of each variant (`run()` returns the tokens it made), one run of each a
    round; the caller warms them up first.

    With `alternate` every other round runs the variants in reverse order, so neither always
    runs on what the other left behind; `settle` is `interleave`'s."""
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        order = list(reversed(variants)) if alternate and index % 2 else list(variants)
        for name in order:
            if settle:
                time.sleep(settle)
            start = time.perf_counter()
            tokens = variants[name]()
            rates[name].append(tokens / (time.perf_counter() - start))
    return rates


def paired_ratios(mine: list[float], base: list[float]) -> list[float]:
    """Each run's ratio to the baseline run beside it (index i with index i).

    On a shared machine the load drifts between rounds of `interleave`; a ratio taken within one
    round sees one load, so the median of these ratios is not biased by the drift, and their
    spread says how far a single round can be trusted.
    """
    if len(mine) != len(base) or not mine:
        msg = f"paired runs need equal, non-zero counts, got {len(mine)} and {len(base)}"
        raise ValueError(msg)
    return [m / b for m, b in zip(mine, base, strict=True)]


def spread_note(ratios: list[float]) -> dict[str, Any]:
    """The `ratio`, `spread` and `pairs` fields of a row whose ratio comes from paired runs."""
    return {
        "ratio": statistics.median(ratios),
        "spread": (min(ratios), max(ratios)),
        "pairs": len(ratios),
    }


def time_rows(
    workload_of: dict[str, str],
    subject: str,
    times: dict[str, list[float]],
    baseline: str,
    goals: dict[str, tuple[str, float]] | None = None,
) -> list[Row]:
    """Rows of seconds per call: each ratio the median of the paired rounds' ratios.

    `goals` maps a variant to `(kind, goal)` (kind ">=" or "<="), stated where the workload is.
    """
    goals = goals or {}
    rows = []
    for name, samples in times.items():
        if name == baseline:
            continue
        paired = spread_note(paired_ratios(samples, times[baseline]))
        kind, goal = goals.get(name, (">=", None))
        rows.append(
            Row(
                workload_of[name],
                subject,
                name,
                statistics.median(samples),
                "s",
                baseline,
                goal=goal,
                goal_kind=kind,
                **paired,
            )
        )
    return rows
