"""The benchmark's result documents (a run of some workloads merged beside the committed others)
and the workloads other packages plug in."""

from __future__ import annotations

import json
from dataclasses import asdict

from interp_validator.bench.plugins import run_plugin_workload
from interp_validator.bench.results import BenchResult, Row


def _row(workload: str, variant: str, ratio: float) -> Row:
    return Row(workload, "vllm (ours)", variant, 100.0, "tok/s", "base", ratio)


def test_a_merged_run_replaces_only_its_own_workloads() -> None:
    previous = {
        "meta": {"model": "committed model", "repeats": 10},
        "rows": [asdict(_row("P1", "a", 1.02)), asdict(_row("F", "old", 0.9))],
        "errors": {"S smollm2": "absent", "F": "old failure", "tl_bridge": "env"},
    }
    run = BenchResult(
        [_row("F", "new", 1.6)], {"model": "committed model", "f_only": True}, {"F x": "new"}
    )
    merged = run.merged_into(json.loads(json.dumps(previous)), {"F"})
    assert [(r.workload, r.variant, r.ratio) for r in merged.rows] == [
        ("P1", "a", 1.02),
        ("F", "new", 1.6),
    ]
    assert merged.errors == {"S smollm2": "absent", "tl_bridge": "env", "F x": "new"}
    assert merged.meta == {"model": "committed model", "repeats": 10, "f_only": True}
    assert "| F | vllm (ours) | new |" in merged.markdown()


def test_an_absent_plugin_workload_is_reported_not_raised() -> None:
    errors: dict[str, str] = {}
    assert run_plugin_workload("Z", errors, folder=None) == []
    assert errors["Z"].startswith("workload Z is not installed: pip install")
