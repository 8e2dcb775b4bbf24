"""What one comparison leaves behind, how a sweep's records are stored, and what counts as worse.

A `Record` is one (subject backend, reference engine, family or model, point, layer[, stream])
with its status, the three metrics when the tensors were compared, and the reason when the
status is not a pass. A sweep is stored twice, sorted so that two sweeps of the same code give
the same files: `full/summary.json` (format 1, every record; a build artefact, git-ignored) and
the committed `summary.json` (format 2, `Compact`: per backend x engine x model cell the status
counts and worst metrics, plus every non-pass record), from which `regressions` decides whether
a fresh sweep is worse. This module needs no tensor library: the report, the docs build and the
regression check read records only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from interp_core.address import Address, to_address
from interp_core.points import point_names

__all__ = [
    "COMPACT_FORMAT",
    "SUMMARY_FORMAT",
    "Compact",
    "Record",
    "Status",
    "compact_document",
    "compact_from_document",
    "load_baseline",
    "load_summary",
    "regressions",
    "sort_records",
    "summary_document",
]

SUMMARY_FORMAT = 1  # every record: the build artefact
COMPACT_FORMAT = 2  # aggregates and every non-pass record: what is committed


class Status(StrEnum):
    """The outcome of one comparison."""

    PASS = "pass"  # both metrics within tolerance
    FAIL = "fail"  # out of tolerance, shapes differ, non-finite values, or the capture failed
    NOT_EXPRESSIBLE = "not_expressible"  # the reference engine has no name for this point
    REFUSED = "refused"  # the subject backend refuses the point (or the model), with its reason
    UNSUPPORTED = "unsupported"  # the reference engine cannot run the model, or read this point


# Higher is better. The three "not compared" statuses rank alike: none of them is a pass, and
# moving between them is neither progress nor a regression.
_RANK = {
    Status.PASS: 3,
    Status.NOT_EXPRESSIBLE: 2,
    Status.REFUSED: 2,
    Status.UNSUPPORTED: 2,
    Status.FAIL: 1,
}
_POINT_ORDER = {name: index for index, name in enumerate(point_names())}
_ALWAYS = ("backend", "engine", "model", "point", "layer", "status")  # kept even when None


def _round(value: float | None) -> float | None:
    """Four significant digits; None for a missing or non-finite value (JSON has no inf)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.4g}")


