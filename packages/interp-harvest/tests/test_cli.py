"""`interp harvest`: the dry run prices the job from the config alone (no model load) with the
bytes the real run writes; the CLI run writes exactly what the Python API writes; refusals are
messages with exit status 2."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
from harvest_helpers import JOB
from interp_harvest.shards import read_manifest

from interp_core.cli import main


def _args(model_path: str, corpus: Path, out: Path, *extra: str) -> list[str]:
    points = [a for p in JOB["points"] for a in ("--points", p)]
    return [
        "harvest",
        "activations",
        model_path,
        "--data",
        str(corpus),
        *points,
        "--tokens",
        str(JOB["tokens"]),
        "--context-size",
        str(JOB["context_size"]),
        "--shard-contexts",
        str(JOB["contexts_per_shard"]),
        "--batch-size",
        str(JOB["batch_size"]),
        "--out",
        str(out),
        *extra,
    ]


def _no_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the dry run loaded the model")

    monkeypatch.setattr("interp_core.load_model", refuse)


def test_the_dry_run_prints_the_bytes_the_run_writes_without_loading_the_model(
    model_path: str,
    corpus_file: Path,
    reference_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_model_load(monkeypatch)
    out = tmp_path / "planned"
    assert main(_args(model_path, corpus_file, out, "--dry-run")) == 0
    printed = capsys.readouterr().out
    manifest = read_manifest(reference_run)
    assert manifest is not None
    assert f"to disk: {manifest['plan']['total_bytes']:,} bytes" in printed
    assert "160 tokens = 10 contexts x 16 tokens, in 3 shards of 4 contexts" in printed
    assert "fits" in printed
    assert not out.exists()
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("interp_harvest.plan.shutil.disk_usage", lambda _: usage(1, 1, 4096))
    assert main(_args(model_path, corpus_file, out, "--dry-run")) == 1
    assert "4.0 KiB free" in capsys.readouterr().out


@pytest.mark.parametrize(("backend", "gpu"), [("auto", "H100"), ("eager", None)])
def test_the_dry_run_prices_memory_and_time_with_the_sizer(
    model_path: str,
    corpus_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    gpu: str | None,
) -> None:
    from interp_harvest.progress import format_bytes

    from interp_sizer import size

    _no_model_load(monkeypatch)
    extra = ["--dry-run", "--backend", backend, *(["--gpu", gpu] if gpu else [])]
    assert main(_args(model_path, corpus_file, tmp_path / "o", *extra)) == 0
    printed = capsys.readouterr().out
    # the sizer's own answer for the job as it runs: 3 contexts of 16 tokens at once
    report = size(
        model_path,
        backend="vllm" if backend == "auto" else backend,
        capture=tuple(JOB["points"]),
        concurrency=JOB["batch_size"],
        max_model_len=JOB["context_size"],
        prompt_tokens=JOB["context_size"],
        gpu=gpu,
        hub=False,
    )
    fit = report.selected
    memory = format_bytes(sum(term.bytes for term in fit.terms))
    assert f"on {fit.gpu.name} (backend {'vllm' if backend == 'auto' else backend}" in printed
    assert f"fits; {memory} per GPU" in printed
    rate = fit.throughput.prefill_tokens_per_s
    assert f"at the roofline's {rate:,.0f} prefill tokens/s" in printed
    assert "160 tokens" in printed and "an estimate, not a measurement" in printed


def test_a_dry_run_the_sizer_cannot_price_still_plans_and_a_wrong_gpu_is_refused(
    model_path: str,
    corpus_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interp_sizer import UnsupportedSetting

    _no_model_load(monkeypatch)
    out = tmp_path / "o"
    assert main(_args(model_path, corpus_file, out, "--dry-run", "--gpu", "H1OO")) == 2
    assert "H100" in capsys.readouterr().err  # the nearest catalogue name

    def unpriceable(*_: Any, **__: Any) -> Any:
        raise UnsupportedSetting("no pricing for this")

    monkeypatch.setattr("interp_sizer.size", unpriceable)
    assert main(_args(model_path, corpus_file, out, "--dry-run")) == 0
    printed = capsys.readouterr().out
    assert "on a GPU: not priced by interp-sizer (no pricing for this)" in printed
    assert "160 tokens = 10 contexts" in printed and "fits" in printed


def test_the_cli_run_writes_what_the_api_writes_with_a_progress_bar(
    model_path: str,
    corpus_file: Path,
    reference_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "harvest"
    assert main(_args(model_path, corpus_file, out, "--backend", "eager")) == 0
    captured = capsys.readouterr()
    assert "160 tokens in 3 shards" in captured.out
    assert "160/160 tokens" in captured.err and "shard 3/3" in captured.err
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted(reference_run.iterdir())}
    # run again without --resume: refused, nothing touched
    assert main(_args(model_path, corpus_file, out, "--backend", "eager")) == 2
    assert "--resume" in capsys.readouterr().err


def test_refusals_are_messages(
    model_path: str,
    corpus_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_model_load(monkeypatch)
    saelens = ("--format", "saelens", "--dtype", "bfloat16")
    assert main(_args(model_path, corpus_file, tmp_path / "o", *saelens)) == 2
    assert "store --dtype float16" in capsys.readouterr().err
    assert main(_args(model_path, tmp_path / "nowhere", tmp_path / "o", "--dry-run")) == 2
    assert "does not exist" in capsys.readouterr().err
    args = _args(model_path, corpus_file, tmp_path / "o", "--dry-run")
    args[args.index("--context-size") + 1] = "1000"
    assert main(args) == 2
    assert "holds no whole context of 1000 tokens" in capsys.readouterr().err
    args = _args(model_path, corpus_file, tmp_path / "o", "--batch-size", "0")
    assert main(args) == 2
    assert "batch_size is contexts per forward" in capsys.readouterr().err


def test_format_saelens_writes_what_the_api_writes(
    model_path: str,
    corpus_file: Path,
    saelens_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "cached"
    args = _args(model_path, corpus_file, out, "--format", "saelens")
    assert main([*args, "--dry-run"]) == 0
    assert "as SAELens's cached-activations dataset" in capsys.readouterr().out
    assert main([*args, "--backend", "eager", "--no-progress"]) == 0
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted(saelens_run.iterdir())}


DRY_RAY = ("--dry-run", "--replicas", "2", "--ray-address", "127.0.0.1:1", "--replica-gpus", "1")


@pytest.mark.parametrize(
    ("flags", "status", "said"),
    [
        (("--replicas", "0"), 2, "replicas must be a whole number >= 1, got 0"),
        (("--replica-cpus", "0"), 2, "cpus > 0"),
        (("--dry-run", "--replicas", "-2"), 2, "got -2"),
        (
            DRY_RAY,
            0,
            "replicas: 2 on Ray (127.0.0.1:1), each loading the model with 1 CPU and 1 GPU",
        ),
    ],
)
def test_replica_flags_are_checked_and_dry_run_without_loading_the_model(
    flags: tuple[str, ...],
    status: int,
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    model_path: str,
    corpus_file: Path,
    tmp_path: Path,
) -> None:
    _no_model_load(monkeypatch)
    assert main(_args(model_path, corpus_file, tmp_path / "o", *flags)) == status
    printed = capsys.readouterr()
    assert said in (printed.err if status else printed.out)
    assert not (tmp_path / "o").exists()  # nothing written


def test_the_replicas_load_the_model_with_the_commands_options(
    model_path: str, corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    called: dict[str, Any] = {}

    def record(model: Any, data: Any, out: Any, **keywords: Any) -> dict[str, Any]:
        called.update(keywords)
        return {"tokens": 0, "shards": []}

    monkeypatch.setattr("interp_harvest.activations.harvest_activations", record)
    options = ("--option", 'dtype="float32"', "--backend", "eager", "--no-progress")
    ray = ("--replicas", "2", "--ray-address", "127.0.0.1:1", "--replica-cpus", "2")
    assert main(_args(model_path, corpus_file, tmp_path / "o", *options, *ray)) == 0
    assert called["replicas"] == 2 and called["ray_address"] == "127.0.0.1:1"
    assert called["load_options"] == {"dtype": "float32"}
    assert (called["replica_cpus"], called["replica_gpus"]) == (2, 0)
