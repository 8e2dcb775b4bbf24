"""Does the sweep plan what it promises and keep engine crashes and refusals honest?

The planning checks run on model facts only. The orchestration checks run `run_sweep` on one
tiny family with a stand-in backend and stand-in engines, so no model is captured twice and no
environment is needed.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from interp_core.address import Address
from interp_validator import subjects
from interp_validator.plan import family_target, layers_to_check, planned_addresses
from interp_validator.records import Status
from interp_validator.references import Reading
from interp_validator.subjects import Capture
from interp_validator.sweep import SweepError, SweepOptions, run_sweep


@pytest.mark.parametrize(
    ("n_layers", "expected"),
    [(1, (0,)), (2, (0, 1)), (4, (0, 2, 3)), (8, (0, 4, 6, 7)), (30, (0, 15, 22, 29))],
)
def test_layers_are_first_middle_last_and_three_quarters_when_deep(
    n_layers: int, expected: tuple[int, ...]
) -> None:
    assert layers_to_check(n_layers) == expected


def test_points_absent_at_the_checked_layers_move_to_the_first_layer_that_has_them() -> None:
    facts = family_target("qwen2_moe").facts  # layer 0 dense, layers 1-2 sparse
    planned = {str(a) for a in planned_addresses(facts)}
    assert {"mlp_pre.0", "mlp_act.0", "router_logits.1", "router_logits.2"} <= planned
    assert "router_logits.0" not in planned and "mlp_pre.1" not in planned
    hybrid = family_target("qwen3_next").facts  # linear attention except every 4th layer
    attention = sorted(str(a) for a in planned_addresses(hybrid) if a.name == "attn_probs")
    assert attention == ["attn_probs.3"]


def test_multi_stream_trunks_are_checked_per_stream() -> None:
    facts = family_target("deepseek_v4").facts
    planned = planned_addresses(facts)
    assert Address("resid_post", 1, 3) in planned and Address("resid_post", 1) not in planned
    assert Address("attn_stream_mix", 0) in planned
    # Layer 0 slides; layers 1 (CSA) and 2 (HCA) also read compressed entries: no matrices there.
    matrices = sorted(str(a) for a in planned if a.name in {"attn_scores", "attn_probs"})
    assert matrices == ["attn_probs.0", "attn_scores.0"]
    assert {Address("z", 1), Address("z", 2), Address("attn_out", 2)} <= set(planned)


def _reading(engine: str, key: str, tensors: dict[str, Any]) -> Reading:
    return Reading(
        engine=engine,
        key=key,
        tensors=tensors,
        conventions=dict.fromkeys(tensors, "raw"),
        not_expressible={},
        unsupported=None,
        versions={"fake": "1"},
        seconds=0.0,
    )


def _value(address: str, seq: int) -> torch.Tensor:
    """The same made-up tensor on both sides, different per address."""
    return torch.full((1, seq, 4), float(sum(map(ord, address))))


def test_a_crashed_engine_makes_its_comparisons_unsupported_and_the_sweep_unclean() -> None:
    def capture(backend: str, model_id: str, name: str, tokens: Any, addresses: Any, **_: Any):
        got = Capture(backend, name, loaded=True)
        for address in addresses:
            if address.name == "lm_head":
                got.refused[str(address)] = "not served here. Use backend='eager'"
            else:
                got.tensors[str(address)] = _value(str(address), len(tokens))
        return got

    def run_engine(engine: str, jobs: Any, **_: Any) -> dict[str, Reading]:
        if engine == "nnsight":
            message = "the environment is broken"
            raise RuntimeError(message)
        return {
            job.key: _reading(engine, job.key, {a: _value(a, len(job.tokens)) for a in job.points})
            for job in jobs
        }

    options = SweepOptions(
        backends=("eager",),
        engines=("hf", "nnsight"),
        families=("llama",),
        real_model=False,
        progress=False,
    )
    result = run_sweep(options, run_engine=run_engine, capture=capture)
    statuses = {
        engine: {r.status for r in result.records if r.engine == engine and r.point != "lm_head"}
        for engine in ("hf", "nnsight")
    }
    assert statuses == {"hf": {Status.PASS}, "nnsight": {Status.UNSUPPORTED}}
    nnsight = [r for r in result.records if r.engine == "nnsight"]
    assert "environment is broken" in (nnsight[0].reason or "")
    assert result.errors == ["nnsight: RuntimeError: the environment is broken"]
    assert not result.ok
    lm_head = [r for r in result.records if r.point == "lm_head"]
    assert {r.status for r in lm_head} == {Status.REFUSED} and len(lm_head) == 2


def test_a_backend_that_declares_no_point_is_skipped_without_records() -> None:
    def capture(backend: str, model_id: str, name: str, tokens: Any, addresses: Any, **_: Any):
        refused = {str(a): "generation only; use backend='eager'" for a in addresses}
        return Capture(backend, name, refused=refused)  # never loaded

    def run_engine(engine: str, jobs: Any, **_: Any) -> dict[str, Reading]:
        return {job.key: _reading(engine, job.key, {}) for job in jobs}

    options = SweepOptions(
        backends=("eager",), engines=("hf",), families=("llama",), real_model=False, progress=False
    )
    result = run_sweep(options, run_engine=run_engine, capture=capture)
    assert result.records == []
    assert result.backends["eager"] == {
        "skipped": "it captures none of the points: generation only; use backend='eager'"
    }


@pytest.mark.parametrize("backends", [("eager",), None])
def test_without_the_eager_backend_the_sweep_names_its_install_line(
    monkeypatch: pytest.MonkeyPatch, backends: tuple[str, ...] | None
) -> None:
    # The validator reaches backends only through the registry; one that is not installed is a
    # library error with the pip line, asked for by name or not.
    monkeypatch.setattr(subjects, "runnable_backends", dict)
    options = SweepOptions(
        backends=backends, engines=("hf",), families=("llama",), real_model=False, progress=False
    )
    with pytest.raises(SweepError, match="pip install interpoint-eager"):
        run_sweep(options)
