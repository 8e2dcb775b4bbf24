"""Is the one torch implementation of steering the arithmetic the core defines, row by row?

Every operation is compared with the core's pure-Python float64 reference
(`interp_core.steering.apply_reference`), on batches whose rows differ, with different vectors and
positions per row, so an implementation that mixed rows (a projection averaged over the batch, a
mask applied to the wrong row) fails. The dtype rule is checked bit for bit against its statement:
the delta in float32, cast to the activation's dtype, added there.
"""

from __future__ import annotations

import math

import pytest
import torch

from interp_core.errors import SteeringSpecError
from interp_core.steering import OPS, SteeringSpec, apply_reference, check_vector_values
from interp_torch import (
    apply_steering,
    compute_dtype,
    position_mask,
    steering_delta,
    steering_vector,
)
from interp_torch.steering import spec_delta

WIDTH = 8
ADDRESS = "resid_post.1"
# float32 arithmetic against the float64 reference, on values of magnitude ~1-10.
ATOL = 1e-5


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _spec(op: str, vector: torch.Tensor, positions: tuple[int, ...] | None = None) -> SteeringSpec:
    kwargs: dict = {"scale": -1.5} if op != "projection_cap" else {"min": -0.3, "max": 0.4}
    return SteeringSpec(ADDRESS, vector.tolist(), op=op, positions=positions, **kwargs)


def _reference(spec: SteeringSpec, h: torch.Tensor, position: int | None = None) -> torch.Tensor:
    row = apply_reference(spec, h.double().tolist(), position)
    return torch.tensor(row, dtype=torch.float64)


# --- each op, per row ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_every_row_of_a_batch_is_steered_on_its_own(op: str) -> None:
    # Rows far apart in direction and size: any mixing of rows moves some row by a lot.
    h = _randn(4, 5, WIDTH, seed=1) * torch.tensor([0.5, 2.0, 8.0, 1.0]).reshape(4, 1, 1)
    vector = _randn(WIDTH, seed=2)
    spec = _spec(op, vector)
    got = h + spec_delta(h, spec, vector)
    for b in range(h.shape[0]):
        for s in range(h.shape[1]):
            want = _reference(spec, h[b, s])
            torch.testing.assert_close(got[b, s].double(), want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("op", ["orthogonal", "projection_cap"])
def test_a_projection_averaged_over_the_batch_would_fail(op: str) -> None:
    # The guard behind the test above: on these rows, taking h·v̂ over the whole batch instead
    # of per row lands far from the reference, so that bug cannot pass.
    h = _randn(3, WIDTH, seed=3) * torch.tensor([[0.1], [3.0], [-6.0]])
    vector = _randn(WIDTH, seed=4)
    spec = _spec(op, vector)
    want = torch.stack([_reference(spec, row) for row in h])
    got = h + spec_delta(h, spec, vector)
    torch.testing.assert_close(got.double(), want, atol=ATOL, rtol=0)
    unit = vector / vector.norm()
    averaged = (h @ unit).mean().expand(3).unsqueeze(-1)
    if op == "orthogonal":
        factor = (spec.scale - 1.0) * averaged
    else:
        factor = averaged.clamp(spec.min, spec.max) - averaged
    wrong = h + factor * unit
    assert (wrong.double() - want).abs().max() > 0.1


@pytest.mark.parametrize("op", OPS)
def test_each_row_may_carry_its_own_vector(op: str) -> None:
    h = _randn(3, WIDTH, seed=5)
    vectors = _randn(3, WIDTH, seed=6) * torch.tensor([[1.0], [10.0], [0.2]])
    kwargs: dict = {"scale": 2.5} if op != "projection_cap" else {"min": -0.2, "max": 0.1}
    bounds = {"lower": kwargs.get("min"), "upper": kwargs.get("max")}
    got = h + steering_delta(h, vectors, op, scale=kwargs.get("scale", 1.0), **bounds)
    for i in range(3):
        spec = SteeringSpec(ADDRESS, vectors[i].tolist(), op=op, **kwargs)
        torch.testing.assert_close(got[i].double(), _reference(spec, h[i]), atol=ATOL, rtol=0)


# --- positions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS)
def test_positions_follow_each_rows_own_position_ids(op: str) -> None:
    # Left padding shifts the second row: its absolute positions are not its column indices.
    h = _randn(2, 5, WIDTH, seed=7)
    row_positions = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2]])
    vector = _randn(WIDTH, seed=8)
    spec = _spec(op, vector, positions=(1, 2))
    if op == "projection_cap":  # a floor above every row's projection, so every row moves
        spec = SteeringSpec(ADDRESS, vector.tolist(), op=op, positions=(1, 2), min=10.0)
    got = h + spec_delta(h, spec, vector, row_positions=row_positions)
    changed = (got != h).any(dim=-1)
    assert changed.tolist() == [
        [False, True, True, False, False],
        [False, False, False, True, True],
    ]
    for b in range(2):
        for s in range(5):
            want = _reference(spec, h[b, s], int(row_positions[b, s]))
            torch.testing.assert_close(got[b, s].double(), want, atol=ATOL, rtol=0)


