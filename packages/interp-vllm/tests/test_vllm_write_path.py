"""vLLM's write refusals, engine-free: its client path refuses before any request is sent.

The model is loaded lazily (no engine starts) and given the workers' answer by hand, so the
rows of `interp_vllm.support.WRITE_REFUSALS` are asked exactly as a started model asks them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from vllm_helpers import TINY_ENGINE

from interp_core import load_model
from interp_core.errors import (
    CapabilityUnsupported,
    InvalidArgument,
    PointNotWritable,
    SteeringSpecError,
)
from interp_core.steering import ALL_OPS, STATIC_OPS, SteeringSpec, steer
from interp_core.testing.writes import example_spec
from interp_core.writes import spec_from_wire
from interp_testmodels.families import build_family

WIDTH = 128  # the tiny Llama's d_model


@pytest.fixture(scope="module")
def llama() -> str:
    return str(build_family("llama"))


def _answered(model: Any, writable: set[str], refusals: dict[str, str]) -> Any:
    from interp_vllm.calls import Installed

    sites = frozenset({"resid_post.0", "resid_post.1", "mlp_out.0"})
    model._installed = Installed(sites, frozenset(writable), refusals, {})
    model._model_dtype = torch.float32  # what the started engine reports
    return model


def _spec(op: str, address: str = "resid_post.0") -> SteeringSpec:
    # From the op definitions, so a new op is covered here the day it exists.
    return example_spec(op, address, WIDTH)


def test_a_point_the_workers_cannot_write_is_point_not_writable(llama: str) -> None:
    model = load_model(llama, backend="vllm", **TINY_ENGINE)
    _answered(model, {"resid_post.1"}, {"resid_post.0": "its module returns a view"})
    with pytest.raises(PointNotWritable, match="its module returns a view") as caught:
        model._writes(_spec("add"), 4, "this call")
    # The one class both backends raise, caught by either clause the backends once used.
    assert isinstance(caught.value, SteeringSpecError)
    assert isinstance(caught.value, CapabilityUnsupported)
    # The active steer() stack is admitted by the same step as the explicit specs.
    with steer(model, _spec("add")), pytest.raises(PointNotWritable):
        model._writes(None, 4, "this call")
    assert model.engine is None


def test_every_op_leaves_the_client_whole(llama: str) -> None:
    model = load_model(llama, backend="vllm", **TINY_ENGINE)
    _answered(model, {"resid_post.0"}, {})
    for op in ALL_OPS:
        spec = _spec(op)
        (wire,) = model._writes(spec, 4, "this call")
        back = spec_from_wire(json.loads(json.dumps(wire)))
        for name in spec.__dataclass_fields__:
            sent, got = getattr(spec, name), getattr(back, name)
            assert got == sent, (op, name)


def test_static_refusals_are_rows(llama: str) -> None:
    model = load_model(
        llama,
        backend="vllm-static",
        **TINY_ENGINE,
        static_points=["resid_post.1"],
        static_writes=["resid_post.0"],
    )
    _answered(model, {"resid_post.0", "resid_post.1"}, {})
    for op in ALL_OPS:
        if op in STATIC_OPS:
            assert len(model._writes(_spec(op), 4, "this call")) == 1
        else:
            with pytest.raises(CapabilityUnsupported, match="not served by vllm-static"):
                model._writes(_spec(op), 4, "this call")
    with pytest.raises(CapabilityUnsupported, match="declared write set"):
        model._writes(_spec("add", "resid_post.1"), 4, "this call")
    with pytest.raises(CapabilityUnsupported, match="write slots"):
        model._writes([_spec("add")] * 3, 4, "this call")
    # The slots count the writes covering one position: a patch (one spec per position) and a
    # steer over every position fit in two; a third write at one patched position does not.
    from interp_core import Patch

    patch = Patch("resid_post.0", [[0.5] * WIDTH] * 4, positions=[0, 1, 2, 3])
    assert len(model._writes([patch, _spec("add")], 4, "this call")) == 5
    at_two = SteeringSpec("resid_post.0", [1.0] * WIDTH, positions=[2])
    with pytest.raises(CapabilityUnsupported, match="cover one position"):
        model._writes([patch, _spec("add"), at_two], 4, "this call")
    rows = [SteeringSpec("resid_post.0", [1.0] * WIDTH, batch_rows=r) for r in (0, 1, 0)]
    assert len(model._writes(rows[:2] * 2, 4, "this call", prompts=[[1, 2], [3, 4]])) == 4
    with pytest.raises(CapabilityUnsupported, match="cover one position"):
        model._writes([*rows, _spec("add")], 4, "this call", prompts=[[1, 2], [3, 4]])


def test_a_full_op_table_is_refused_with_its_size(llama: str) -> None:
    model = load_model(
        llama,
        backend="vllm-static",
        **TINY_ENGINE,
        static_points=["resid_post.0"],
        static_write_slots=1,
    )
    _answered(model, {"resid_post.0"}, {})
    assert len(model._writes(_spec("swap"), 4, "this call")) == 1
    with pytest.raises(CapabilityUnsupported, match="holds 1 operations") as caught:
        model._writes([_spec("ablate"), _spec("norm_add")], 4, "this call")
    assert "static_write_slots" in str(caught.value)
    with pytest.raises(InvalidArgument, match="static_write_slots=0"):
        load_model(llama, backend="vllm-static", max_model_len=128, static_write_slots=0)
