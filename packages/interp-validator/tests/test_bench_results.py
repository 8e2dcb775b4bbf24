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


def test_a_ratio_is_the_median_of_paired_rounds_with_its_spread() -> None:
    from interp_validator.bench.results import time_rows

    # Round 2 ran under a load that slowed both variants alike: pairing cancels it, whereas the
    # ratio of the two medians (1.5 / 1.0) would not.
    times = {"base": [1.0, 1.0, 3.0], "mine": [1.1, 1.2, 3.0]}
    (row,) = time_rows({"mine": "P2"}, "eager (ours)", times, "base", goals={"mine": ("<=", 1.1)})
    assert row.ratio == 1.1
    assert row.spread == (1.0, 1.2)
    assert row.pairs == 3
    assert row.met is True
    assert "1.100× [1.000–1.200, 3 pairs] (goal ≤ 1.1×: met)" in row.ratio_text()


def test_goal_kinds_judge_their_own_direction() -> None:
    over = Row(
        "P2", "eager (ours)", "every point", 0.1, "s", "plain", 1.117, goal=1.1, goal_kind="<="
    )
    under = Row("P4", "vllm (ours)", "8 concurrent", 177.0, "tok/s", "eager", 3.75, goal=4.0)
    fast = Row("P3", "vllm (ours)", "static", 58.0, "tok/s", "vanilla", 0.98, goal=0.97)
    plain = _row("L", "capture + add", 0.9)
    assert (over.met, under.met, fast.met, plain.met) == (False, False, True, None)
    result = BenchResult([over, under, fast, plain])
    assert [row.workload for row in result.missed()] == ["P2", "P4"]
    table = result.markdown()
    assert "(goal ≤ 1.1×: MISSED)" in table and "(goal ≥ 4×: MISSED)" in table
    assert "(goal ≥ 0.97×: met)" in table
    try:
        Row("P2", "x", "y", 1.0, "s", "b", 1.0, goal=1.0, goal_kind=">")
    except ValueError as exc:
        assert "goal_kind" in str(exc)
    else:  # pragma: no cover - the refusal is the point
        raise AssertionError("an unknown goal kind was accepted")


def test_spread_and_goal_survive_the_json_document() -> None:
    row = Row(
        "P3",
        "vllm (ours)",
        "static",
        58.0,
        "tok/s",
        "vanilla",
        0.98,
        goal=0.97,
        spread=(0.9, 1.02),
        pairs=10,
    )
    document = json.loads(BenchResult([row]).to_json())
    again = BenchResult().merged_into(document, set())
    assert again.rows == [row]


def test_check_fails_on_a_missed_goal_of_this_run_only(tmp_path, monkeypatch) -> None:
    from interp_validator.bench import cli

    missed = Row("P4", "vllm (ours)", "8 concurrent", 177.0, "tok/s", "eager", 3.75, goal=4.0)
    met = Row("P4", "vllm (ours)", "8 concurrent", 177.0, "tok/s", "eager", 4.2, goal=4.0)
    committed = Row(
        "P2", "eager (ours)", "every point", 0.1, "s", "plain", 1.2, goal=1.1, goal_kind="<="
    )
    (tmp_path / "bench.json").write_text(BenchResult([committed]).to_json())
    for row, code in ((missed, 1), (met, 0)):
        monkeypatch.setattr(cli, "run_benchmarks", lambda row=row, **_: BenchResult([row]))
        argv = ["--only", "P4", "--out", str(tmp_path), "--merge", "--check"]
        assert cli.main(argv) == code
        # Without --check the same run is reported, not failed.
        assert cli.main(argv[:-1]) == 0