def test_position_mask_takes_lists_and_tensors_and_keeps_the_rows_shape() -> None:
    where = torch.tensor([[3, 4, 5], [7, 3, 9]])
    by_list = position_mask(where, [3, 9])
    by_tensor = position_mask(where, torch.tensor([3, 9]))
    assert by_list.tolist() == by_tensor.tolist() == [[True, False, False], [False, True, True]]


def test_positions_without_row_positions_are_a_caller_error() -> None:
    h = _randn(2, WIDTH, seed=9)
    with pytest.raises(ValueError, match="row_positions"):
        steering_delta(h, _randn(WIDTH, seed=10), "add", positions=[0])


def test_an_unknown_op_is_refused() -> None:
    with pytest.raises(ValueError, match="orthogonal"):
        steering_delta(_randn(2, WIDTH, seed=11), _randn(WIDTH, seed=12), "orthogonl")


# --- the dtype rule -----------------------------------------------------------------------------
def test_the_compute_dtype_is_at_least_float32() -> None:
    assert compute_dtype(torch.float16) == torch.float32
    assert compute_dtype(torch.bfloat16) == torch.float32
    assert compute_dtype(torch.float32) == torch.float32
    assert compute_dtype(torch.float64) == torch.float64


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", OPS)
def test_half_precision_steers_in_float32_and_rounds_once(dtype: torch.dtype, op: str) -> None:
    h = (_randn(3, 4, WIDTH, seed=13) * 4).to(dtype)
    vector = _randn(WIDTH, seed=14).to(dtype)  # a vector in any dtype is cast like the rows
    spec = _spec(op, vector.float())
    delta = spec_delta(h, spec, vector)
    assert delta.dtype == torch.float32
    # The statement of the rule, spelled out: float32 arithmetic on the upcast inputs ...
    want = spec_delta(h.float(), spec, vector.float())
    assert torch.equal(delta, want)
    # ... the delta cast to the activation's dtype and added there.
    steered = apply_steering(h, vector, op, scale=spec.scale, lower=spec.min, upper=spec.max)
    assert steered.dtype == dtype
    assert torch.equal(steered, h + want.to(dtype))
    # And it is the arithmetic the core defines, up to the activation dtype's rounding.
    eps = torch.finfo(dtype).eps
    for b in range(3):
        for s in range(4):
            want_row = _reference(spec, h[b, s].float())
            scale = max(1.0, float(want_row.abs().max()))
            assert (steered[b, s].double() - want_row).abs().max() <= 2 * eps * scale


