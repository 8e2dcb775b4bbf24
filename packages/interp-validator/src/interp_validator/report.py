"""A sweep written out: a compact summary and report (committed), an error plot, and the full
records as a build artefact under `full/`.

Files under the output folder:

- `summary.json`: the compact form (`records.compact_document`, format 2): per backend x
  engine x family or model the status counts and worst metrics, every record that is not a
  pass (reasons stored once), the prompt, the tolerances, and which backends and engines ran
  (their versions, or why they were skipped or crashed). Sorted and free of timings, so a sweep
  of unchanged code rewrites it byte for byte; the docs site and `--baseline` read it.
- `report.md`: rendered from that summary alone: a verdict line, counts per backend and engine,
  the failures, a matrix of passes per family, the setup, and what was not compared and why.
- `errors-by-layer.png`: the relative error of every comparison by relative depth, one panel
  per backend, one colour per engine (matplotlib, Agg backend; skipped with a note when
  matplotlib is not installed).
- `full/summary.json`: every record (format 1) with the same context; `full/report.md`: a
  table per family or model and backend (addresses as rows, reference engines as columns: ✓, ✗
  with its metrics, not expressible or unsupported, each with its reason in numbered notes) and
  the addresses each backend refused, grouped by reason; `full/runs/<backend>--<engine>.json`:
  one per run, with versions, per-model token ids, layers, status counts and timings. Where the
  results are committed, `full/` is git-ignored.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from interp_validator.records import (
    Compact,
    Record,
    Status,
    compact_document,
    compact_from_document,
    document_of_compact,
    merge_compacts,
    sort_records,
    summary_document,
)

__all__ = [
    "FULL_DIR",
    "PLOT_NAME",
    "REPORT_NAME",
    "RUNS_DIR",
    "SUMMARY_NAME",
    "cell",
    "render_compact_report",
    "render_report",
    "write_compact",
    "write_plot",
    "write_results",
]

SUMMARY_NAME = "summary.json"
REPORT_NAME = "report.md"
PLOT_NAME = "errors-by-layer.png"
RUNS_DIR = "runs"
FULL_DIR = "full"  # every record: a build artefact, git-ignored where the results are committed
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
        if key in ("records", "cells") and isinstance(value, list):
            rows = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in value]
            body = ",\n  ".join(rows)
            name = json.dumps(key)
            lines.append(f" {name}: [\n  {body}\n ]{comma}" if rows else f" {name}: []{comma}")
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


def write_results(
    result: Any,
    out: Path,
    *,
    command: Sequence[str] | None = None,
    merge_into: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write every file of a sweep under `out` (the compact summary and report, the plot, and the
    full records under `full/`); returns the paths written. With `merge_into` (the committed
    compact summary, read before the sweep) the compact pair keeps every model this sweep did
    not run; the plot and `full/` hold this sweep only, so the committed plot is left alone."""
    out.mkdir(parents=True, exist_ok=True)
    context = {
        "prompt": result.prompt,
        "dtype": result.dtype,
        "tolerances": _tolerances_json(result),
        "backends": _untimed(result.backends),
        "engines": _untimed(result.engines),
    }
    full = out / FULL_DIR
    written = []
    _dump(full / SUMMARY_NAME, summary_document(result.records, **context))
    written.append(full / SUMMARY_NAME)
    runs = full / RUNS_DIR
    for stale in runs.glob("*.json") if runs.is_dir() else ():
        stale.unlink()  # runs of backends or engines left out this time must not linger
    by_run: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in result.records:
        by_run[(record.backend, record.engine)].append(record)
    for (backend, engine), records in sorted(by_run.items()):
        path = runs / f"{backend}--{engine}.json"
        _dump(path, _run_document(result, backend, engine, records))
        written.append(path)
    plot = None
    if merge_into is None:
        plot = write_plot(result.records, out / PLOT_NAME, result.tolerances)
    elif (out / PLOT_NAME).is_file():
        plot = out / PLOT_NAME
    if plot is not None and merge_into is None:
        written.append(plot)
    report = render_report(result, command=command, plot=False)
    (full / REPORT_NAME).write_text(report, encoding="utf-8")
    written.append(full / REPORT_NAME)
    extra = {"skipped_models": dict(sorted(result.skipped_models.items()))}
    written += write_compact(
        result.records,
        out,
        context={**context, **extra},
        # A merged summary is no one command's output: name the tool alone, as a full sweep does.
        command=command if merge_into is None else None,
        plot=plot is not None,
        merge_into=merge_into,
        models=[p.target.name for p in result.plans] + list(result.skipped_models),
        backends=list(result.backends),
    )
    return written


