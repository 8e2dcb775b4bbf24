"""Does a padded batch give every row exactly what that row gives alone?

Three prompts of different lengths, batched with left padding and with right padding (the
attention mask passed, position ids following it), against each prompt run on its own. Compared
at the real positions only: the logits, and every point the family serves at its first, middle
and last layer (attention matrices on real query and key positions), within 1e-5.

Why a tolerance at all: a batch of three rows takes different matmul kernel paths (blocking,
vectorised remainders) than one row, so float32 sums round differently. That is not padding:
batching three copies of one unpadded prompt moves DeepSeek-V4's mlp_stream_collapse (values up
to 15) by 1.3e-5 too. So every comparison allows 1e-5 times the tensor's own scale (its largest
finite magnitude, at least 1): OLMo-2's mlp_act reaches 25 and was seen to move by 1.6e-5
(8 float32 ulps there) against an allowance of 2.5e-4. The logits get the same rule: Qwen3-Next's
gated delta-net layers, left-padded, moved logits of magnitude ~1.5 by 1.02e-5 (measured). A
padding bug (a shifted position, a pad token attended to) moves results by 1e-2 of scale or more.
Mask fill values in attention scores (the dtype's minimum) must match exactly.
"""

from __future__ import annotations

import pytest
import torch
from eager_helpers import PAD_TOKEN_ID, model

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_core.steering import SteeringSpec
from interp_core.testing.checks import served_addresses
from interp_testmodels.families import FAMILY_NAMES

_TOLERANCE = 1e-5
_PROMPTS = (
    "The capital of France is Paris, and the",
    "Hello! How are you?",
    "The quick brown fox jumps over the lazy dog while the cat sleeps",
)
_MATRICES = {"attn_scores", "attn_probs"}
# Families whose modelling code counts some position from the padded tensor's first column
# (Llama-4's NoPE query temperature, stepping every 4 positions in the tiny config; DeepSeek-V4's
# compressors, pooling windows of 2 and 4 tokens, pads included): the backend refuses left
# padding there rather than return rows that differ from themselves alone. Measured without the
# refusal: logits moved by 0.08-0.16 (Llama-4), by 3.3 at scale 4.6 (DeepSeek-V4).
_PADDED_INDEX_FAMILIES = {"llama4", "deepseek_v4"}


def _pad(rows: list[torch.Tensor], side: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), PAD_TOKEN_ID, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, span] = row
        mask[i, span] = 1
    return ids, mask


def _real(tensor: torch.Tensor, address: Address, span: slice) -> torch.Tensor:
    if address.name in _MATRICES:
        return tensor[:, :, span, span]
    return tensor[:, span]


def _assert_same(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    if not expected.is_floating_point():
        assert torch.equal(got, expected), what
        return
    # Masked attention entries hold the dtype's minimum; they must be masked in both.
    filled = expected.abs() >= torch.finfo(expected.dtype).max / 2
    assert torch.equal(got.abs() >= torch.finfo(got.dtype).max / 2, filled), f"{what}: mask"
    if bool(filled.all()):
        return
    scale = max(1.0, float(expected[~filled].abs().max()))
    worst = float((got[~filled] - expected[~filled]).abs().max())
    assert worst <= _TOLERANCE * scale, (
        f"{what}: max |difference| {worst:.3g} exceeds {_TOLERANCE} x scale {scale:.3g}"
    )


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_padded_batch_equals_each_row_alone(family: str, side: str) -> None:
    m = model(family)
    rows = [m.to_tokens(text)[0] for text in _PROMPTS]
    assert len({len(r) for r in rows}) == len(rows), "the prompts must differ in length"
    ids, mask = _pad(rows, side)
    points = served_addresses(m)
    if family in _PADDED_INDEX_FAMILIES and side == "left":
        with pytest.raises(CapabilityUnsupported, match="pad on the right"):
            m.run_with_cache(ids, points, attention_mask=mask)
        return
    batched = m.run_with_cache(ids, points, attention_mask=mask)
    width = ids.shape[1]
    for i, row in enumerate(rows):
        alone = m.run_with_cache(row.unsqueeze(0), points)
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        what = f"{family}, {side} padding, row {i}"
        logits = batched.output.logits[i : i + 1, span]
        _assert_same(logits, alone.output.logits, f"{what}: logits")
        for address in points:
            got = _real(batched[address][i : i + 1], address, span)
            _assert_same(got, alone[address], f"{what}: {address}")


@pytest.mark.parametrize("family", ["llama", "gpt2", "bloom", "qwen3_next", "deepseek_v4"])
def test_steering_positions_follow_each_rows_own_positions(family: str) -> None:
    # positions= counts each row's real tokens from 0, so a left-padded row is steered at the
    # same tokens as when it runs alone (right-padded where the family refuses left padding).
    m = model(family)
    rows = [m.to_tokens(text)[0] for text in _PROMPTS]
    side = "right" if family in _PADDED_INDEX_FAMILIES else "left"
    ids, mask = _pad(rows, side)
    stream = 1 if m.facts.n_streams > 1 else None
    address = Address("resid_post", 0, stream)
    spec = SteeringSpec(address, torch.ones(m.d_model), scale=3.0, positions=(2, 4))
    batched = m.run_with_cache(ids, [], attention_mask=mask, steering=spec).output.logits
    width = ids.shape[1]
    for i, row in enumerate(rows):
        alone = m.run_with_cache(row.unsqueeze(0), [], steering=spec).output.logits
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        real = batched[i : i + 1, span]
        _assert_same(real, alone, f"{family} row {i}: steered logits")