def test_float32_rows_are_used_as_given_and_float64_rows_stay_float64() -> None:
    h32 = _randn(2, 3, WIDTH, seed=15)
    vector = _randn(WIDTH, seed=16)
    add = steering_delta(h32, vector.double(), "add", scale=2.0)
    assert add.dtype == torch.float32
    assert torch.equal(h32 + add, h32 + 2.0 * vector)  # what the eager suite asserts bit for bit
    h64 = h32.double()
    delta = steering_delta(h64, vector, "orthogonal", scale=0.0)
    assert delta.dtype == torch.float64
    spec = SteeringSpec(ADDRESS, vector.tolist(), op="orthogonal", scale=0.0)
    for row, moved in zip(h64.reshape(-1, WIDTH), (h64 + delta).reshape(-1, WIDTH), strict=True):
        torch.testing.assert_close(moved, _reference(spec, row), atol=1e-12, rtol=0)


def test_a_zero_add_is_the_identity_bit_for_bit() -> None:
    h = _randn(2, 3, WIDTH, seed=17)
    assert torch.equal(apply_steering(h, torch.zeros(WIDTH), "add", scale=5.0), h)


def test_the_rows_are_never_modified_and_gradients_flow() -> None:
    h = _randn(2, 3, WIDTH, seed=18).requires_grad_(True)
    before = h.detach().clone()
    for op in OPS:
        spec = _spec(op, _randn(WIDTH, seed=19))
        out = apply_steering(
            h, torch.tensor(spec.vector), op, scale=spec.scale, lower=spec.min, upper=spec.max
        )
        out.sum().backward()
        assert torch.equal(h.detach(), before)
        assert h.grad is not None and bool(torch.isfinite(h.grad).all())
        h.grad = None


# --- the vector's values ------------------------------------------------------------------------
def test_a_list_vector_becomes_float32_and_a_tensor_stays_as_given() -> None:
    assert steering_vector(SteeringSpec(ADDRESS, [1.0, 2.0])).dtype == torch.float32
    tensor = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert steering_vector(SteeringSpec(ADDRESS, tensor)) is tensor


@pytest.mark.parametrize(
    ("values", "op"),
    [
        ([1.0, math.nan, 2.0], "add"),
        ([1.0, 2.0, -math.inf], "orthogonal"),
        ([0.0, 0.0, 0.0], "orthogonal"),
        ([0.0, -0.0, 0.0], "projection_cap"),
    ],
)
def test_a_bad_tensor_is_refused_exactly_as_the_core_refuses_its_values(
    values: list[float], op: str
) -> None:
    bounds = {"max": 1.0} if op == "projection_cap" else {}
    spec = SteeringSpec(ADDRESS, torch.tensor(values), op=op, **bounds)  # built: values unread
    with pytest.raises(SteeringSpecError) as torch_side:
        steering_vector(spec)
    with pytest.raises(SteeringSpecError) as core_side:
        check_vector_values(spec, values)
    with pytest.raises(SteeringSpecError) as as_a_list:
        SteeringSpec(ADDRESS, values, op=op, **bounds)
    assert str(torch_side.value) == str(core_side.value) == str(as_a_list.value)


def test_an_integer_tensor_is_refused_when_the_spec_is_built() -> None:
    with pytest.raises(SteeringSpecError, match=r"torch\.int64.*\.float\(\)"):
        SteeringSpec(ADDRESS, torch.ones(4, dtype=torch.long))


