"""What one comparison leaves behind, how a sweep's records are stored, and what counts as worse.

A `Record` is one (subject backend, reference engine, family or model, point, layer[, stream])
with its status, the three metrics when the tensors were compared, and the reason when the
status is not a pass. `summary.json` holds every record of a sweep (plus the tolerances and the
prompt), sorted so that two sweeps of the same code give the same file. This module needs no
tensor library: the report, the docs build and the regression check read records only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from interp_core.address import Address
from interp_core.points import point_names

__all__ = [
    "SUMMARY_FORMAT",
    "Record",
    "Status",
    "load_summary",
    "regressions",
    "sort_records",
    "summary_document",
]

SUMMARY_FORMAT = 1


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
    """The `summary.json` object: format, the given context (prompt, tolerances), the records."""
    return {
        "format": SUMMARY_FORMAT,
        **context,
        "records": [r.to_json() for r in sort_records(records)],
    }


def load_summary(path: str | Path) -> list[Record]:
    """The records of a `summary.json` written by `summary_document`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, Mapping) or data.get("format") != SUMMARY_FORMAT:
        message = (
            f"{path} is not a format-{SUMMARY_FORMAT} validator summary; regenerate it with "
            "interp-validate"
        )
        raise ValueError(message)
    return [Record.from_json(r) for r in data["records"]]


def regressions(
    committed: Sequence[Record],
    fresh: Sequence[Record],
    *,
    pairs: Iterable[tuple[str, str]] | None = None,
) -> list[str]:
    """Every comparison whose status got worse from `committed` to `fresh`, as sentences.

    Worse means a lower rank: pass > (not expressible, refused, unsupported) > fail. A committed
    pass that the fresh sweep no longer makes at all is worse too. `pairs` limits the check to
    those (backend, engine) pairs, e.g. the ones the fresh sweep ran.
    """
    scope = set(pairs) if pairs is not None else None
    latest = {r.key: r for r in fresh}
    found = []
    for old in committed:
        if scope is not None and (old.backend, old.engine) not in scope:
            continue
        where = f"{old.backend} vs {old.engine} on {old.model} at {old.address}"
        new = latest.get(old.key)
        if new is None:
            if old.status is Status.PASS:
                found.append(f"{where}: was pass, is no longer compared")
            continue
        if _RANK[new.status] < _RANK[old.status]:
            why = f" ({new.reason})" if new.reason else ""
            found.append(f"{where}: was {old.status.value}, is now {new.status.value}{why}")
    return found