def write_compact(
    records: Sequence[Record],
    out: Path,
    *,
    context: Mapping[str, Any],
    command: Sequence[str] | None = None,
    plot: bool = True,
    merge_into: Mapping[str, Any] | None = None,
    models: Sequence[str] = (),
    backends: Sequence[str] | None = None,
) -> list[Path]:
    """The committed pair under `out`: `summary.json` (format 2, `records.compact_document`)
    and `report.md` rendered from it. Neither holds a timing: unchanged results rewrite them
    byte for byte. With `merge_into` (a committed summary), the sweep's `models` replace their
    cells there (those of `backends`, all when None) and every other cell is kept."""
    if merge_into is None:
        document = compact_document(records, **context)
    else:
        merged = merge_compacts(
            compact_from_document(merge_into), Compact.from_records(records), models, backends
        )
        document = document_of_compact(merged, **_merged_context(merge_into, context))
    _dump(out / SUMMARY_NAME, document)
    text = render_compact_report(document, command=command, plot=plot)
    (out / REPORT_NAME).write_text(text, encoding="utf-8")
    return [out / SUMMARY_NAME, out / REPORT_NAME]


def _merged_context(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    # The sweep's own context wins; versions and skips of backends, engines and models it did
    # not run stay as committed.
    merged = {**{k: v for k, v in base.items() if k in new}, **new}
    for key in ("backends", "engines", "skipped_models", "tolerances"):
        if isinstance(base.get(key), Mapping) and isinstance(new.get(key), Mapping):
            merged[key] = dict(sorted({**base[key], **new[key]}.items()))
    return merged


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


def _failures_table(failures: Iterable[Record]) -> str:
    """One row per failed comparison, in the order given: where it failed, by how much, why."""
    header = ["backend", "engine", "model", "address", "rel error", "cosine", "reason"]
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
        for r in failures
    ]
    return _table(header, rows)


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
        out.append(_failures_table(sort_records(failures)) + "\n")
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


# --- the compact report ------------------------------------------------------------------------
def verdict(totals: Mapping[str, int]) -> str:
    """One line: how many comparisons, how many failed, and the rest by status."""
    n = sum(totals.values())
    fails = totals.get(Status.FAIL.value, 0)
    rest = ", ".join(f"{totals[s.value]} {_LABEL[s]}" for s in Status if totals.get(s.value))
    head = "No comparison failed" if not fails else f"{fails} comparisons failed"
    return f"{head}: {n} comparisons ({rest or 'none'})."


def _cell_text(counts: Mapping[str, int]) -> str:
    """`passes/compared` of one cell, then ✗ and the failure count when any failed."""
    text = f"{counts.get('pass', 0)}/{sum(counts.values())}"
    fails = counts.get(Status.FAIL.value, 0)
    return f"{text} ✗{fails}" if fails else text


def _matrix(cells: Sequence[Mapping[str, Any]]) -> str:
    """Per backend, families and models as rows, engines as columns, passes/comparisons."""
    out = []
    for backend in sorted({c["backend"] for c in cells}, key=lambda b: (b != "eager", b)):
        mine = [c for c in cells if c["backend"] == backend]
        engines = sorted({c["engine"] for c in mine}, key=lambda e: (e != "hf", e))
        grid = {(c["model"], c["engine"]): c["counts"] for c in mine}
        rows = [
            [f"`{model}`", *(_cell_text(grid.get((model, e), {})) for e in engines)]
            for model in sorted({c["model"] for c in mine})
        ]
        out.append(f"**{backend}**\n\n" + _table(["model", *(f"`{e}`" for e in engines)], rows))
        out.append("\n")
    return "".join(out)