# --- the overflow rule --------------------------------------------------------------------------
def _unit(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    vector = torch.zeros(WIDTH, dtype=dtype)
    vector[0] = 1.0
    return vector


@pytest.mark.parametrize(
    ("spec", "dtype", "fix"),
    [
        (SteeringSpec(ADDRESS, _unit(), scale=1e300), torch.float32, r"\|scale\|·max\|v\|"),
        (SteeringSpec(ADDRESS, _unit(), scale=-4e38), torch.float32, r"below 3\.40282e\+38"),
        (SteeringSpec(ADDRESS, _unit(), scale=1e5), torch.float16, r"below 65504"),
        (SteeringSpec(ADDRESS, _unit(), scale=1e39), torch.bfloat16, r"bfloat16"),
        (SteeringSpec(ADDRESS, _unit(torch.float64) * 1e300), torch.float32, r"rescale"),
        (SteeringSpec(ADDRESS, [1e30] * WIDTH, op="orthogonal"), torch.float32, r"norm is inf"),
        (SteeringSpec(ADDRESS, [1e-30] * WIDTH, op="orthogonal"), torch.float32, r"norm is 0"),
        (SteeringSpec(ADDRESS, _unit(), op="orthogonal", scale=1e5), torch.float16, r"\|scale\|"),
        (SteeringSpec(ADDRESS, _unit(), op="projection_cap", min=1e5), torch.float16, r"bound"),
        (SteeringSpec(ADDRESS, _unit(), op="projection_cap", max=-1e5), torch.float16, r"bound"),
        (SteeringSpec(ADDRESS, _unit(), op="projection_cap", max=1e300), torch.float32, r"bound"),
    ],
)
def test_a_spec_that_must_overflow_the_dtype_is_refused(
    spec: SteeringSpec, dtype: torch.dtype, fix: str
) -> None:
    from interp_torch import check_steering_fits

    with pytest.raises(SteeringSpecError, match=fix) as raised:
        check_steering_fits(spec, dtype)
    message = str(raised.value)
    assert ADDRESS in message
    assert str(dtype).removeprefix("torch.") in message


@pytest.mark.parametrize(
    ("spec", "dtype"),
    [
        (SteeringSpec(ADDRESS, _unit(), scale=6e4), torch.float16),
        (SteeringSpec(ADDRESS, _unit(torch.float64) * 1e300), torch.float64),
        (SteeringSpec(ADDRESS, [1e-20] * WIDTH, op="orthogonal", scale=0.0), torch.float32),
        (SteeringSpec(ADDRESS, _unit(), op="projection_cap", max=1e5), torch.float16),
        (SteeringSpec(ADDRESS, _unit(), op="projection_cap", min=-1e30), torch.float32),
    ],
)
def test_a_spec_that_fits_the_dtype_passes(spec: SteeringSpec, dtype: torch.dtype) -> None:
    from interp_torch import check_steering_fits

    check_steering_fits(spec, dtype)
    check_steering_fits(spec, dtype, steering_vector(spec))


def test_a_non_finite_write_is_refused_but_the_models_own_inf_is_not_blamed() -> None:
    from interp_torch import check_steered_finite

    spec = SteeringSpec(ADDRESS, _unit(), scale=6e4)
    before = torch.tensor([[1.0, 2.0], [float("inf"), 3.0]], dtype=torch.float16)
    check_steered_finite(before + 1, spec, before=before)  # the inf was there already
    written = before + torch.tensor([[6e4, 6e4], [0.0, 0.0]], dtype=torch.float16) * 2
    with pytest.raises(SteeringSpecError, match=r"3 non-finite value\(s\) of 4"):
        check_steered_finite(written, spec)
    with pytest.raises(SteeringSpecError, match=r"2 non-finite value\(s\) of 4") as raised:
        check_steered_finite(written, spec, before=before)
    message = str(raised.value)
    assert all(part in message for part in (ADDRESS, "scale=60000.0", "float16"))


def test_a_per_row_write_is_masked_by_row_and_refused_without_rows() -> None:
    from interp_core.errors import SteeringSpecError
    from interp_torch.steering import spec_delta

    h = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(0))
    spec = SteeringSpec("resid_pre.0", [1.0, 2.0, 3.0, 4.0], op="set", batch_rows=[0, 2])
    vector = torch.tensor(spec.values())
    rows = torch.arange(3)[:, None].expand(3, 2)
    written = h + spec_delta(h, spec, vector, row_batch=rows)
    assert torch.equal(written[1], h[1])
    assert torch.allclose(written[[0, 2]], vector.expand(2, 2, 4))
    with pytest.raises(SteeringSpecError, match="does not know which row"):
        spec_delta(h, spec, vector)
