"""The static tier's op table, engine-free: each row its own op, and a full table refused.

The taps of `interp_vllm.static_taps` installed on a plain module (the hook body vLLM traces
into its compiled forward, here run eagerly): a batch whose rows carry every op, two levels
deep on some rows, must give each row exactly `interp_torch.spec_delta` of its own ops; a
step that needs more entries than the table holds is refused with the table's size.
"""

from __future__ import annotations

import dataclasses
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


def test_a_patch_shares_one_level_and_overlapping_ops_stack_in_order() -> None:
    """A request's ops enter the table at the level their rows reach (`_fill_request`): a patch
    of six positions (six set ops) and an add over every position need two levels, not seven;
    a third op over one position is refused; an op none of whose positions runs takes no
    entry. The rows equal the ops applied in order, as the hooked backend applies them."""
    from interp_core import Patch
    from interp_core.facts import ModelFacts
    from interp_vllm.static_worker import _fill_request
    from interp_vllm.worker_state import Segment, Write

    module, taps = _taps(entries=32)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": WIDTH,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "intermediate_size": 24,
        "vocab_size": 32,
    }
    facts = ModelFacts.from_config(config)
    g = torch.Generator().manual_seed(1)
    values = torch.randn(6, WIDTH, generator=g)
    patch = Patch(KEY, values, positions=list(range(6))).to_specs(facts)
    steer = SteeringSpec(KEY, torch.randn(WIDTH, generator=g).tolist(), scale=0.5)
    late = Patch(KEY, values[:1], positions=[40]).to_specs(facts)  # not in this step
    ops = [Write.of(s) for s in [*patch, steer, *late]]
    rows = torch.arange(8)  # positions 0..7 of one request at rows 4..11 of the step
    segment = Segment(request=None, start=4, stop=12)
    _fill_request(taps, KEY, WIDTH, segment, rows, ops)
    assert taps.writes[KEY].used == len(patch) + 1
    h = torch.randn(16, WIDTH, generator=g)
    out = module(h)
    for row in range(16):
        x = h[row : row + 1]
        if 4 <= row < 12:
            position = row - 4
            if position < 6:
                whole = dataclasses.replace(patch[position], positions=None)
                x = x + spec_delta(x, whole, values[position])
            x = x + spec_delta(x, steer, torch.tensor(steer.values()))
        assert torch.allclose(out[row : row + 1], x, rtol=0, atol=1e-6), row
    assert torch.allclose(out[4:10, :], values + 0.5 * torch.tensor(steer.values()), atol=1e-5)
    taps.writes[KEY].reset()
    third = SteeringSpec(KEY, [1.0] * WIDTH, positions=[3])
    with pytest.raises(ValueError, match="3 operations cover one position"):
        _fill_request(taps, KEY, WIDTH, segment, rows, [*ops, Write.of(third)])