@dataclass(frozen=True)
class Record:
    """One comparison. `model` is a family name or a model folder's name."""

    backend: str
    engine: str
    model: str
    point: str
    layer: int | None
    stream: int | None
    status: Status
    max_abs: float | None = None
    rel_error: float | None = None
    cosine: float | None = None
    reason: str | None = None

    @property
    def address(self) -> str:
        """The canonical address string (`resid_post.3`, `resid_pre.1.stream-2`, `lm_head`)."""
        return str(Address(self.point, self.layer, self.stream))

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.backend, self.engine, self.model, self.address)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON; fields that are None (no stream, no metrics, no reason) are left
        out, which keeps a summary of tens of thousands of records small."""
        data = asdict(self)
        data["status"] = self.status.value
        for name in ("max_abs", "rel_error", "cosine"):
            data[name] = _round(data[name])
        return {k: v for k, v in data.items() if v is not None or k in _ALWAYS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        try:
            status = Status(data["status"])
        except ValueError:
            known = ", ".join(s.value for s in Status)
            message = f"record status {data['status']!r} is not one of {known}"
            raise ValueError(message) from None
        return cls(
            backend=str(data["backend"]),
            engine=str(data["engine"]),
            model=str(data["model"]),
            point=str(data["point"]),
            layer=data.get("layer"),
            stream=data.get("stream"),
            status=status,
            max_abs=data.get("max_abs"),
            rel_error=data.get("rel_error"),
            cosine=data.get("cosine"),
            reason=data.get("reason"),
        )


def _order(record: Record) -> tuple[Any, ...]:
    return (
        record.model,
        record.backend,
        record.engine,
        _POINT_ORDER.get(record.point, len(_POINT_ORDER)),
        -1 if record.layer is None else record.layer,
        -1 if record.stream is None else record.stream,
    )


def sort_records(records: Iterable[Record]) -> list[Record]:
    """Model, backend, engine, then registry order of points, layer and stream."""
    return sorted(records, key=_order)


def summary_document(records: Iterable[Record], **context: Any) -> dict[str, Any]:
    """The full summary (the build artefact `full/summary.json`): format, the given context
    (prompt, tolerances), every record."""
    return {
        "format": SUMMARY_FORMAT,
        **context,
        "records": [r.to_json() for r in sort_records(records)],
    }


CellKey = tuple[str, str, str]  # (backend, engine, model)
_GROUP_FIELDS = ("backend", "engine", "model", "status", "reason")


def _worse_of(old: float | None, new: float | None, pick: Any) -> float | None:
    return new if old is None else old if new is None else pick(old, new)


@dataclass
class Compact:
    """A sweep as committed: per (backend, engine, model) cell the status counts and the worst
    metrics, plus every record that is not a pass (with its reason, and metrics for a fail)."""

    counts: dict[CellKey, dict[str, int]]
    worst: dict[CellKey, dict[str, float | None]]
    non_pass: list[Record]

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> Compact:
        counts: dict[CellKey, dict[str, int]] = {}
        worst: dict[CellKey, dict[str, float | None]] = {}
        non_pass = []
        for r in sort_records(records):
            cell = (r.backend, r.engine, r.model)
            tally = counts.setdefault(cell, {})
            tally[r.status.value] = tally.get(r.status.value, 0) + 1
            if r.status is not Status.PASS:
                non_pass.append(r)
            w = worst.setdefault(cell, {"rel_error": None, "cosine": None, "max_abs": None})
            w["rel_error"] = _worse_of(w["rel_error"], _round(r.rel_error), max)
            w["max_abs"] = _worse_of(w["max_abs"], _round(r.max_abs), max)
            w["cosine"] = _worse_of(w["cosine"], _round(r.cosine), min)
        return cls(counts, worst, non_pass)

    def passes(self, cell: CellKey) -> int:
        return self.counts.get(cell, {}).get(Status.PASS.value, 0)

    def totals(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for tally in self.counts.values():
            for status, n in tally.items():
                total[status] = total.get(status, 0) + n
        return {s.value: total[s.value] for s in Status if s.value in total}


def compact_document(records: Iterable[Record], **context: Any) -> dict[str, Any]:
    """The committed `summary.json`: format 2, the context, totals, one row per cell (counts and
    worst metrics), and every non-pass record with its reason as an index into `reasons`."""
    return document_of_compact(Compact.from_records(records), **context)


def merge_compacts(
    base: Compact,
    update: Compact,
    models: Iterable[str],
    backends: Iterable[str] | None = None,
) -> Compact:
    """`base` with every cell of `models` (and of `backends`, all when None) replaced by
    `update`'s: a sweep of a few families folded into the committed summary of all of them
    (`interp-validate --merge`)."""
    rerun = set(models) | {model for _, _, model in update.counts}
    swept = None if backends is None else set(backends) | {b for b, _, _ in update.counts}

    def replaced(backend: str, model: str) -> bool:
        return model in rerun and (swept is None or backend in swept)

    kept = {cell: tally for cell, tally in base.counts.items() if not replaced(cell[0], cell[2])}
    worst = {cell: base.worst[cell] for cell in kept}
    counts = {**kept, **update.counts}
    worst.update(update.worst)
    non_pass = [r for r in base.non_pass if not replaced(r.backend, r.model)]
    return Compact(counts, worst, sort_records([*non_pass, *update.non_pass]))


def document_of_compact(compact: Compact, **context: Any) -> dict[str, Any]:
    """The committed `summary.json` of a `Compact` (see `compact_document`)."""
    reasons = sorted({r.reason or "" for r in compact.non_pass})
    index = {text: i for i, text in enumerate(reasons)}
    cells = []
    for cell in sorted(compact.counts):
        backend, engine, model = cell
        tally = compact.counts[cell]
        row: dict[str, Any] = {"backend": backend, "engine": engine, "model": model}
        row["counts"] = {s.value: tally[s.value] for s in Status if s.value in tally}
        row["worst"] = {k: v for k, v in compact.worst[cell].items() if v is not None}
        cells.append(row)
    # A failure keeps its metrics, one row each; the other non-passes are grouped by cell,
    # status and reason, with their addresses listed (thousands of refusals share a reason).
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str, str, str, int], list[str]] = {}
    for r in compact.non_pass:
        if r.status is Status.FAIL:
            data = {k: v for k, v in r.to_json().items() if k not in ("point", "layer", "stream")}
            rows.append({**data, "reason": index[r.reason or ""], "addresses": [r.address]})
            continue
        group = (r.backend, r.engine, r.model, r.status.value, index[r.reason or ""])
        if group not in groups:
            groups[group] = []
            rows.append(dict(zip(_GROUP_FIELDS, group, strict=True)))
            rows[-1]["addresses"] = groups[group]
        groups[group].append(r.address)
    return {
        "format": COMPACT_FORMAT,
        **context,
        "totals": compact.totals(),
        "cells": cells,
        "reasons": reasons,
        "records": rows,
    }


def compact_from_document(data: Mapping[str, Any]) -> Compact:
    """The `Compact` of a committed (format 2) summary object."""
    reasons = data["reasons"]
    non_pass = []
    for row in data["records"]:
        reason = reasons[row["reason"]] if isinstance(row.get("reason"), int) else row.get("reason")
        for text in row["addresses"]:
            address = to_address(text)
            place = {"point": address.name, "layer": address.layer, "stream": address.stream}
            non_pass.append(Record.from_json({**row, **place, "reason": reason or None}))
    counts: dict[CellKey, dict[str, int]] = {}
    worst: dict[CellKey, dict[str, float | None]] = {}
    for row in data["cells"]:
        cell = (str(row["backend"]), str(row["engine"]), str(row["model"]))
        counts[cell] = {str(k): int(v) for k, v in row["counts"].items()}
        worst[cell] = {k: row.get("worst", {}).get(k) for k in ("rel_error", "cosine", "max_abs")}
    return Compact(counts, worst, sort_records(non_pass))


def _read(path: str | Path) -> Mapping[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, Mapping) or data.get("format") not in (SUMMARY_FORMAT, COMPACT_FORMAT):
        message = (
            f"{path} is not a validator summary (format {SUMMARY_FORMAT}, every record, or "
            f"{COMPACT_FORMAT}, the committed compact form); regenerate it with interp-validate"
        )
        raise ValueError(message)
    return data


def load_summary(path: str | Path) -> list[Record]:
    """Every record of a full `summary.json` (format 1, written by `summary_document`)."""
    data = _read(path)
    if data["format"] != SUMMARY_FORMAT:
        message = (
            f"{path} is the compact summary, which keeps only the non-pass records; read it "
            f"with load_baseline, or read the full records from the sweep's full/summary.json"
        )
        raise ValueError(message)
    return [Record.from_json(r) for r in data["records"]]


def load_baseline(path: str | Path) -> Compact:
    """The `Compact` of a summary of either format: what `regressions` compares with."""
    data = _read(path)
    if data["format"] == COMPACT_FORMAT:
        return compact_from_document(data)
    return Compact.from_records(Record.from_json(r) for r in data["records"])


def regressions(
    committed: Compact,
    fresh: Sequence[Record],
    *,
    pairs: Iterable[tuple[str, str]] | None = None,
    models: Iterable[str] | None = None,
) -> list[str]:
    """What got worse from the `committed` summary to the `fresh` records, as sentences.

    Decidable from the compact form: a (backend, engine, model) cell whose pass count dropped
    (a cell the fresh sweep no longer makes counts as 0 passes), and any fresh non-pass record
    that the committed summary did not hold as a non-pass of the same or a lower rank (pass >
    not expressible = refused = unsupported > fail; moving between the three "not compared"
    statuses is neither progress nor a regression). `pairs` limits the check to those
    (backend, engine) pairs and `models` to those families or models, e.g. the ones the fresh
    sweep ran or was asked for.
    """
    scope = set(pairs) if pairs is not None else None
    wanted = set(models) if models is not None else None

    def within(backend: str, engine: str, model: str) -> bool:
        in_pairs = scope is None or (backend, engine) in scope
        return in_pairs and (wanted is None or model in wanted)

    now = Compact.from_records(fresh)
    found = []
    for cell in sorted(committed.counts):
        backend, engine, model = cell
        was, is_ = committed.passes(cell), now.passes(cell)
        if within(backend, engine, model) and is_ < was:
            found.append(f"{backend} vs {engine} on {model}: {is_} passes, was {was}")
    before = {r.key: r for r in committed.non_pass}
    for new in now.non_pass:
        if not within(new.backend, new.engine, new.model):
            continue
        old = before.get(new.key)
        if old is not None and _RANK[new.status] >= _RANK[old.status]:
            continue
        where = f"{new.backend} vs {new.engine} on {new.model} at {new.address}"
        why = f" ({new.reason})" if new.reason else ""
        if old is None:
            found.append(f"{where}: newly {new.status.value}{why}")
        else:
            found.append(f"{where}: was {old.status.value}, is now {new.status.value}{why}")
    return found
