"""SteeringSpec validation, the reference arithmetic, and the steer() stack."""

from __future__ import annotations

import asyncio
import math

import pytest
from fake_backend import FakeTensor, facts_for

from interp_core.address import Address
from interp_core.errors import SteeringSpecError
from interp_core.facts import ModelFacts
from interp_core.steering import (
    OPS,
    SteeringSpec,
    active_steering,
    apply_reference,
    apply_reference_rows,
    as_specs,
    check_vector_values,
    steer,
)

FACTS = facts_for("tiny")  # d_model 6, d_mlp 8, 3 layers


def _message(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


# --- construction -------------------------------------------------------------------------------
def test_address_forms_are_coerced_and_defaults_hold() -> None:
    for form in ("resid_post.3", ("resid_post", 3), Address("resid_post", 3)):
        spec = SteeringSpec(form, [1.0, 2.0])
        assert spec.address == Address("resid_post", 3)
    spec = SteeringSpec("resid_post.3", [1, 2])
    assert spec.op == "add" and spec.scale == 1.0 and spec.positions is None
    assert spec.vector == (1.0, 2.0) and spec.width == 2


def test_a_module_path_is_writable() -> None:
    spec = SteeringSpec("path.model.layers.3.mlp", [1.0])
    assert spec.address.is_path


def test_malformed_address_is_a_steering_error_with_the_address_hint() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post:3", [1.0])
    text = _message(excinfo)
    assert "cannot steer at 'resid_post:3'" in text
    assert "resid_post.3" in text  # the address parser's "did you mean"


def test_capture_only_point_is_refused_with_the_registry_reason() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("attn_scores.2", [1.0])
    text = _message(excinfo)
    assert "cannot steer at attn_scores.2" in text
    assert "capture-only" in text
    assert "attention matrix" in text  # why, from the registry
    assert "instead" in text  # what to do


def test_lm_head_is_capture_only_and_suggests_a_writable_point() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("lm_head", [1.0])
    assert "capture-only" in _message(excinfo)


def test_unknown_op_suggests_the_nearest() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.1", [1.0], op="orthogonl")
    text = _message(excinfo)
    assert "unknown steering op 'orthogonl'" in text
    assert ", ".join(OPS) in text
    assert "did you mean orthogonal?" in text


@pytest.mark.parametrize("scale", [math.inf, -math.inf, math.nan])
def test_non_finite_scale_is_refused(scale: float) -> None:
    with pytest.raises(SteeringSpecError, match="not finite"):
        SteeringSpec("resid_post.1", [1.0], scale=scale)


@pytest.mark.parametrize("scale", ["2", True, None])
def test_non_number_scale_is_refused(scale: object) -> None:
    with pytest.raises(SteeringSpecError, match="is not a number"):
        SteeringSpec("resid_post.1", [1.0], scale=scale)  # type: ignore[arg-type]


def test_positions_are_stored_as_a_tuple() -> None:
    assert SteeringSpec("resid_post.1", [1.0], positions=[3, 0, 5]).positions == (3, 0, 5)


@pytest.mark.parametrize(
    ("positions", "fragment"),
    [
        ([], "empty"),
        ([1, 1, 2], "repeat [1]"),
        ([-1], "negative"),
        ([1.0], "not an int"),
        ([True], "not an int"),
        ("012", "not a sequence"),
        (5, "not a sequence"),
    ],
)
def test_bad_positions_are_refused(positions: object, fragment: str) -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.1", [1.0], positions=positions)  # type: ignore[arg-type]
    assert fragment in _message(excinfo)


def test_projection_cap_needs_a_bound_in_order() -> None:
    with pytest.raises(SteeringSpecError, match="needs a bound"):
        SteeringSpec("resid_post.1", [1.0], op="projection_cap")
    with pytest.raises(SteeringSpecError, match=r"min=2.0 > max=1.0"):
        SteeringSpec("resid_post.1", [1.0], op="projection_cap", min=2, max=1)
    with pytest.raises(SteeringSpecError, match="not a finite number"):
        SteeringSpec("resid_post.1", [1.0], op="projection_cap", max=math.nan)
    spec = SteeringSpec("resid_post.1", [1.0], op="projection_cap", min=-1, max=1)
    assert (spec.min, spec.max) == (-1.0, 1.0)
    assert SteeringSpec("resid_post.1", [1.0], op="projection_cap", max=0.0).min is None


def test_bounds_without_projection_cap_are_refused_not_ignored() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.1", [1.0], op="add", max=1.0)
    assert "only projection_cap uses bounds" in _message(excinfo)


def test_projection_cap_refuses_a_scale() -> None:
    with pytest.raises(SteeringSpecError, match="a cap has no coefficient"):
        SteeringSpec("resid_post.1", [1.0], op="projection_cap", max=1.0, scale=2.0)


@pytest.mark.parametrize(
    ("vector", "fragment"),
    [
        ([], "is empty"),
        ([[1.0, 2.0]], "is nested"),
        ([1.0, "x"], "string at index 1"),
        ([1.0, None], "non-number at index 1"),
        ([1.0, math.inf], "inf at index 1"),
        ([math.nan], "nan at index 0"),
        ("abc", "is a str"),
        (3.0, "is a float"),
        (FakeTensor([[1.0, 2.0]]), "has shape (1, 2)"),
        (FakeTensor([]), "is empty"),
    ],
)
def test_bad_vectors_are_refused(vector: object, fragment: str) -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.1", vector)
    assert fragment in _message(excinfo)


def test_a_tensor_vector_is_kept_as_given() -> None:
    tensor = FakeTensor([1.0, 2.0, 3.0])
    spec = SteeringSpec("resid_post.1", tensor)
    assert spec.vector is tensor
    assert spec.width == 3
    assert spec.values() == [1.0, 2.0, 3.0]


def test_zero_vector_is_fine_for_add_but_not_for_directional_ops() -> None:
    SteeringSpec("resid_post.1", [0.0, 0.0])
    with pytest.raises(SteeringSpecError, match="all zeros"):
        SteeringSpec("resid_post.1", [0.0, 0.0], op="orthogonal")
    with pytest.raises(SteeringSpecError, match="all zeros"):
        SteeringSpec("resid_post.1", [0.0, 0.0], op="projection_cap", max=1.0)


# --- one refusal per bad vector, whatever array carries it ----------------------------------------
class _Dtype:
    """A dtype as a tensor library describes it, through the attributes the core duck-types."""

    def __init__(
        self, name: str, *, is_floating_point: bool | None = None, kind: str | None = None
    ):
        self.name = name
        if is_floating_point is not None:
            self.is_floating_point = is_floating_point
        if kind is not None:
            self.kind = kind

    def __str__(self) -> str:
        return self.name


class _Array(FakeTensor):
    def __init__(self, data: list, dtype: _Dtype | None = None) -> None:
        super().__init__(data)
        if dtype is not None:
            self.dtype = dtype


def _refusal(call: object) -> tuple[type, str]:
    with pytest.raises(SteeringSpecError) as excinfo:
        call()  # type: ignore[operator]
    return type(excinfo.value), str(excinfo.value)


@pytest.mark.parametrize(
    ("values", "op"),
    [
        ([1.0, math.nan, 2.0], "add"),
        ([1.0, 2.0, -math.inf], "orthogonal"),
        ([math.inf, math.nan, 0.0], "add"),
        ([0.0, 0.0, 0.0], "orthogonal"),
        ([0.0, -0.0, 0.0], "projection_cap"),
    ],
)
def test_a_bad_array_is_refused_exactly_as_the_same_list(values: list[float], op: str) -> None:
    # A list is checked when the spec is built; an array's values only when a backend uses them
    # (check_vector_values, or interp_torch on a tensor). Same class, same words, either way.
    bounds = {"max": 1.0} if op == "projection_cap" else {}
    as_list = _refusal(lambda: SteeringSpec("resid_post.1", values, op=op, **bounds))
    spec = SteeringSpec("resid_post.1", FakeTensor(values), op=op, **bounds)  # built: unread
    as_array = _refusal(lambda: check_vector_values(spec))
    from_values = _refusal(lambda: check_vector_values(spec, [float(v) for v in values]))
    assert as_list == as_array == from_values


def test_check_vector_values_returns_the_values_of_a_sound_vector() -> None:
    spec = SteeringSpec("resid_post.1", FakeTensor([1.0, -2.0, 0.5]), op="orthogonal")
    assert check_vector_values(spec) == [1.0, -2.0, 0.5]
    assert check_vector_values(SteeringSpec("resid_post.1", [0.0, 0.0])) == [0.0, 0.0]


@pytest.mark.parametrize(
    "dtype",
    [
        _Dtype("torch.int64", is_floating_point=False),
        _Dtype("torch.bool", is_floating_point=False),
        _Dtype("int32", kind="i"),
        _Dtype("complex64", kind="c"),
    ],
)
def test_an_array_of_non_floats_is_refused_when_built(dtype: _Dtype) -> None:
    with pytest.raises(SteeringSpecError, match=r"has dtype .*cast it with \.float\(\)"):
        SteeringSpec("resid_post.1", _Array([1, 2, 3], dtype))


@pytest.mark.parametrize(
    "dtype",
    [
        _Dtype("torch.bfloat16", is_floating_point=True),
        _Dtype("float16", kind="f"),
        _Dtype("bfloat16", kind="V"),  # ml_dtypes' bfloat16: not a kind the core knows to refuse
        _Dtype("mystery"),
    ],
)
def test_an_array_of_floats_or_of_an_unknown_dtype_is_kept(dtype: _Dtype) -> None:
    array = _Array([1.0, 2.0], dtype)
    assert SteeringSpec("resid_post.1", array).vector is array


def test_specs_are_frozen() -> None:
    spec = SteeringSpec("resid_post.1", [1.0])
    with pytest.raises(AttributeError):
        spec.scale = 2.0  # type: ignore[misc]


# --- against a model ----------------------------------------------------------------------------
def test_validate_for_accepts_a_fitting_spec() -> None:
    SteeringSpec("resid_post.2", [0.0] * 6).validate_for(FACTS)
    SteeringSpec("mlp_act.0", [0.0] * 8).validate_for(FACTS)
    SteeringSpec("embeddings", [0.0] * 6).validate_for(FACTS)
    SteeringSpec("path.model.layers.0.mlp", [0.0] * 3).validate_for(FACTS)  # backend checks


def test_validate_for_refuses_a_wrong_width_naming_both() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.1", [0.0] * 5).validate_for(FACTS)
    text = _message(excinfo)
    assert "has 5 elements" in text
    assert "is 6 wide" in text
    assert "pass a vector of length 6" in text


def test_validate_for_refuses_a_missing_layer() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("resid_post.3", [0.0] * 6).validate_for(FACTS)
    text = _message(excinfo)
    assert "layers 0..2" in text and "below 3" in text


def test_validate_for_refuses_a_point_the_model_lacks() -> None:
    with pytest.raises(SteeringSpecError) as excinfo:
        SteeringSpec("q_norm_in.0", [0.0] * 6).validate_for(FACTS)  # no QK-norm on the fake
    text = _message(excinfo)
    assert "cannot steer at q_norm_in.0" in text
    assert "has no q_norm_in there" in text


def test_validate_for_refuses_a_stream_beyond_the_trunk() -> None:
    streams = ModelFacts(**{**FACTS.__dict__, "n_streams": 2, "extras": {}})
    with pytest.raises(SteeringSpecError, match="2 residual stream"):
        SteeringSpec("resid_post.0.stream-2", [0.0] * 6).validate_for(streams)


# --- reference arithmetic -----------------------------------------------------------------------
def _close(a: list[float], b: list[float]) -> bool:
    return all(math.isclose(x, y, abs_tol=1e-12) for x, y in zip(a, b, strict=True))


def test_add_is_h_plus_scale_v() -> None:
    spec = SteeringSpec("resid_post.0", [1.0, -2.0, 0.5], scale=2.0)
    assert _close(spec.apply_reference_row([1.0, 1.0, 1.0]), [3.0, -3.0, 2.0])


def test_orthogonal_rescales_only_the_parallel_part() -> None:
    v = [3.0, 4.0]  # unit (0.6, 0.8)
    h = [1.0, 2.0]  # projection 2.2
    unit = [0.6, 0.8]
    projection = 2.2
    for scale in (0.0, 0.5, 1.0, 3.0):
        got = SteeringSpec("resid_post.0", v, op="orthogonal", scale=scale).apply_reference_row(h)
        want = [hi + (scale - 1.0) * projection * ui for hi, ui in zip(h, unit, strict=True)]
        assert _close(got, want)
    ablated = SteeringSpec("resid_post.0", v, op="orthogonal", scale=0.0).apply_reference_row(h)
    assert abs(sum(a * u for a, u in zip(ablated, unit, strict=True))) < 1e-12  # ablation


def test_projection_cap_clamps_the_component_along_v() -> None:
    v = [0.0, 2.0]
    spec = SteeringSpec("resid_post.0", v, op="projection_cap", min=-1.0, max=1.0)
    assert _close(spec.apply_reference_row([5.0, 3.0]), [5.0, 1.0])
    assert _close(spec.apply_reference_row([5.0, -4.0]), [5.0, -1.0])
    assert _close(spec.apply_reference_row([5.0, 0.5]), [5.0, 0.5])  # inside: unchanged
    upper_only = SteeringSpec("resid_post.0", v, op="projection_cap", max=0.0)
    assert _close(upper_only.apply_reference_row([1.0, -7.0]), [1.0, -7.0])


def test_apply_reference_chains_specs_and_honours_positions() -> None:
    first = SteeringSpec("resid_post.0", [1.0, 0.0])
    second = SteeringSpec("resid_post.0", [0.0, 1.0], scale=10.0, positions=[1])
    rows = apply_reference_rows([first, second], [[0.0, 0.0], [0.0, 0.0]])
    assert rows == [[1.0, 0.0], [1.0, 10.0]]
    assert apply_reference(second, [1.0, 1.0]) == [1.0, 11.0]  # no position: steered
    assert apply_reference(second, [1.0, 1.0], position=0) == [1.0, 1.0]


def test_reference_refuses_a_row_of_the_wrong_width() -> None:
    with pytest.raises(SteeringSpecError, match="a row of 3 values"):
        SteeringSpec("resid_post.0", [1.0, 2.0]).apply_reference_row([1.0, 2.0, 3.0])


def test_as_specs_normalises_and_refuses_strangers() -> None:
    spec = SteeringSpec("resid_post.0", [1.0])
    assert as_specs(None) == ()
    assert as_specs(spec) == (spec,)
    assert as_specs([spec, spec]) == (spec, spec)
    with pytest.raises(SteeringSpecError, match="got a list among its specs"):
        as_specs([spec, [1.0]])  # type: ignore[list-item]
    with pytest.raises(SteeringSpecError, match="got a dict"):
        as_specs({"vector": [1.0]})  # type: ignore[arg-type]


# --- the steer() stack --------------------------------------------------------------------------
class _Model:
    facts = FACTS


def test_steer_stacks_per_model_and_unwinds() -> None:
    a, b = _Model(), _Model()
    outer = SteeringSpec("resid_post.0", [0.0] * 6)
    inner = SteeringSpec("resid_post.1", [0.0] * 6)
    assert active_steering(a) == ()
    with steer(a, outer) as active:
        assert active == (outer,)
        with steer(a, [inner]):
            assert active_steering(a) == (outer, inner)
            assert active_steering(b) == ()
        assert active_steering(a) == (outer,)
    assert active_steering(a) == ()


def test_steer_validates_against_the_model_on_entry() -> None:
    with pytest.raises(SteeringSpecError, match="is 6 wide"):
        with steer(_Model(), SteeringSpec("resid_post.0", [0.0] * 4)):
            pytest.fail("the block must not run")


def test_steer_refuses_an_empty_list() -> None:
    with pytest.raises(SteeringSpecError, match="no steering specs"):
        with steer(_Model(), []):
            pass


def test_steer_is_visible_in_tasks_started_inside_and_not_outside() -> None:
    model = _Model()
    spec = SteeringSpec("resid_post.0", [0.0] * 6)

    async def read() -> tuple[SteeringSpec, ...]:
        await asyncio.sleep(0)
        return active_steering(model)

    async def main() -> tuple[tuple[SteeringSpec, ...], tuple[SteeringSpec, ...]]:
        outside = asyncio.create_task(read())  # created before the block: no steering
        with steer(model, spec):
            inside = asyncio.create_task(read())
        return await inside, await outside

    inside, outside = asyncio.run(main())
    assert inside == (spec,)
    assert outside == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scale": 10**400},
        {"op": "projection_cap", "min": -(10**400)},
        {"vector_value": 10**400},
    ],
)
def test_ints_too_large_for_a_float_are_refused_as_not_finite(kwargs: dict) -> None:
    # float(10**400) raises OverflowError; found by the hostile-input harness.
    from interp_core.errors import SteeringSpecError

    vector = [1.0, kwargs.pop("vector_value", 1.0)]
    with pytest.raises(SteeringSpecError, match="finite"):
        SteeringSpec("resid_post.0", vector, **kwargs)


