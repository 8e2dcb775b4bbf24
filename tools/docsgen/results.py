"""The validation and benchmark pages, filled from whatever result files are committed.

The validator commits `packages/interp-validator/results/summary.json` in its compact form
(format 2: status totals, one row per subject backend x reference engine x family or model with
its status counts and worst metrics, and every record that is not a pass), its Markdown report
(`report.md`: verdict, counts, matrix, setup, what was not compared and why) and a per-layer error
plot (`errors-by-layer.png`); the benchmarks write JSON next to them. Until those files exist the
pages say so plainly; once they land, the next build shows them: a one-line verdict and the
compact matrix first, then the failures, the plot (published as a generated asset, see
`validation_assets`) and the report's sections from its setup on. A summary holding every record
(format 1, or a plain list) is still shown as tables of counts. Nothing here invents a number: a
field is shown only if a file holds it, and a file of an unexpected shape is shown as its raw
keys rather than guessed at.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from docsgen.markup import code, esc, table

__all__ = [
    "BENCH_GLOBS",
    "PLOT",
    "PLOT_SRC",
    "REPORT",
    "SUMMARY",
    "benchmarks_page",
    "find_benchmark_files",
    "render_json",
    "summary_records",
    "validation_assets",
    "validation_page",
]

SUMMARY = "packages/interp-validator/results/summary.json"
REPORT = "packages/interp-validator/results/report.md"
PLOT = "packages/interp-validator/results/errors-by-layer.png"
PLOT_SRC = "reference/validation-errors-by-layer.png"  # where the site publishes the plot
RESULTS_DIR = "packages/interp-validator/results"
_REPORT_FROM = "## Setup"  # the report's sections from here on appear on the page
BENCH_GLOBS = (
    "packages/interp-validator/results/bench*.json",
    "packages/interp-validator/results/bench*/*.json",
    "packages/interp-validator/benchmarks/**/*.json",
    "benchmarks/**/*.json",
)
_MAX_ROWS = 400  # a page is for reading; the JSON file holds everything

# Field names the validator may use for each column, first match wins.
_FIELDS = {
    "backend": ("backend", "subject", "subject_backend"),
    "engine": ("engine", "reference", "reference_engine"),
    "model": ("family", "model", "subject_model"),
    "point": ("point", "address"),
    "layer": ("layer",),
    "status": ("status", "verdict", "result"),
    "cosine": ("cosine", "cos"),
    "rel_error": ("rel_error", "relative_error", "rel_err"),
    "max_abs": ("max_abs", "max_abs_error", "max_abs_diff"),
}


def _pick(record: Mapping[str, Any], field: str) -> Any:
    for key in _FIELDS[field]:
        if key in record:
            return record[key]
    return None


def _front(title: str) -> str:
    return f"---\ntitle: {title}\nhide:\n  - toc\n---\n\n"


def summary_records(data: Any) -> list[Mapping[str, Any]] | None:
    """The list of records in a summary file: the file itself, or a list under a known key."""
    if isinstance(data, list) and all(isinstance(r, Mapping) for r in data):
        return data
    if isinstance(data, Mapping):
        for key in ("records", "results", "rows"):
            value = data.get(key)
            if isinstance(value, list) and all(isinstance(r, Mapping) for r in value):
                return value
    return None


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if value is None:
        return ""
    return esc(value)


def _is_pass(status: Any) -> bool | None:
    text = str(status).strip().lower()
    if text in ("pass", "passed", "ok", "✓", "true"):
        return True
    if text in ("fail", "failed", "error", "✗", "false"):
        return False
    return None


def _summary_tables(records: list[Mapping[str, Any]]) -> str:
    out = []
    # Per (backend, engine): how many checks passed, failed, or were something else.
    groups: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in records:
        key = (str(_pick(record, "backend") or "?"), str(_pick(record, "engine") or "?"))
        groups[key][str(_pick(record, "status") or "?")] += 1
    statuses = sorted({s for counter in groups.values() for s in counter})
    rows = [
        [code(b), code(e), *(str(counter.get(s, 0)) for s in statuses)]
        for (b, e), counter in sorted(groups.items())
    ]
    out.append("## Summary by backend and reference engine\n\n")
    out.append(table(["backend", "reference", *(esc(s) for s in statuses)], rows) + "\n\n")

    per_model: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for record in records:
        key = (str(_pick(record, "backend") or "?"), str(_pick(record, "model") or "?"))
        per_model[key][str(_pick(record, "status") or "?")] += 1
    rows = [
        [code(b), code(m), *(str(counter.get(s, 0)) for s in statuses)]
        for (b, m), counter in sorted(per_model.items())
    ]
    out.append("## By family or model\n\n")
    out.append(table(["backend", "family or model", *(esc(s) for s in statuses)], rows) + "\n\n")

    failures = [r for r in records if _is_pass(_pick(r, "status")) is False]
    out.append(f"## Failures ({len(failures)})\n\n")
    if failures:
        out.append(_record_table(failures) + "\n\n")
    else:
        out.append("<p>None: every compared point is within tolerance.</p>\n\n")
    return "".join(out)


def _verdict(totals: Mapping[str, Any]) -> str:
    """One line: failures first, then every status's count, as the compact summary totals them."""
    n = sum(int(v) for v in totals.values())
    fails = int(totals.get("fail", 0))
    rest = ", ".join(f"{int(v)} {str(k).replace('_', ' ')}" for k, v in totals.items())
    head = "No comparison failed" if not fails else f"{fails} comparisons failed"
    return f"{head}: {n} comparisons ({rest or 'none'})."


