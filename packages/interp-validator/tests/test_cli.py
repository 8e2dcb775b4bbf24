"""Does `interp-validate` run end to end, write its files, and exit with the right status?

Fast: two tiny families, the eager backend, the in-process HF-hooks engine (no reference
environment needed). The eager backend reads the same HF modules the reference names by hand, so
every comparison must pass exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from interp_validator.cli import main
from interp_validator.records import Record, Status, load_summary

FAMILIES = ("llama", "gemma2")


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("validate")
    argv = ["--backend", "eager", "--engine", "hf", "--out", str(folder), "--quiet"]
    for family in FAMILIES:
        argv += ["--family", family]
    assert main(argv) == 0
    return folder


def test_the_sweep_writes_summary_runs_report_and_plot(out: Path) -> None:
    assert json.loads((out / "summary.json").read_text())["format"] == 2
    assert (out / "report.md").read_text().startswith("# Validation report\n\n**No comparison")
    assert (out / "errors-by-layer.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "full" / "report.md").is_file()
    run = json.loads((out / "full" / "runs" / "eager--hf.json").read_text())
    assert set(run["models"]) == set(FAMILIES)
    assert run["engine_versions"]["transformers"]


def test_eager_equals_the_hf_reference_at_every_planned_point(out: Path) -> None:
    records = load_summary(out / "full" / "summary.json")
    assert {r.model for r in records} == set(FAMILIES)
    assert {(r.backend, r.engine) for r in records} == {("eager", "hf")}
    assert all(r.status is Status.PASS for r in records), [r for r in records if r.reason]
    assert all(r.max_abs == 0.0 for r in records)
    gemma2 = {r.address for r in records if r.model == "gemma2"}
    # Sandwich norms: both the raw sublayer output and the post-norm write are compared.
    assert {"attn_out.0", "attn_out_post.0", "mlp_out_post.1", "attn_scores.1"} <= gemma2


def test_the_report_has_a_table_per_family(out: Path) -> None:
    text = (out / "full" / "report.md").read_text()
    for family in FAMILIES:
        assert f"### {family}\n" in text
    assert "| `eager` | `hf` |" in text and "No comparison failed." in text
    compact = (out / "report.md").read_text()
    for family in FAMILIES:
        assert f"| `{family}` | " in compact  # a matrix row per family


def test_a_worse_status_than_the_baseline_exits_1(out: Path, tmp_path: Path) -> None:
    summary = json.loads((out / "full" / "summary.json").read_text())
    # A baseline that passed a comparison this sweep no longer makes.
    ghost = Record("eager", "hf", "llama", "resid_post", 7, None, Status.PASS).to_json()
    summary["records"].append(ghost)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(summary))
    argv = ["--backend", "eager", "--engine", "hf", "--family", "llama", "--quiet"]
    code = main([*argv, "--out", str(tmp_path / "again"), "--baseline", str(baseline)])
    assert code == 1


def test_the_committed_compact_summary_is_a_baseline(out: Path, tmp_path: Path) -> None:
    argv = ["--backend", "eager", "--engine", "hf", "--family", "llama", "--quiet"]
    again = tmp_path / "again"
    assert main([*argv, "--out", str(again), "--baseline", str(out / "summary.json")]) == 0
    # One more pass in the llama cell than this sweep makes: its pass count dropped.
    summary = json.loads((out / "summary.json").read_text())
    (cell,) = [c for c in summary["cells"] if c["model"] == "llama"]
    cell["counts"]["pass"] += 1
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(summary))
    assert main([*argv, "--out", str(again), "--baseline", str(baseline)]) == 1


def test_unknown_names_exit_2_with_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--backend", "nope", "--family", "llama", "--quiet"]) == 2
    assert "no backend named 'nope'" in capsys.readouterr().err
    assert main(["--backend", "eager", "--engine", "tl_lens", "--family", "llama"]) == 2
    err = capsys.readouterr().err
    assert "unknown reference engine 'tl_lens'" in err and "tl_bridge" in err
    assert main(["--backend", "eager", "--engine", "hf", "--family", "lama", "--quiet"]) == 2
    assert "no test family named 'lama'" in capsys.readouterr().err


def test_the_console_script_is_installed() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "interp_validator", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert found.returncode == 0 and "--baseline" in found.stdout


def test_json_prints_one_object_with_counts_and_the_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--backend", "eager", "--engine", "hf", "--family", "llama", "--quiet", "--json"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["exit_status"] == 0 and data["failures"] == [] and data["regressions"] == []
    assert data["counts"]["pass"] == data["comparisons"] > 0
    assert str(tmp_path / "report.md") in data["written"]
