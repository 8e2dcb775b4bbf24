"""interp-bench's workloads H and D (interp_harvest.bench): found through the `interp.bench`
entry points, their corpus packs into the contexts they time, and SAELens's side of H (its
`CacheActivationsRunner` in the pinned `sae-lens` environment, kept loaded) caches every context
it is given (one env subprocess on the tiny model; skipped where the environment is not built
unless INTERP_REQUIRE names validator-envs)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from interp_harvest import bench
from interp_harvest.bench import _packed, write_bench_corpus


def test_h_and_d_are_interp_bench_workloads() -> None:
    found = {e.name: e.value for e in entry_points(group="interp.bench")}
    assert found["H"] == "interp_harvest.bench:bench_activations"
    assert found["D"] == "interp_harvest.bench:bench_dashboards"
    from interp_validator.bench.plugins import PROVIDERS
    from interp_validator.bench.workloads import WORKLOAD_SUMMARIES, WORKLOADS

    assert {"H", "D"} <= set(WORKLOADS) and {"H", "D"} <= set(WORKLOAD_SUMMARIES)
    assert PROVIDERS["H"] == PROVIDERS["D"] == "interpoint-harvest[bench]"


def test_a_failing_workload_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from interp_validator.bench.plugins import KIT

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    errors: dict[str, str] = {}
    missing = tmp_path / "no-model"
    assert (
        bench.bench_dashboards(
            missing, repeats=1, work=tmp_path, say=lambda _: None, errors=errors, kit=KIT
        )
        == []
    )
    assert "no-model" in errors["D"]


@pytest.mark.slow
def test_saelens_caches_every_context_it_is_given(
    eager_model: Any, model_path: str, tmp_path: Path
) -> None:
    from interp_validator.bench.plugins import KIT
    from interp_validator.references.testing import env_python_or_skip

    env_python_or_skip("sae-lens")
    corpus = write_bench_corpus(tmp_path / "corpus.jsonl", documents=40)
    contexts = [c[:16] for c in _packed(eager_model.tokenizer, corpus, 4)]
    assert len(contexts) == 4 and all(len(c) == 16 for c in contexts)
    job = {
        "model_dir": model_path,
        "references": str(KIT.references),
        "hook": "blocks.1.hook_resid_post",
        "d_in": int(eager_model.d_model),
        "contexts": contexts,
        "batch": 2,
        "work": str(tmp_path),
    }
    script = Path(bench.__file__).with_name("bench_runner_saelens.py")
    with KIT.env_runner("sae-lens", script, job, tmp_path, name="SAELens caching") as runner:
        done = runner.ask("run")
    assert done["rows"] == 4 and done["tokens"] == 4 * 16 and done["seconds"] > 0