def _compact_sections(data: Mapping[str, Any], records: list[Mapping[str, Any]]) -> tuple[str, str]:
    """A compact (format 2) summary: the page's opening (the verdict, then the matrix: passes /
    comparisons per family or model, one table per backend, engines as columns), and the
    failures section."""
    cells = [c for c in data["cells"] if isinstance(c, Mapping)]
    totals = data.get("totals") if isinstance(data.get("totals"), Mapping) else {}
    out = [f"<p><strong>{esc(_verdict(totals))}</strong></p>\n\n"]
    out.append("## Matrix\n\n")
    out.append(
        f"<p>Passes / comparisons per family or model, from {code(SUMMARY)}; ✗ counts "
        "failures.</p>\n\n"
    )
    backends = sorted({str(c.get("backend")) for c in cells}, key=lambda b: (b != "eager", b))
    for backend in backends:
        mine = [c for c in cells if str(c.get("backend")) == backend]
        engines = sorted({str(c.get("engine")) for c in mine}, key=lambda e: (e != "hf", e))
        grid = {(str(c.get("model")), str(c.get("engine"))): c.get("counts") or {} for c in mine}
        rows = []
        for model in sorted({str(c.get("model")) for c in mine}):
            row = [code(model)]
            for engine in engines:
                counts = grid.get((model, engine), {})
                text = f"{int(counts.get('pass', 0))}/{sum(int(v) for v in counts.values())}"
                fails = int(counts.get("fail", 0))
                row.append(esc(f"{text} ✗{fails}" if fails else text))
            rows.append(row)
        out.append(f"### {esc(backend)}\n\n")
        out.append(table(["family or model", *(code(e) for e in engines)], rows) + "\n\n")
    opening = "".join(out)
    out = []
    failures = [r for r in records if _is_pass(_pick(r, "status")) is False]
    out.append(f"## Failures ({len(failures)})\n\n")
    if failures:
        reasons = data.get("reasons") if isinstance(data.get("reasons"), list) else []
        rows = []
        for r in failures[:_MAX_ROWS]:
            reason = r.get("reason")
            if isinstance(reason, int) and 0 <= reason < len(reasons):
                reason = reasons[reason]
            where = ", ".join(str(a) for a in r.get("addresses", []) or [r.get("point")])
            metrics = [_fmt(r.get(k)) for k in ("rel_error", "cosine", "max_abs")]
            rows.append([code(r.get("backend")), code(r.get("engine")), code(r.get("model"))])
            rows[-1] += [code(where), *metrics, _fmt(reason)]
        head = ["backend", "engine", "model", "address", "rel_error", "cosine", "max_abs", "reason"]
        out.append(table(head, rows) + "\n\n")
    else:
        out.append("<p>None: every compared point is within tolerance.</p>\n\n")
    return opening, "".join(out)


