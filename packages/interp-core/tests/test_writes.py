"""The one write path in the core: admission and the one wire form, engine-free.

Every op is enumerated from `OP_FIELDS` (through `interp_core.testing.writes`), so an op added
there is covered here the day it exists.
"""

from __future__ import annotations

import json

import pytest
from fake_backend import FakeTensor, facts_for

from interp_core.errors import CapabilityUnsupported, PointNotWritable, SteeringSpecError
from interp_core.steering import ALL_OPS, OP_FIELDS, SteeringSpec, steer
from interp_core.testing.writes import example_spec, example_specs
from interp_core.writes import admit_writes, spec_from_wire, spec_to_wire

FACTS = facts_for("tiny")  # d_model 6, d_mlp 8, 3 layers
WIDTH = FACTS.d_model


def _same(a: SteeringSpec, b: SteeringSpec) -> None:
    for name in a.__dataclass_fields__:
        assert getattr(a, name) == getattr(b, name), (a.op, name)


def test_every_op_and_field_survives_the_wire_through_json() -> None:
    specs = example_specs("resid_post.1", WIDTH)
    assert [s.op for s in specs] == list(ALL_OPS)
    for spec in specs:
        wire = spec_to_wire(spec)
        assert set(wire) == set(spec.__dataclass_fields__)  # every field, under its own name
        _same(spec_from_wire(json.loads(json.dumps(wire))), spec)
        for name in OP_FIELDS[spec.op]:  # the op's own fields are set, not left at defaults
            assert wire[name] != SteeringSpec.__dataclass_fields__[name].default, name


def test_a_tensor_vector_travels_as_its_values_and_non_finite_ones_are_refused() -> None:
    spec = SteeringSpec("resid_post.0", FakeTensor([0.5] * WIDTH), "add", 2.0)
    assert spec_to_wire(spec)["vector"] == [0.5] * WIDTH
    bad = SteeringSpec("resid_post.0", FakeTensor([float("nan")] * WIDTH), "add")
    with pytest.raises(SteeringSpecError, match="nan at index 0"):
        spec_to_wire(bad)
    clamp = example_spec("clamp", "resid_post.0", WIDTH)
    enc = SteeringSpec(
        "resid_post.0", clamp.vector, "clamp", 1.0, encoder=FakeTensor([float("inf")] * WIDTH)
    )
    with pytest.raises(SteeringSpecError, match="inf at index 0"):
        spec_to_wire(enc)


def test_the_decoder_refuses_what_no_spec_holds() -> None:
    with pytest.raises(SteeringSpecError, match="unknown fields \\['code'\\]"):
        spec_from_wire({"address": "resid_post.0", "vector": [1.0], "code": "import os"})
    with pytest.raises(SteeringSpecError, match="JSON object"):
        spec_from_wire([1.0])
    with pytest.raises(SteeringSpecError, match="address and a vector"):
        spec_from_wire({"vector": [1.0]})


class _Model:
    facts = FACTS


def test_admission_merges_the_active_stack_first_and_checks_each_spec() -> None:
    model = _Model()
    outer = example_spec("add", "resid_post.0", WIDTH)
    mine = example_spec("orthogonal", "resid_post.1", WIDTH, positions=(3,))
    with steer(model, outer):
        assert admit_writes(model, mine, FACTS) == (outer, mine)
        with pytest.raises(SteeringSpecError, match="lie beyond"):
            admit_writes(model, mine, FACTS, (3, "this 3-token prompt"))
    with pytest.raises(SteeringSpecError, match=r"layers 0\.\.2"):
        admit_writes(model, example_spec("add", "resid_post.5", WIDTH), FACTS)
    assert admit_writes(model, None, FACTS) == ()


def test_the_backend_refusal_is_raised_as_it_returns_it() -> None:
    spec = example_spec("add", "resid_post.0", WIDTH)
    seen = []

    def refuse(each: SteeringSpec, specs: tuple[SteeringSpec, ...]) -> Exception | None:
        seen.append((each, specs))
        return PointNotWritable("cannot steer at resid_post.0 here")

    with pytest.raises(PointNotWritable) as caught:
        admit_writes(_Model(), [spec], FACTS, refuse=refuse)
    assert seen == [(spec, (spec,))]
    # One class for the refusal on every backend, caught by either clause they once raised.
    assert isinstance(caught.value, SteeringSpecError)
    assert isinstance(caught.value, CapabilityUnsupported)


def test_repeated_positions_are_named_once_each() -> None:
    with pytest.raises(SteeringSpecError, match=r"repeat \[2, 5\]"):
        SteeringSpec("resid_post.0", [1.0] * WIDTH, positions=[5, 2, 5, 2, 2, 1])
