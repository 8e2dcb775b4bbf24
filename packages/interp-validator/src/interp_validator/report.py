"""A sweep written out: `summary.json`, one JSON per run, a Markdown report and an error plot.

Files under the output folder:

- `summary.json`: every record (subject backend, reference engine, family or model, point,
  layer[, stream]: status and the three metrics), the prompt, the tolerances, and which backends
  and engines ran (their versions, or why they were skipped or crashed). Sorted and free of
  timings, so a sweep of unchanged code rewrites it byte for byte; the docs site and the
  regression test read it.
- `runs/<backend>--<engine>.json`: one per (backend, engine) run — the versions on both sides,
  the tolerance, per-model token ids, layers and status counts, and timings (the records
  themselves are in the summary).
- `report.md`: a summary table, then a table per family or model and backend (addresses as
  rows, reference engines as columns: ✓, ✗ with its metrics, not expressible or unsupported, each
  with its reason in numbered notes), followed by the addresses the backend refused, grouped by
  its reason (a refusal is the backend's, the same for every engine).
- `errors-by-layer.png`: the relative error of every comparison by relative depth, one panel
  per backend, one colour per engine (matplotlib, Agg backend; skipped with a note when
  matplotlib is not installed).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from interp_validator.records import Record, Status, sort_records, summary_document

__all__ = [
    "PLOT_NAME",
    "REPORT_NAME",
    "RUNS_DIR",
    "SUMMARY_NAME",
    "cell",
    "render_report",
    "write_plot",
    "write_results",
]

SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.md"
PLOT_NAME = "errors-by-layer.png"
RUNS_DIR = "runs"
_STATUS_ORDER = [s.value for s in Status]
_LABEL = {
    Status.PASS: "pass",
    Status.FAIL: "fail",
    Status.NOT_EXPRESSIBLE: "not expressible",
    Status.REFUSED: "refused",
    Status.UNSUPPORTED: "unsupported",
}
_EXACT_FLOOR = 1e-12  # where an exact zero sits on the plot's log axis


def _dump(path: Path, data: Mapping[str, Any]) -> None:
    """Indented JSON, except that each entry of a "records" list is one compact line: a
    summary of thousands of records stays small and diffs line by line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["{"]
    items = list(data.items())
    for index, (key, value) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        if key == "records" and isinstance(value, list):
            rows = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in value]
            body = ",\n  ".join(rows)
            lines.append(
                f' "records": [\n  {body}\n ]{comma}' if rows else f' "records": []{comma}'
            )
        else:
            text = json.dumps(value, indent=1, ensure_ascii=False).replace("\n", "\n ")
            lines.append(f" {json.dumps(key)}: {text}{comma}")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _untimed(infos: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Who ran (versions, or why skipped, or the crash) without timings, which vary per run."""
    return {
        name: {k: v for k, v in info.items() if k != "seconds"}
        for name, info in sorted(infos.items())
    }


def _tolerances_json(result: Any) -> dict[str, Any]:
    return {pair: tol.to_json() for pair, tol in sorted(result.tolerances.items())}


def write_results(result: Any, out: Path, *, command: Sequence[str] | None = None) -> list[Path]:
    """Write every file of a sweep under `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    summary = summary_document(
        result.records,
        prompt=result.prompt,
        dtype=result.dtype,
        tolerances=_tolerances_json(result),
        backends=_untimed(result.backends),
        engines=_untimed(result.engines),
    )
    _dump(out / SUMMARY_NAME, summary)
    written.append(out / SUMMARY_NAME)
    runs = out / RUNS_DIR
    for stale in runs.glob("*.json") if runs.is_dir() else ():
        stale.unlink()  # runs of backends or engines left out this time must not linger
    by_run: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in result.records:
        by_run[(record.backend, record.engine)].append(record)
    for (backend, engine), records in sorted(by_run.items()):
        path = runs / f"{backend}--{engine}.json"
        _dump(path, _run_document(result, backend, engine, records))
        written.append(path)
    plot = write_plot(result.records, out / PLOT_NAME, result.tolerances)
    if plot is not None:
        written.append(plot)
    report = render_report(result, command=command, plot=plot is not None)
    (out / REPORT_NAME).write_text(report, encoding="utf-8")
    written.append(out / REPORT_NAME)
    return written


def _run_document(result: Any, backend: str, engine: str, records: list[Record]) -> dict:
    models = {}
    for plan in result.plans:
        mine = [r for r in records if r.model == plan.target.name]
        models[plan.target.name] = {
            **plan.to_json(),
            "counts": dict(Counter(r.status.value for r in mine)),
        }
    return {
        "backend": backend,
        "engine": engine,
        "dtype": result.dtype,
        "prompt": result.prompt,
        "tolerance": result.tolerances[f"{backend}/{engine}"].to_json(),
        "backend_versions": result.backends.get(backend, {}).get("versions", {}),
        "engine_versions": result.engines.get(engine, {}).get("versions", {}),
        "backend_seconds": result.backends.get(backend, {}).get("seconds"),
        "engine_seconds": result.engines.get(engine, {}).get("seconds"),
        "engine_error": result.engines.get(engine, {}).get("error"),
        "models": models,
    }


# --- Markdown ------------------------------------------------------------------------------------
def _md(text: object) -> str:
    """Text safe inside a Markdown table cell (and as HTML: reasons quote `<class ...>`)."""
    safe = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return safe.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


class _Notes:
    """Numbered reasons under one table; the same reason gets the same number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def number(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1

    def render(self) -> str:
        return "".join(f"{i}. {_md(text)}\n" for i, text in enumerate(self.texts, 1))


def cell(record: Record, notes: _Notes | None = None) -> str:
    """One record as a short table cell: ✓ (with the error when not exact), ✗ with metrics, or
    the status with a numbered note holding the reason."""
    note = ""
    if record.reason and notes is not None:
        note = f" [{notes.number(record.reason)}]"
    if record.status is Status.PASS:
        if record.rel_error:
            return f"✓ {record.rel_error:.1e}"
        return "✓"
    if record.status is Status.FAIL:
        parts = ["✗"]
        if record.rel_error is not None:
            parts.append(f"rel {record.rel_error:.2g}")
        if record.cosine is not None:
            parts.append(f"cos {record.cosine:.4g}")
        return " ".join(parts) + note
    return _LABEL[record.status] + note


def _counts_table(records: Sequence[Record]) -> str:
    groups: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in records:
        groups[(record.backend, record.engine)][record.status.value] += 1
    rows = [
        [f"`{b}`", f"`{e}`", *(str(counter.get(s, 0)) for s in _STATUS_ORDER)]
        for (b, e), counter in sorted(groups.items())
    ]
    header = ["backend", "reference engine", *(_LABEL[Status(s)] for s in _STATUS_ORDER)]
    return _table(header, rows)


def _model_section(plan: Any, records: Sequence[Record], engines: Sequence[str]) -> str:
    """One model: per backend, a table of the compared addresses (engines as columns), then the
    addresses the backend refused, grouped by reason (a refusal does not depend on the engine)."""
    out = [f"### {plan.target.name}\n\n"]
    depth = f"{plan.n_layers} layers, checked at {', '.join(map(str, plan.layers))}"
    out.append(f"`{plan.architecture}`, {depth}; {len(plan.tokens)} prompt tokens.\n\n")
    by_backend: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_backend[record.backend].append(record)
    for backend, mine in sorted(by_backend.items()):
        notes = _Notes()
        grid: dict[str, dict[str, Record]] = defaultdict(dict)
        order: list[str] = []
        refused: dict[str, list[str]] = defaultdict(list)
        for record in sort_records(mine):
            if record.status is Status.REFUSED:
                if record.address not in refused[record.reason or ""]:
                    refused[record.reason or ""].append(record.address)
                continue
            if record.address not in grid:
                order.append(record.address)
            grid[record.address][record.engine] = record
        rows = []
        for address in order:
            row = [f"`{address}`"]
            for engine in engines:
                found = grid[address].get(engine)
                row.append(cell(found, notes) if found is not None else "")
            rows.append(row)
        counts = Counter(r.status for r in mine)
        summary = ", ".join(f"{counts[s]} {_LABEL[s]}" for s in Status if counts[s])
        out.append(f"**{backend}** ({summary})\n\n")
        if rows:
            out.append(_table(["address", *(f"`{e}`" for e in engines)], rows))
        if notes.texts:
            out.append("\n" + notes.render())
        for reason, addresses in refused.items():
            shown = ", ".join(f"`{a}`" for a in addresses)
            out.append(f"\nRefused by `{backend}` ({len(addresses)}): {shown}. {_md(reason)}\n")
        out.append("\n")
    return "".join(out)


def _versions_table(infos: Mapping[str, Mapping[str, Any]], what: str) -> str:
    rows = []
    for name, info in sorted(infos.items()):
        if "skipped" in info:
            rows.append([f"`{name}`", "skipped", _md(info["skipped"])])
            continue
        versions = ", ".join(f"{k} {v}" for k, v in sorted(info.get("versions", {}).items()))
        state = "error" if "error" in info else f"{info.get('seconds', 0):.1f} s"
        detail = _md(info["error"]) if "error" in info else _md(versions)
        rows.append([f"`{name}`", state, detail])
    return _table([what, "run", "versions (or why not run)"], rows)


def render_report(result: Any, *, command: Sequence[str] | None = None, plot: bool = True) -> str:
    """The Markdown report of a sweep (see the module docstring)."""
    records = result.records
    engines = sorted({r.engine for r in records}, key=lambda e: (e != "hf", e))
    shown = shlex.join(command) if command is not None else "interp-validate"
    out = ["# Validation report\n\n"]
    out.append(
        "Each subject backend's captures are compared with each reference engine's at every "
        "point the model has, at the first, middle and last layers (and three quarters deep on "
        f"models of 8 layers or more), on the prompt {json.dumps(result.prompt)} in "
        f"{result.dtype} with eager attention. A comparison passes when its relative error "
        "(max abs difference over the reference's max abs) and its smallest per-position "
        "cosine are both within the tolerance below; not expressible, refused and unsupported "
        "are not passes.\n\n"
    )
    out.append(f"Written by `{_md(shown)}` in {result.seconds:.0f} s.\n\n")
    out.append("## Summary\n\n")
    out.append(_counts_table(records) + "\n")
    failures = [r for r in records if r.status is Status.FAIL]
    if failures:
        out.append(f"**{len(failures)} comparisons failed.**\n\n")
        rows = [
            [
                f"`{r.backend}`",
                f"`{r.engine}`",
                f"`{r.model}`",
                f"`{r.address}`",
                "" if r.rel_error is None else f"{r.rel_error:.3g}",
                "" if r.cosine is None else f"{r.cosine:.6g}",
                _md(r.reason or ""),
            ]
            for r in sort_records(failures)
        ]
        header = ["backend", "engine", "model", "address", "rel error", "cosine", "reason"]
        out.append(_table(header, rows) + "\n")
    else:
        out.append("No comparison failed.\n\n")
    if plot:
        out.append(f"![Relative error by layer]({PLOT_NAME})\n\n")
    out.append("## Setup\n\n")
    out.append(_versions_table(result.backends, "subject backend") + "\n")
    out.append(_versions_table(result.engines, "reference engine") + "\n")
    tol_rows = [
        [f"`{pair}`", f"{tol.max_rel_error:g}", f"{tol.min_cosine:.7g}", _md(tol.basis)]
        for pair, tol in sorted(result.tolerances.items())
    ]
    out.append(_table(["backend/engine", "max rel error", "min cosine", "why"], tol_rows) + "\n")
    if result.skipped_models:
        out.append("Models not compared:\n\n")
        for name, why in sorted(result.skipped_models.items()):
            out.append(f"- `{name}`: {_md(why)}\n")
        out.append("\n")
    out.append("## By family and model\n\n")
    by_model: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_model[record.model].append(record)
    for plan in result.plans:
        out.append(_model_section(plan, by_model.get(plan.target.name, []), engines))
    return "".join(out)


# --- the plot ------------------------------------------------------------------------------------
def write_plot(
    records: Sequence[Record], path: Path, tolerances: Mapping[str, Any] | None = None
) -> Path | None:
    """Relative error by relative depth, one panel per backend with measured comparisons (the
    worst over points per model and layer; exact zeros on a floor line); None without
    matplotlib or without any measured comparison."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("interp-validate: matplotlib is not installed; no plot", file=sys.stderr)
        return None
    depth = _depths(records)
    # Only backends with at least one measured comparison: an all-refused one has nothing to plot.
    backends = sorted({r.backend for r in records if r.rel_error is not None})
    engines = sorted({r.engine for r in records}, key=lambda e: (e != "hf", e))
    if not backends:
        return None
    fig, axes = plt.subplots(
        1, len(backends), figsize=(6 * len(backends), 4.2), squeeze=False, sharey=True
    )
    colours = plt.get_cmap("tab10")
    for ax, backend in zip(axes[0], backends, strict=True):
        for index, engine in enumerate(engines):
            worst: dict[tuple[str, int], float] = {}
            for r in records:
                if r.backend != backend or r.engine != engine or r.layer is None:
                    continue
                if r.rel_error is None:
                    continue
                key = (r.model, r.layer)
                worst[key] = max(worst.get(key, 0.0), r.rel_error)
            if not worst:
                continue
            # Engines side by side around each depth, so equal errors do not hide each other.
            shift = (index - (len(engines) - 1) / 2) * 0.008
            xs = [depth[key] + shift for key in worst]
            ys = [max(v, _EXACT_FLOOR) for v in worst.values()]
            ax.scatter(xs, ys, s=14, alpha=0.7, color=colours(index % 10), label=engine)
            if tolerances and f"{backend}/{engine}" in tolerances:
                tol = tolerances[f"{backend}/{engine}"].max_rel_error
                ax.axhline(tol, color=colours(index % 10), linewidth=0.8, linestyle="--")
        ax.set_yscale("log")
        ax.set_ylim(_EXACT_FLOOR / 3, 10)
        ax.set_xlim(-0.05, 1.05)
        ax.set_title(f"{backend}: worst relative error per model and layer")
        ax.set_xlabel("relative depth (layer / (n_layers - 1))")
        ax.axhline(_EXACT_FLOOR, color="grey", linewidth=0.5)
        ax.text(0.0, _EXACT_FLOOR * 1.5, "exact (0)", fontsize=7, color="grey")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
    axes[0][0].set_ylabel("relative error (dashed: tolerance)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def _depths(records: Sequence[Record]) -> dict[tuple[str, int], float]:
    deepest: dict[str, int] = {}
    for r in records:
        if r.layer is not None:
            deepest[r.model] = max(deepest.get(r.model, 0), r.layer)
    return {
        (r.model, r.layer): (r.layer / deepest[r.model] if deepest[r.model] else 0.0)
        for r in records
        if r.layer is not None
    }