def _record_table(records: list[Mapping[str, Any]]) -> str:
    columns = ["backend", "engine", "model", "point", "layer", "status", "cosine"]
    columns += ["rel_error", "max_abs"]
    rows = [[_fmt(_pick(r, c)) for c in columns] for r in records[:_MAX_ROWS]]
    text = table([esc(c) for c in columns], rows)
    if len(records) > _MAX_ROWS:
        text += f"<p>First {_MAX_ROWS} of {len(records)} shown.</p>"
    return text


def render_json(data: Any) -> str:
    """A readable HTML rendering of any JSON value: tables for lists of flat records, key/value
    tables for mappings, text otherwise."""
    if isinstance(data, list) and data and all(isinstance(r, Mapping) for r in data):
        keys: list[str] = []
        for record in data:
            keys.extend(k for k in record if k not in keys)
        rows = [[_cell(r.get(k)) for k in keys] for r in data[:_MAX_ROWS]]
        text = table([esc(k) for k in keys], rows)
        if len(data) > _MAX_ROWS:
            text += f"<p>First {_MAX_ROWS} of {len(data)} rows shown.</p>"
        return text
    if isinstance(data, Mapping):
        rows = [[code(k), _cell(v)] for k, v in data.items()]
        return table(["key", "value"], rows, cls="interp-table interp-kv")
    return f"<p>{_cell(data)}</p>"


def _cell(value: Any) -> str:
    if isinstance(value, Mapping | list):
        if isinstance(value, list) and all(not isinstance(v, Mapping | list) for v in value):
            return esc(", ".join(_plain(v) for v in value))
        return render_json(value)
    return _fmt(value)


