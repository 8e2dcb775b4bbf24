"""Are statuses assigned, stored, compared and rendered as the report promises?

No model runs here: a hand-made plan, capture and reading go through `sweep.score`, and a
hand-made `SweepResult` through the writers. The rendering checks are snapshot-like: they pin
the lines a reader relies on (the summary row, a table row per address, numbered reasons), not
the whole file.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from interp_core.address import Address
from interp_validator.plan import Target
from interp_validator.records import (
    Compact,
    Record,
    Status,
    compact_document,
    compact_from_document,
    document_of_compact,
    load_baseline,
    load_summary,
    merge_compacts,
    regressions,
    sort_records,
)
from interp_validator.references import Reading
from interp_validator.report import PLOT_NAME, render_compact_report, render_report, write_results
from interp_validator.scoring import tolerance_for
from interp_validator.subjects import Capture
from interp_validator.sweep import SweepResult, TargetPlan, score

ADDRESSES = [
    Address("embeddings"),
    Address("resid_post", 0),
    Address("resid_post", 1),
    Address("z", 1),
    Address("attn_out", 1),
    Address("mlp_out", 1),
]


def _plan() -> TargetPlan:
    return TargetPlan(
        target=Target("llama", Path("/nowhere/llama"), "family"),
        architecture="LlamaForCausalLM",
        n_layers=2,
        layers=(0, 1),
        tokens=(0, 5, 6),
        addresses=list(ADDRESSES),
    )


def _reading(engine: str, **fields: object) -> Reading:
    defaults: dict[str, object] = {
        "tensors": {},
        "conventions": {},
        "not_expressible": {},
        "unsupported": None,
        "versions": {},
        "seconds": 0.0,
    }
    return Reading(engine=engine, key="llama", **{**defaults, **fields})


def _tensor(seed: int) -> torch.Tensor:
    return torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(seed))


def _scored() -> list[Record]:
    capture = Capture("eager", "llama")
    for i, address in enumerate(ADDRESSES):
        capture.tensors[str(address)] = _tensor(i)
    capture.tensors["mlp_out.1"] = _tensor(5) * 2  # a scale error
    capture.refused["attn_out.1"] = "attn_out is not served here. Use backend='eager'"
    reading = _reading(
        "nnterp",
        tensors={str(a): _tensor(i) for i, a in enumerate(ADDRESSES) if a.name != "z"},
        not_expressible={"z.1": "nnterp standardizes no z"},
    )
    tolerance = tolerance_for("float32", "eager", "nnterp")
    return score(_plan(), capture, reading, backend="eager", engine="nnterp", tolerance=tolerance)


def test_score_assigns_every_status_and_not_expressible_is_never_a_pass() -> None:
    records = {r.address: r for r in _scored()}
    assert records["resid_post.0"].status is Status.PASS
    assert records["z.1"].status is Status.NOT_EXPRESSIBLE
    assert records["z.1"].reason == "nnterp standardizes no z"
    assert records["attn_out.1"].status is Status.REFUSED
    assert "not served" in (records["attn_out.1"].reason or "")
    assert records["mlp_out.1"].status is Status.FAIL
    assert records["mlp_out.1"].cosine is not None and records["mlp_out.1"].cosine > 0.9999
    passes = [r for r in records.values() if r.status is Status.PASS]
    assert {r.address for r in passes} == {"embeddings", "resid_post.0", "resid_post.1"}


def test_a_missing_reading_or_a_crashed_engine_is_unsupported_not_pass() -> None:
    capture = Capture("eager", "llama", tensors={str(a): _tensor(0) for a in ADDRESSES})
    tolerance = tolerance_for("float32", "eager", "hf")
    none = score(_plan(), capture, None, backend="eager", engine="hf", tolerance=tolerance)
    crashed = score(
        _plan(),
        capture,
        None,
        backend="eager",
        engine="hf",
        tolerance=tolerance,
        engine_error="RuntimeError: boom",
    )
    assert {r.status for r in none} == {Status.UNSUPPORTED}
    assert {r.status for r in crashed} == {Status.UNSUPPORTED}
    assert "boom" in (crashed[0].reason or "")


def test_a_silent_reference_is_a_failure() -> None:
    capture = Capture("eager", "llama", tensors={str(a): _tensor(0) for a in ADDRESSES})
    reading = _reading("nnsight")  # neither tensors nor reasons
    tolerance = tolerance_for("float32", "eager", "nnsight")
    records = score(
        _plan(), capture, reading, backend="eager", engine="nnsight", tolerance=tolerance
    )
    assert {r.status for r in records} == {Status.FAIL}
    assert "neither a tensor nor a reason" in (records[0].reason or "")


def test_records_round_trip_through_json_and_sort_in_registry_order() -> None:
    records = _scored()
    again = [Record.from_json(json.loads(json.dumps(r.to_json()))) for r in records]
    assert [r.key for r in again] == [r.key for r in records]
    assert [r.status for r in again] == [r.status for r in records]
    order = [r.address for r in sort_records(reversed(records))]
    # Registry order (the residual stream's resid_post comes after the MLP), then layer.
    assert order == ["embeddings", "z.1", "attn_out.1", "mlp_out.1", "resid_post.0", "resid_post.1"]


def _with(record: Record, status: Status) -> Record:
    return Record(**{**vars(record), "status": status})


def test_regressions_are_decided_from_the_compact_summary() -> None:
    old = _scored()
    committed = compact_from_document(json.loads(json.dumps(compact_document(old))))
    assert regressions(committed, old) == []
    by_address = {r.address: r for r in old}
    # Better, and sideways between the not-compared statuses, is fine.
    sideways = dict(by_address)
    sideways["mlp_out.1"] = _with(by_address["mlp_out.1"], Status.PASS)
    sideways["attn_out.1"] = _with(by_address["attn_out.1"], Status.UNSUPPORTED)
    assert regressions(committed, list(sideways.values())) == []
    # A pass that became a fail: the cell lost a pass, and a new non-pass record appeared.
    failed = {**by_address, "resid_post.0": _with(by_address["resid_post.0"], Status.FAIL)}
    found = regressions(committed, list(failed.values()))
    assert len(found) == 2
    assert found[0] == "eager vs nnterp on llama: 2 passes, was 3"
    assert found[1].startswith("eager vs nnterp on llama at resid_post.0: newly fail")
    # A non-pass that got worse (not expressible -> fail) with the pass count unchanged.
    worse = {**by_address, "z.1": _with(by_address["z.1"], Status.FAIL)}
    found = regressions(committed, list(worse.values()))
    assert len(found) == 1 and "z.1: was not_expressible, is now fail" in found[0]
    # A pass the fresh sweep no longer makes at all lowers the cell's pass count.
    gone = [r for r in old if r.address != "embeddings"]
    assert regressions(committed, gone) == ["eager vs nnterp on llama: 2 passes, was 3"]
    # A new non-pass record at an address the baseline never had.
    extra = Record("eager", "nnterp", "llama", "resid_pre", 1, None, Status.UNSUPPORTED, reason="x")
    found = regressions(committed, [*old, extra])
    assert found == ["eager vs nnterp on llama at resid_pre.1: newly unsupported (x)"]
    # Out of scope pairs are not checked.
    assert regressions(committed, gone, pairs={("vllm", "hf")}) == []
    assert regressions(committed, gone, models={"gemma2"}) == []


def test_the_compact_summary_holds_every_non_pass_record_and_the_cell_counts() -> None:
    records = _scored()
    document = json.loads(json.dumps(compact_document(records, prompt="p")))
    assert document["format"] == 2 and document["prompt"] == "p"
    assert document["totals"] == {"pass": 3, "fail": 1, "not_expressible": 1, "refused": 1}
    (cell,) = document["cells"]
    assert cell["counts"] == {"pass": 3, "fail": 1, "not_expressible": 1, "refused": 1}
    fail = next(r for r in records if r.status is Status.FAIL)
    assert cell["worst"]["rel_error"] == fail.to_json()["rel_error"]
    again = compact_from_document(document)
    stored = [Record.from_json(r.to_json()) for r in sort_records(records)]  # metrics rounded
    assert again.non_pass == [r for r in stored if r.status is not Status.PASS]
    assert again == Compact.from_records(stored)
    # Passes are counted, never listed; a failure keeps its metrics.
    assert all(row["status"] != "pass" for row in document["records"])
    (row,) = [row for row in document["records"] if row["status"] == "fail"]
    assert row["addresses"] == ["mlp_out.1"] and row["cosine"] == fail.to_json()["cosine"]


def test_merging_a_sweep_replaces_its_models_and_keeps_the_rest() -> None:
    records = _scored()  # all on llama
    other = [Record(**{**vars(r), "model": "gemma2"}) for r in records]
    committed = json.loads(json.dumps(compact_document([*records, *other], prompt="p")))
    # Folding nothing in gives the committed document back, byte for byte.
    kept = merge_compacts(compact_from_document(committed), Compact({}, {}, []), [])
    assert document_of_compact(kept, prompt="p") == committed
    # A sweep of llama alone, now all passes, replaces llama's rows and keeps gemma2's.
    fixed = [_with(r, Status.PASS) for r in records]
    merged = merge_compacts(compact_from_document(committed), Compact.from_records(fixed), [])
    document = document_of_compact(merged, prompt="p")
    counts = {row["model"]: row["counts"] for row in document["cells"]}
    assert counts["llama"] == {"pass": 6}
    assert counts["gemma2"] == {"pass": 3, "fail": 1, "not_expressible": 1, "refused": 1}
    assert {row["model"] for row in document["records"]} == {"gemma2"}
    assert document["totals"] == {"pass": 9, "fail": 1, "not_expressible": 1, "refused": 1}
    # A sweep of another backend on llama leaves the eager rows alone.
    vllm = [Record(**{**vars(r), "backend": "vllm"}) for r in fixed]
    both = merge_compacts(compact_from_document(committed), Compact.from_records(vllm), [], [])
    assert both.counts[("eager", "nnterp", "llama")] == counts["gemma2"]
    assert both.counts[("vllm", "nnterp", "llama")] == {"pass": 6}
    # A model the sweep ran but recorded nothing for loses its committed rows too.
    dropped = merge_compacts(compact_from_document(committed), Compact({}, {}, []), ["gemma2"])
    assert {cell[2] for cell in dropped.counts} == {"llama"}


def _result(records: list[Record]) -> SweepResult:
    tolerance = tolerance_for("float32", "eager", "nnterp")
    return SweepResult(
        records=records,
        plans=[_plan()],
        backends={
            "eager": {"versions": {"torch": "2.13"}, "seconds": 1.0},
            "vllm": {"skipped": "no"},
        },
        engines={"nnterp": {"versions": {"nnterp": "1.3.0"}, "seconds": 4.2}},
        skipped_models={"SmolLM2-135M-Instruct": "the wheel is missing"},
        tolerances={"eager/nnterp": tolerance},
        seconds=12.0,
    )


def test_report_renders_a_table_per_family_with_engines_as_columns() -> None:
    text = render_report(_result(_scored()), command=["interp-validate", "--family", "llama"])
    assert text.startswith("# Validation report\n")
    assert "Written by `interp-validate --family llama` in 12 s." in text
    assert "| `eager` | `nnterp` | 3 | 1 | 1 | 1 | 0 |" in text
    assert "**1 comparisons failed.**" in text
    assert "### llama\n" in text
    assert "| address | `nnterp` |" in text
    assert "| `resid_post.0` | ✓ |" in text
    assert "| `z.1` | not expressible [" in text
    assert "Refused by `eager` (1): `attn_out.1`. attn_out is not served here." in text
    assert "| `attn_out.1` |" not in text  # a refusal is the backend's, listed once
    assert "| `mlp_out.1` | ✗ rel 1 cos 1 [" in text
    assert ". nnterp standardizes no z\n" in text
    assert "`SmolLM2-135M-Instruct`: the wheel is missing" in text
    assert "| `vllm` | skipped | no |" in text


def test_write_results_writes_the_compact_pair_the_plot_and_the_full_records(
    tmp_path: Path,
) -> None:
    result = _result(_scored())
    written = write_results(result, tmp_path, command=["interp-validate"])
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert names == {
        "summary.json",
        "report.md",
        PLOT_NAME,
        "full/summary.json",
        "full/report.md",
        "full/runs/eager--nnterp.json",
    }
    assert (tmp_path / PLOT_NAME).read_bytes().startswith(b"\x89PNG")
    assert f"![Relative error by layer]({PLOT_NAME})" in (tmp_path / "report.md").read_text()
    assert "### llama\n" in (tmp_path / "full" / "report.md").read_text()
    loaded = load_summary(tmp_path / "full" / "summary.json")
    assert [r.key for r in loaded] == [r.key for r in sort_records(result.records)]
    assert load_baseline(tmp_path / "summary.json") == Compact.from_records(loaded)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["format"] == 2
    assert summary["tolerances"]["eager/nnterp"] == result.tolerances["eager/nnterp"].to_json()
    run = json.loads((tmp_path / "full" / "runs" / "eager--nnterp.json").read_text())
    assert run["models"]["llama"]["counts"] == {
        "pass": 3,
        "refused": 1,
        "not_expressible": 1,
        "fail": 1,
    }
    # The committed pair carries no timings: rewriting it from the same records is identical.
    before = [(tmp_path / name).read_bytes() for name in ("summary.json", "report.md")]
    write_results(_result(_scored()), tmp_path)
    assert [(tmp_path / name).read_bytes() for name in ("summary.json", "report.md")] == before


def test_the_compact_report_opens_with_the_verdict_and_shows_the_matrix() -> None:
    document = compact_document(_scored(), prompt="p", dtype="float32")
    text = render_compact_report(document, command=["interp-validate"])
    lines = text.splitlines()
    assert lines[0] == "# Validation report"
    expected = (
        "**1 comparisons failed: 6 comparisons (3 pass, 1 fail, 1 not expressible, 1 refused).**"
    )
    assert lines[2] == expected
    assert "| `llama` | 3/6 ✗1 |" in text
    assert "| `eager` | `nnterp` | `llama` | `mlp_out.1` |" in text
    assert "- **refused** (1): attn_out is not served here. Use backend='eager'" in text
    clean = compact_document([r for r in _scored() if r.status is Status.PASS])
    assert render_compact_report(clean).splitlines()[2].startswith("**No comparison failed: 3 ")