def render_compact_report(
    document: Mapping[str, Any], *, command: Sequence[str] | None = None, plot: bool = True
) -> str:
    """The committed `report.md`, rendered from the compact summary alone (see
    `records.compact_document`): verdict, counts, failures, the matrix, setup, and what was
    not compared and why. The per-address tables are in `full/report.md` of a sweep's output."""
    compact = compact_from_document(document)
    shown = shlex.join(command) if command is not None else "interp-validate"
    out = ["# Validation report\n\n", f"**{verdict(compact.totals())}**\n\n"]
    out.append(
        "Each subject backend's captures are compared with each reference engine's at every "
        "point the model has, at the first, middle and last layers (and three quarters deep on "
        f"models of 8 layers or more), on the prompt {json.dumps(document.get('prompt'))} in "
        f"{document.get('dtype')} with eager attention. A comparison passes when its relative "
        "error and its smallest per-position cosine are both within the tolerance below. This "
        "is the committed, compact form: counts per cell and every comparison that is not a "
        f"pass; a sweep writes every record under `{FULL_DIR}/` of its output folder.\n\n"
    )
    out.append(f"Written by `{_md(shown)}`.\n\n")
    records = compact.non_pass
    out.append("## Summary\n\n")
    rows = []
    by_pair: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    worst: dict[tuple[str, str], float] = {}
    for (backend, engine, _), tally in compact.counts.items():
        by_pair[(backend, engine)].update(tally)
    for (backend, engine, _model), metrics in compact.worst.items():
        rel = metrics.get("rel_error")
        if rel is not None:
            worst[(backend, engine)] = max(worst.get((backend, engine), 0.0), rel)
    for (b, e), counter in sorted(by_pair.items()):
        w = worst.get((b, e))
        rows.append(
            [
                f"`{b}`",
                f"`{e}`",
                *(str(counter.get(s, 0)) for s in _STATUS_ORDER),
                "" if w is None else f"{w:.3g}",
            ]
        )
    header = ["backend", "reference engine", *(_LABEL[Status(s)] for s in _STATUS_ORDER)]
    out.append(_table([*header, "worst rel error"], rows) + "\n")
    failures = [r for r in records if r.status is Status.FAIL]
    if failures:
        out.append(f"## Failures ({len(failures)})\n\n")
        out.append(_failures_table(failures) + "\n")
    if plot:
        out.append(f"![Relative error by layer]({PLOT_NAME})\n\n")
    out.append("## Matrix\n\n")
    out.append("Passes / comparisons per family or model, backend and reference engine.\n\n")
    out.append(_matrix(document.get("cells", [])))
    out.append("## Setup\n\n")
    out.append(_versions_table(document.get("backends", {}), "subject backend") + "\n")
    out.append(_versions_table(document.get("engines", {}), "reference engine") + "\n")
    tol_rows = [
        [
            f"`{pair}`",
            f"{tol.get('max_rel_error', 0):g}",
            f"{tol.get('min_cosine', 0):.7g}",
            _md(tol.get("basis", "")),
        ]
        for pair, tol in sorted(document.get("tolerances", {}).items())
    ]
    out.append(_table(["backend/engine", "max rel error", "min cosine", "why"], tol_rows) + "\n")
    skipped = document.get("skipped_models") or {}
    if skipped:
        out.append("Models not compared:\n\n")
        out.append("".join(f"- `{name}`: {_md(why)}\n" for name, why in sorted(skipped.items())))
        out.append("\n")
    out.append(_not_compared(records))
    return "".join(out)


def _not_compared(records: Sequence[Record]) -> str:
    """The comparisons not made (not expressible, refused, unsupported), grouped by status and
    reason, with the cells and the number of addresses in each."""
    groups: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in records:
        if r.status is not Status.FAIL:
            where = f"{r.backend}/{r.engine} on {r.model}"
            groups[(r.status.value, r.reason or "")][where] += 1
    if not groups:
        return ""
    out = ["## Not compared\n\n"]
    order = sorted(groups, key=lambda k: (_STATUS_ORDER.index(k[0]), k[1]))
    for status, reason in order:
        tally = groups[(status, reason)]
        cells = ", ".join(f"{where} ({n})" for where, n in sorted(tally.items()))
        count = sum(tally.values())
        out.append(f"- **{_LABEL[Status(status)]}** ({count}): {_md(reason)} — {_md(cells)}\n")
    return "".join(out) + "\n"


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
