"""The static tier's per-row formula, engine-free: bit for bit the delta `steering_delta` takes.

`row_delta` under `row_parameters` is what vllm-static traces into its compiled forward; here
it meets `steering_delta` without any engine, for every op the op definitions list
(`interp_core.steering.OP_FIELDS`): equal bits for each op the formula carries
(`STATIC_OPS`), a refusal for the others, and exactly zero for a row nobody steers.
"""

from __future__ import annotations

import pytest
import torch

from interp_core.steering import ALL_OPS, STATIC_OPS, SteeringSpec
from interp_core.testing.writes import example_spec
from interp_torch.steering import compute_dtype, spec_delta, steering_encoder, steering_target
from interp_torch.steering_rows import (
    RowParameters,
    neutral_parameters,
    row_delta,
    row_parameters,
)

WIDTH = 16


def _rows(dtype: torch.dtype) -> torch.Tensor:
    # Rows of varied size, so a cap's bounds bite on some and not others, and one all-zero row.
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(6, WIDTH, generator=g, dtype=torch.float64)
    rows = rows * torch.tensor([[0.1], [1.0], [3.0], [0.5], [10.0], [0.0]], dtype=torch.float64)
    return rows.to(dtype)


def _columns(parameters: RowParameters, n: int, dtype: torch.dtype) -> RowParameters:
    """Each parameter as the graph holds it: vectors [n, width], scalars [n, 1]."""
    column = torch.ones(n, 1, dtype=dtype)
    vectors = [v.expand(n, -1) for v in parameters[:2]]
    return RowParameters(*vectors, *(column * x for x in parameters[2:]))


def _static_delta(h: torch.Tensor, spec: SteeringSpec) -> torch.Tensor:
    dtype = compute_dtype(h.dtype)
    vector = torch.tensor(spec.values(), dtype=torch.float32)
    parameters = row_parameters(
        spec, vector, dtype, encoder=steering_encoder(spec), target=steering_target(spec)
    )
    return row_delta(h.to(dtype), _columns(parameters, h.shape[0], dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("op", ALL_OPS)
def test_the_row_formula_is_the_delta_bit_for_bit(op: str, dtype: torch.dtype) -> None:
    spec = example_spec(op, "resid_post.0", WIDTH)
    h = _rows(dtype)
    if op not in STATIC_OPS:
        # The compiled taps do not carry it; vLLM refuses it before a request is sent.
        with pytest.raises(ValueError, match="unknown steering op"):
            _static_delta(h, spec)
        return
    want = spec_delta(h, spec, torch.tensor(spec.values(), dtype=torch.float32))
    got = _static_delta(h, spec)
    assert got.dtype == want.dtype == compute_dtype(dtype)
    assert torch.equal(got, want), (op, float((got - want).abs().max()))
    assert bool(want[:-1].abs().sum(dim=-1).gt(0).any()), "the example must change some row"


def test_a_row_nobody_steers_gets_exactly_zero() -> None:
    h = _rows(torch.float32)
    neutral = _columns(neutral_parameters(WIDTH, torch.float32), h.shape[0], torch.float32)
    assert torch.equal(row_delta(h, neutral), torch.zeros_like(h))


def test_rows_of_one_batch_under_different_ops_each_get_their_own_delta() -> None:
    # The compiled graph gathers one table entry per row: a batch mixing every op (and a
    # neutral row) must give each row exactly the delta its op alone gives it.
    h = _rows(torch.float32)
    specs = [example_spec(op, "resid_post.0", WIDTH) for op in STATIC_OPS]
    entries = [
        row_parameters(
            s,
            torch.tensor(s.values()),
            torch.float32,
            encoder=steering_encoder(s),
            target=steering_target(s),
        )
        for s in specs
    ]
    entries.append(neutral_parameters(WIDTH, torch.float32))
    rows = torch.cat([h] * 2)[: len(entries)]
    stacked = RowParameters(
        *(
            torch.stack([torch.as_tensor(e[i], dtype=torch.float32) for e in entries])
            if i < 2
            else torch.tensor([[float(e[i])] for e in entries])
            for i in range(len(RowParameters._fields))
        )
    )
    got = row_delta(rows, stacked)
    for index, spec in enumerate(specs):
        want = spec_delta(rows[index : index + 1], spec, torch.tensor(spec.values()))
        assert torch.equal(got[index : index + 1], want), spec.op
    assert torch.equal(got[-1], torch.zeros(WIDTH))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_patch_of_some_channels_sets_them_bit_for_bit_and_leaves_the_rest(
    dtype: torch.dtype,
) -> None:
    # A head slice (channels 4..7) and scattered neurons: the graph holds the values scattered
    # to the row's width and a 0/1 mask; only the listed channels may change.
    h = _rows(dtype)
    for channels in ((4, 5, 6, 7), (0, 9, 15)):
        values = [0.5 + i for i in range(len(channels))]
        spec = SteeringSpec("resid_post.0", values, "set", channels=channels)
        vector = torch.tensor(values)
        want = spec_delta(h, spec, vector)
        cdtype = compute_dtype(dtype)
        parameters = row_parameters(spec, vector, cdtype, width=WIDTH)
        got = row_delta(h.to(cdtype), _columns(parameters, h.shape[0], cdtype))
        assert torch.equal(got, want), channels
        untouched = [c for c in range(WIDTH) if c not in channels]
        assert torch.equal(got[:, untouched], torch.zeros(h.shape[0], len(untouched)).to(cdtype))
        # h + (v − h): v up to one rounding of the compute dtype (as on every backend).
        written = (h.to(cdtype) + got)[:, list(channels)]
        assert torch.allclose(written, vector.to(cdtype).expand_as(written), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="8-wide patch cannot write a 16-wide row"):
        row_parameters(
            SteeringSpec("resid_post.0", [1.0] * 8, "set"),
            torch.ones(8),
            torch.float32,
            width=WIDTH,
        )


def test_the_sizer_prices_as_many_scalars_as_the_formula_holds() -> None:
    from interp_core.steering import STATIC_OP_SCALARS
    from interp_torch.steering_rows import SCALARS

    assert len(SCALARS) == STATIC_OP_SCALARS == len(RowParameters._fields) - 2
