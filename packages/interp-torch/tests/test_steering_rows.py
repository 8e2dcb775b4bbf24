"""The static tier's per-row formula, engine-free: bit for bit the delta `steering_delta` takes.

`row_delta` under `row_parameters` is what vllm-static traces into its compiled forward; here
it meets `steering_delta` without any engine, for every op the op definitions list
(`interp_core.steering.OP_FIELDS`): equal bits for each op the formula carries
(`STATIC_OPS`), a refusal for the others, and exactly zero for a row nobody steers.
"""

from __future__ import annotations

import pytest
import torch

from interp_core.steering import ALL_OPS, STATIC_OPS
from interp_core.testing.writes import example_spec
from interp_torch.steering import compute_dtype, steering_delta, steering_encoder
from interp_torch.steering_rows import neutral_parameters, row_delta, row_parameters

WIDTH = 16


def _rows(dtype: torch.dtype) -> torch.Tensor:
    # Rows of varied size, so a cap's bounds bite on some and not others, and one all-zero row.
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(6, WIDTH, generator=g, dtype=torch.float64)
    rows = rows * torch.tensor([[0.1], [1.0], [3.0], [0.5], [10.0], [0.0]], dtype=torch.float64)
    return rows.to(dtype)


def _static_delta(h: torch.Tensor, spec: object) -> torch.Tensor:
    dtype = compute_dtype(h.dtype)
    vector = torch.tensor(spec.values(), dtype=torch.float32)  # type: ignore[attr-defined]
    add, unit, coef, low, high = row_parameters(
        vector,
        spec.op,  # type: ignore[attr-defined]
        dtype,
        scale=spec.scale,  # type: ignore[attr-defined]
        lower=spec.min,  # type: ignore[attr-defined]
        upper=spec.max,  # type: ignore[attr-defined]
    )
    n = h.shape[0]
    column = torch.ones(n, 1, dtype=dtype)
    return row_delta(
        h.to(dtype),
        add.expand(n, -1),
        unit.expand(n, -1),
        column * coef,
        column * low,
        column * high,
    )


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
    want = steering_delta(
        h,
        torch.tensor(spec.values(), dtype=torch.float32),
        op,
        scale=spec.scale,
        lower=spec.min,
        upper=spec.max,
        encoder=steering_encoder(spec),
        bias=spec.bias,
        threshold=spec.threshold,
    )
    got = _static_delta(h, spec)
    assert got.dtype == want.dtype == compute_dtype(dtype)
    assert torch.equal(got, want), (op, float((got - want).abs().max()))
    assert bool(want[:-1].abs().sum(dim=-1).gt(0).any()), "the example must change some row"


def test_a_row_nobody_steers_gets_exactly_zero() -> None:
    h = _rows(torch.float32)
    add, unit, coef, low, high = neutral_parameters(WIDTH, torch.float32)
    n = h.shape[0]
    column = torch.ones(n, 1)
    delta = row_delta(
        h, add.expand(n, -1), unit.expand(n, -1), column * coef, column * low, column * high
    )
    assert torch.equal(delta, torch.zeros_like(h))