# --- clamp (an SAE feature) -----------------------------------------------------------------------


def test_clamp_sets_the_feature_and_keeps_the_rest_of_the_row() -> None:
    # f = r·[r > θ], r = max(h·e + b, 0); the write is h + (value − f)·v.
    spec = SteeringSpec(
        "resid_post.1", [1.0, 2.0], "clamp", 3.0, encoder=[0.5, -1.0], bias=0.25, threshold=0.1
    )
    h = [4.0, 1.0]  # h·e + b = 2 − 1 + 0.25 = 1.25 > 0.1: f = 1.25
    assert apply_reference(spec, h) == pytest.approx([4.0 + 1.75, 1.0 + 3.5])
    below = [0.0, 0.2]  # h·e + b = 0.05: under the threshold, f = 0
    assert apply_reference(spec, below) == pytest.approx([3.0, 0.2 + 6.0])


def test_clamp_needs_an_encoder_row_of_the_vectors_width() -> None:
    with pytest.raises(SteeringSpecError, match="no encoder row"):
        SteeringSpec("resid_post.1", [1.0, 2.0], "clamp", 1.0)
    with pytest.raises(SteeringSpecError, match="encoder row of 3 values"):
        SteeringSpec("resid_post.1", [1.0, 2.0], "clamp", 1.0, encoder=[1.0, 2.0, 3.0])
    with pytest.raises(SteeringSpecError, match="bias"):
        SteeringSpec("resid_post.1", [1.0], "clamp", 1.0, encoder=[1.0], bias=math.nan)


def test_other_ops_refuse_the_clamps_fields() -> None:
    with pytest.raises(SteeringSpecError, match="only clamp reads a feature"):
        SteeringSpec("resid_post.1", [1.0], "add", encoder=[1.0])
