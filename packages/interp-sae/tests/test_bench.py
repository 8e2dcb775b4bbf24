"""interp-bench's workload F, which interp-sae plugs in: its SAE, its rows, its entry point."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest


def test_interp_bench_finds_workload_f_through_its_entry_point() -> None:
    from interp_sae.bench import bench_sae_features

    found = [p for p in entry_points(group="interp.bench") if p.name == "F"]
    assert len(found) == 1 and found[0].load() is bench_sae_features


def test_the_bench_sae_loads_at_the_middle_layer(tmp_path: Path) -> None:
    import torch
    from interp_sae import load_sae
    from interp_sae.bench import D_SAE, write_bench_sae

    sae = load_sae(write_bench_sae(tmp_path / "sae", d_in=64, layer=4))
    assert (str(sae.address), sae.d_in, sae.d_sae) == ("resid_post.4", 64, D_SAE)
    acts = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(0))
    firing = (sae.encode(acts) > 0).float().mean().item()
    assert 0.2 < firing < 0.8  # a fair share of features fire: top-k is not all zeros


def test_the_sae_rows_judge_only_the_worker_side_against_the_goal() -> None:
    from interp_sae.bench import GOAL, _rows

    from interp_validator.bench.plugins import KIT

    rows = _rows(
        KIT.row,
        {"in-process client": 800.0, "in-process worker": 1000.0, "served client": 500.0,
         "served worker": 750.0},
        spread={"in-process": (0.9, 1.4), "served": (1.4, 1.6)},
        layer=4,
        worker_bytes={"in-process client": 262144.0, "in-process worker": 32768.0},
        http_bytes={"served client": 262408.0, "served worker": 50433.0},
    )  # fmt: skip
    assert [(r.subject, r.variant.split(",")[0], r.ratio, r.goal) for r in rows] == [
        ("vllm (ours)", "in-process: capture resid_post", 1.0, None),
        ("vllm (ours)", "in-process: top-32 encoded in the worker", 1.25, GOAL),
        ("vllm served (ours)", "served: capture resid_post", 1.0, None),
        ("vllm served (ours)", "served: top-32 encoded on the server (/v1/features)", 1.5, GOAL),
    ]
    assert rows[1].note == "32,768 bytes out of the worker per request; ratio per round 0.90–1.40×"
    assert rows[2].note == "262,408 bytes over HTTP per request"


def test_interp_bench_hands_workload_f_the_tools_it_would_otherwise_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # interp_sae.bench never imports the validator: the bench passes its row class, prompts and
    # loopback server as `kit`, and F takes it.
    import inspect

    from interp_sae.bench import bench_sae_features

    import interp_validator.bench.plugins as plugins
    from interp_validator.bench.results import Row, prompt_tokens
    from interp_validator.bench.served import running_server

    seen: dict[str, object] = {}

    class Point:
        name = "F"

        def load(self) -> object:
            return lambda **context: seen.update(context) or []

    monkeypatch.setattr(plugins, "entry_points", lambda group: [Point()])
    assert plugins.run_plugin_workload("F", {}, folder=None) == []
    kit = seen["kit"]
    assert (kit.row, kit.prompt_tokens, kit.running_server) == (Row, prompt_tokens, running_server)
    assert "kit" in inspect.signature(bench_sae_features).parameters
