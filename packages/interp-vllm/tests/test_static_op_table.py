"""The static tier's op table, engine-free: each row its own op, and a full table refused.

The taps of `interp_vllm.static_taps` installed on a plain module (the hook body vLLM traces
into its compiled forward, here run eagerly): a batch whose rows carry every op, two levels
deep on some rows, must give each row exactly `interp_torch.spec_delta` of its own ops; a
step that needs more entries than the table holds is refused with the table's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from interp_core.steering import STATIC_OPS, SteeringSpec
from interp_core.testing.writes import example_spec
from interp_torch.steering import spec_delta, steering_encoder
from interp_vllm.site_kinds import Site
from interp_vllm.static_taps import OpTableFull, StaticTaps

WIDTH, KEY = 12, "resid_post.0"


@dataclass
class _Write:
    vector: torch.Tensor
    encoder: torch.Tensor | None


def _taps(entries: int) -> tuple[torch.nn.Module, StaticTaps]:
    module = torch.nn.Identity()
    site = Site(module, "post", lambda a, kw, out: out, lambda a, kw, out, delta: out + delta)
    taps = StaticTaps(capacity=16, slots=2, entries=entries)
    taps.allocate({KEY: ((WIDTH,), torch.float32, torch.device("cpu"))}, set(), {KEY})
    taps.install({KEY: site})
    return module, taps


def _fill(taps: StaticTaps, level: int, row: int, spec: SteeringSpec) -> None:
    write = _Write(torch.tensor(spec.values()), steering_encoder(spec))
    taps.fill(KEY, level, row, row + 1, None, write, spec)


def test_every_row_of_a_batch_gets_its_own_ops_exactly() -> None:
    module, taps = _taps(entries=32)
    h = torch.randn(len(STATIC_OPS) + 2, WIDTH, generator=torch.Generator().manual_seed(0))
    specs = [example_spec(op, KEY, WIDTH) for op in STATIC_OPS]
    for row, spec in enumerate(specs):
        _fill(taps, 0, row, spec)
    # Two levels on one row: the second op sees the row as the first left it.
    second = example_spec("swap", KEY, WIDTH)
    _fill(taps, 1, 0, second)
    out = module(h)  # the last two rows point at the neutral entry
    for row, spec in enumerate(specs):
        x = h[row : row + 1]
        want = x + spec_delta(x, spec, torch.tensor(spec.values()))
        if row == 0:  # (h + d1) + d2 here, h + (d1 + d2) in the graph: one rounding apart
            want = want + spec_delta(want, second, torch.tensor(second.values()))
            assert torch.allclose(out[:1], want, rtol=0, atol=1e-6)
        else:  # one op: the formula is spec_delta's, bit for bit
            assert torch.equal(out[row : row + 1], want), spec.op
    assert torch.equal(out[-2:], h[-2:])
    taps.writes[KEY].reset()
    assert torch.equal(module(h), h)  # a reset step steers nothing


def test_a_step_that_fills_the_table_is_refused_with_its_size() -> None:
    _, taps = _taps(entries=2)
    spec = example_spec("ablate", KEY, WIDTH)
    _fill(taps, 0, 0, spec)
    _fill(taps, 0, 1, spec)
    with pytest.raises(OpTableFull, match="holds 2 operations") as caught:
        _fill(taps, 0, 2, spec)
    assert "static_write_slots" in str(caught.value)
    taps.writes[KEY].reset()
    _fill(taps, 0, 2, spec)  # the next step starts with an empty table