def _plain(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _load(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def validation_page(root: Path) -> str:
    out = [_front("Validation results"), "# Validation results\n\n"]
    intro = len(out)  # a compact summary's verdict and matrix go before the introduction
    out.append(
        "<p>How each backend's captures compare with the reference engines (HF transformers "
        "hooks, TransformerLens, nnsight, nnterp) point by point, as committed by the validator "
        f"in <code>{RESULTS_DIR}/</code>. The guide "
        '<a href="../../guides/validator/">Validator</a> explains the metrics and how to read '
        "a failure. This page is rebuilt from the committed files on every build.</p>\n\n"
    )
    path = root / SUMMARY
    if path.is_file():
        loaded, _ = _load(path)
        out.append(_versions_note(loaded))
    if not path.is_file():
        out.append(
            '<div class="admonition note"><p class="admonition-title">No results committed '
            f"yet</p><p>The validator has not committed <code>{SUMMARY}</code>. When it does, "
            "this page lists every comparison it made, grouped by backend, reference engine "
            "and family, with any failure and its metrics.</p></div>\n"
        )
    else:
        data, error = _load(path)
        records = summary_records(data) if error is None else None
        if error is not None:
            out.append(f"<p>{code(SUMMARY)} could not be read: {esc(error)}</p>\n")
        elif records is None:
            out.append(
                f"<p>{code(SUMMARY)} is not a list of records; shown as stored:</p>\n\n"
                + render_json(data)
                + "\n"
            )
        elif isinstance(data, Mapping) and isinstance(data.get("cells"), list):
            opening, failures = _compact_sections(data, records)
            out.insert(intro, opening)
            out.append(failures)
        else:
            out.append(f"<p>{len(records)} comparisons in {code(SUMMARY)}.</p>\n\n")
            out.append(_summary_tables(records))
    if (root / PLOT).is_file():
        out.append("## Relative error by layer\n\n")
        out.append(
            f"![Worst relative error per model and layer, by backend and engine]"
            f"({PLOT_SRC.rsplit('/', 1)[-1]})\n\n"
        )
    out.append(_report_sections(root))
    others = sorted(
        p
        for p in (root / RESULTS_DIR).glob("*.json")
        if p.name != "summary.json" and not p.name.startswith("bench")
    )
    if others:
        out.append("## Other result files\n\n")
        out.append(
            "<ul>"
            + "".join(f"<li>{code(p.relative_to(root).as_posix())}</li>" for p in others)
            + "</ul>\n"
        )
    return "".join(out)


def _transformers_versions(runs: Any) -> dict[str, str]:
    """name -> the transformers version a backend or engine ran with, as the summary records."""
    if not isinstance(runs, Mapping):
        return {}
    found = {}
    for name, info in runs.items():
        versions = info.get("versions") if isinstance(info, Mapping) else None
        if isinstance(versions, Mapping) and "transformers" in versions:
            found[str(name)] = str(versions["transformers"])
    return found


def _versions_note(data: Any) -> str:
    """Why the reference engines may run another transformers than the backends, with the
    versions the committed summary records (nothing when they agree or are not recorded)."""
    if not isinstance(data, Mapping):
        return ""
    subjects = _transformers_versions(data.get("backends"))
    engines = _transformers_versions(data.get("engines"))
    ours = sorted(set(subjects.values()))
    theirs = sorted({v for name, v in engines.items() if v not in ours})
    if not ours or not theirs:
        return ""
    in_process = sorted(name for name, v in engines.items() if v in ours)
    same = (
        f" The {', '.join(code(n) for n in in_process)} engine runs in the backends' own "
        "process, on their version, so it checks the very modelling code the backends run."
        if in_process
        else ""
    )
    return (
        "## Why two transformers versions\n\n"
        f"<p>The backends ran on transformers {esc(', '.join(ours))}: the environment a user "
        "installs, where vLLM's wheel caps the transformers release it accepts. The reference "
        "engines run in their own pinned environments (built by "
        "<code>interp-validate --setup</code>), on transformers "
        f"{esc(', '.join(theirs))}, the release their TransformerLens, nnsight and nnterp "
        f"versions were pinned and verified together on.{same} Agreement with the other "
        "engines as well shows that these families compute the same numbers on both "
        "releases.</p>\n\n"
    )


def _report_sections(root: Path) -> str:
    """The committed report from its setup section on (versions, tolerances, per-family tables);
    its title, summary and plot are already on the page."""
    path = root / REPORT
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    start = text.find(_REPORT_FROM)
    if start < 0:
        return f"<p>{code(REPORT)} has no {esc(_REPORT_FROM)} section; see the file itself.</p>\n"
    body = "\n".join(
        line for line in text[start:].splitlines() if not line.startswith("![")
    )  # the report's own image link points next to the report, not into the site
    return f"<p>From {code(REPORT)}:</p>\n\n{body}\n"


def validation_assets(root: Path) -> dict[str, Path]:
    """Binary files the validation page shows, keyed by their path relative to docs/."""
    plot = root / PLOT
    return {PLOT_SRC: plot} if plot.is_file() else {}


def find_benchmark_files(root: Path) -> list[Path]:
    found: set[Path] = set()
    for pattern in BENCH_GLOBS:
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def benchmarks_page(root: Path) -> str:
    out = [_front("Benchmarks"), "# Benchmarks\n\n"]
    out.append(
        "<p>Speed measured by <code>interp-bench</code> as ratios taken side by side on one "
        "machine (capture against a plain forward pass, our backends against the reference "
        "engines and vanilla vLLM), as committed by the validator package. Absolute numbers "
        "depend on the machine; the ratios are what carries over.</p>\n\n"
    )
    files = find_benchmark_files(root)
    if not files:
        patterns = ", ".join(code(g) for g in BENCH_GLOBS)
        out.append(
            '<div class="admonition note"><p class="admonition-title">No benchmark results '
            f"committed yet</p><p>None of {patterns} exists. When the benchmark JSON lands, "
            "this page shows it.</p></div>\n"
        )
        return "".join(out)
    out.append(_workload_legend())
    for path in files:
        rel_path = path.relative_to(root).as_posix()
        data, error = _load(path)
        suite = "GPU suite" if "gpu" in path.name.lower() else "CPU suite"
        out.append(f"## {suite}\n\n<p>From {code(rel_path)}.</p>\n\n")
        if error is not None:
            out.append(f"<p>Could not be read: {esc(error)}</p>\n\n")
            continue
        rows = data.get("rows") if isinstance(data, Mapping) else None
        if isinstance(rows, list) and rows and all(isinstance(r, Mapping) for r in rows):
            out.append(_bench_tables(data.get("meta"), rows))
            errors = data.get("errors")
            if isinstance(errors, Mapping) and errors:
                items = "".join(
                    f"<li>{code(str(k))}: {esc((str(v).strip() or 'failed').splitlines()[0])}</li>"
                    for k, v in sorted(errors.items())
                )
                out.append(f"<p>Not measured:</p><ul>{items}</ul>\n\n")
        else:
            out.append(render_json(_unwrap(data)) + "\n\n")
    return "".join(out)


def _workload_legend() -> str:
    """What P1-P4 and L measure, in the words `interp-bench --help` uses."""
    from interp_validator.bench.workloads import WORKLOAD_SUMMARIES, WORKLOADS

    items = "".join(
        f"<li><strong>{esc(name)}</strong>: {esc(WORKLOAD_SUMMARIES[name])}</li>"
        for name in WORKLOADS
    )
    return (
        f"<p>The workloads:</p><ul>{items}</ul>\n\n<p>A <em>ratio</em> is the variant's "
        "time over its baseline's (1.10× = 10% slower), or its throughput over the "
        "baseline's for tokens per second. Times are medians, in milliseconds.</p>\n\n"
    )


def _bench_value(row: Mapping[str, Any]) -> str:
    value, unit = row.get("value"), row.get("unit")
    if not isinstance(value, int | float):
        return ""
    if unit == "s":
        return f"{value * 1000:.1f} ms"  # the README and `interp-bench` print milliseconds
    return f"{value:,.0f} {esc(str(unit or ''))}".strip()


def _bench_tables(meta: Any, rows: list[Mapping[str, Any]]) -> str:
    out = []
    if isinstance(meta, Mapping):
        facts = [
            f"{label}: {esc(str(meta[key]))}"
            for key, label in (("model", "model"), ("machine", "machine"))
            if key in meta
        ]
        if "repeats" in meta:
            facts.append(
                f"medians of {esc(str(meta['repeats']))} runs after "
                f"{esc(str(meta.get('warmup', 0)))} warm-up runs"
            )
        if facts:
            out.append(f"<p>{'; '.join(facts)}.</p>\n\n")
    by_workload: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_workload[str(row.get("workload", "?"))].append(row)
    for workload, group in by_workload.items():
        out.append(f"### {esc(workload)}\n\n")
        body = [
            [
                esc(str(r.get("subject", ""))),
                esc(str(r.get("variant", "")))
                + (f" ({esc(str(r['note']))})" if r.get("note") else ""),
                _bench_value(r),
                esc(str(r.get("baseline", ""))),
                _bench_ratio(r),
            ]
            for r in group
        ]
        out.append(table(["subject", "variant", "value", "baseline", "ratio"], body) + "\n\n")
    return "".join(out)


def _bench_ratio(row: Mapping[str, Any]) -> str:
    """The ratio, and the goal it is judged by where the benchmark set one (met or missed)."""
    ratio, goal = row.get("ratio"), row.get("goal")
    if not isinstance(ratio, int | float):
        return ""
    text = f"{ratio:.3f}×"
    if isinstance(goal, int | float):
        text += f" (goal ≥ {goal:g}×: {'met' if ratio >= goal else 'missed'})"
    return text


def _unwrap(data: Any) -> Any:
    """Benchmark files often hold their rows under one key; show the rows as the table."""
    records = summary_records(data)
    return records if records is not None else data
