"""Does the scoring catch what it exists to catch, and let exact copies through?

Each test builds a reference tensor shaped like a real capture ([1, seq, d_model] with O(1)
values, or attention [1, heads, q, k] with a causal mask) and a deliberately broken copy:
scaled, positions shuffled, sign flipped, NaN, wrong shape. Every broken copy must fail with a
reason; the exact copy must pass with zero error.
"""

from __future__ import annotations

import math

import pytest
import torch

from interp_validator.records import Status
from interp_validator.scoring import (
    ENGINE_KINDS,
    TOLERANCES,
    Kind,
    Tolerance,
    compare,
    metrics,
    tolerance_for,
)

EXACT = tolerance_for("float32", "eager", "hf")
LOOSE = tolerance_for("float32", "eager", "tl_hooked")


def _resid(seed: int = 0, seq: int = 13, width: int = 64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(1, seq, width, generator=generator) * 2.0


def _scores(seq: int = 6, heads: int = 2) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(1, heads, seq, seq, generator=generator)
    causal = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    return scores.masked_fill(causal, torch.finfo(torch.float32).min)


def test_an_exact_copy_passes_with_zero_error() -> None:
    reference = _resid()
    verdict = compare(reference.clone(), reference, point="resid_post", tolerance=EXACT)
    assert verdict.status is Status.PASS and verdict.reason is None
    assert verdict.metrics is not None
    assert verdict.metrics.max_abs == 0.0 and verdict.metrics.rel_error == 0.0
    assert verdict.metrics.cosine == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("factor", [2.0, 0.22, 1.001])
def test_a_scaled_tensor_fails_even_at_cosine_one(factor: float) -> None:
    reference = _resid()
    verdict = compare(reference * factor, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL
    assert verdict.metrics is not None
    assert verdict.metrics.cosine == pytest.approx(1.0, abs=1e-12)
    assert verdict.metrics.rel_error == pytest.approx(abs(factor - 1.0), rel=1e-3)  # float32
    assert "magnitude" in (verdict.reason or "")


def test_shuffled_positions_fail() -> None:
    reference = _resid()
    shuffled = reference[:, torch.randperm(reference.shape[1], generator=torch.Generator())]
    assert not torch.equal(shuffled, reference)
    verdict = compare(shuffled, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL
    assert verdict.metrics is not None and verdict.metrics.cosine < 0.5


def test_a_sign_flip_fails() -> None:
    reference = _resid()
    verdict = compare(-reference, reference, point="mlp_out", tolerance=LOOSE)
    assert verdict.status is Status.FAIL
    assert verdict.metrics is not None
    assert verdict.metrics.cosine == pytest.approx(-1.0)
    assert verdict.metrics.rel_error == pytest.approx(2.0)


def test_a_sign_flip_at_one_small_position_fails_on_cosine() -> None:
    """A position whose values are tiny next to the tensor's peak escapes the relative error
    (normalised by the peak) but not the per-position cosine."""
    reference = _resid()
    reference[0, 3] *= 1e-7
    broken = reference.clone()
    broken[0, 3] *= -1
    verdict = compare(broken, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.metrics is not None
    assert verdict.metrics.rel_error < LOOSE.max_rel_error
    assert verdict.status is Status.FAIL and "cosine" in (verdict.reason or "")


@pytest.mark.parametrize("where", ["subject", "reference"])
def test_nan_fails(where: str) -> None:
    reference = _resid()
    subject = reference.clone()
    target = subject if where == "subject" else reference
    target[0, 2, 5] = math.nan
    verdict = compare(subject, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL
    assert f"the {where} holds 1 NaN" in (verdict.reason or "")


def test_infinity_fails() -> None:
    reference = _resid()
    subject = reference.clone()
    subject[0, 0, 0] = math.inf
    verdict = compare(subject, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL and "infinite" in (verdict.reason or "")


def test_a_shape_mismatch_fails_with_both_shapes() -> None:
    reference = _resid()
    verdict = compare(reference[..., :32], reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL and verdict.metrics is None
    assert "(1, 13, 32)" in (verdict.reason or "") and "(1, 13, 64)" in (verdict.reason or "")
    unflattened = reference.view(1, 13, 4, 16)
    verdict = compare(unflattened, reference, point="resid_post", tolerance=LOOSE)
    assert verdict.status is Status.FAIL and "shape" in (verdict.reason or "")


def test_noise_within_tolerance_passes_and_beyond_fails() -> None:
    reference = _resid()
    peak = float(reference.abs().max())
    small = reference + 0.1 * EXACT.max_rel_error * peak
    assert compare(small, reference, point="resid_post", tolerance=EXACT).status is Status.PASS
    large = reference + 10 * EXACT.max_rel_error * peak
    assert compare(large, reference, point="resid_post", tolerance=EXACT).status is Status.FAIL


def test_attention_scores_compare_masks_exactly_and_visible_entries_by_value() -> None:
    reference = _scores()
    same = compare(reference.clone(), reference, point="attn_scores", tolerance=EXACT)
    assert same.status is Status.PASS
    # -inf instead of the dtype minimum is the same mask.
    infinite = reference.masked_fill(reference <= -1e30, -math.inf)
    assert compare(infinite, reference, point="attn_scores", tolerance=EXACT).status is Status.PASS
    # A window one token wider shows an entry the reference masks.
    wider = reference.clone()
    wider[0, 0, 2, 3] = 0.5
    verdict = compare(wider, reference, point="attn_scores", tolerance=EXACT)
    assert verdict.status is Status.FAIL and "masks differ" in (verdict.reason or "")
    # A wrong scale on the visible entries fails like any other point.
    scaled = reference.clone()
    visible = reference > -1e30
    scaled[visible] = scaled[visible] * 1.125
    assert compare(scaled, reference, point="attn_scores", tolerance=LOOSE).status is Status.FAIL


def test_attention_cosine_is_per_query_row() -> None:
    reference = torch.softmax(_scores(), dim=-1)
    swapped = reference.clone()
    swapped[0, 1] = reference[0, 0]  # head 1 reads head 0's pattern
    verdict = compare(swapped, reference, point="attn_probs", tolerance=LOOSE)
    assert verdict.status is Status.FAIL


def test_integer_points_must_match_exactly() -> None:
    indices = torch.tensor([[[0, 3], [1, 2], [2, 0]]])
    verdict = compare(indices.clone(), indices, point="expert_indices", tolerance=LOOSE)
    assert verdict.status is Status.PASS


def test_integer_points_fail_on_any_difference() -> None:
    indices = torch.tensor([[[0, 3], [1, 2], [2, 0]]])
    flipped = indices.flip(-1)  # the same experts, in the wrong (not best-first) order
    verdict = compare(flipped, indices, point="expert_indices", tolerance=LOOSE)
    assert verdict.status is Status.FAIL and "6 of 6" in (verdict.reason or "")


def test_centred_references_compare_the_mean_centred_subject() -> None:
    raw = _resid() + 0.7
    centred = raw - raw.mean(dim=-1, keepdim=True)
    verdict = compare(raw, centred, point="resid_post", tolerance=LOOSE, centred=True)
    assert verdict.status is Status.PASS
    assert compare(raw, centred, point="resid_post", tolerance=LOOSE).status is Status.FAIL


def test_zero_rows_agree_only_with_zero_rows() -> None:
    zeros = torch.zeros(1, 3, 8)
    assert metrics(zeros, zeros).cosine == 1.0
    one = zeros.clone()
    one[0, 1, 0] = 1.0
    assert metrics(one, zeros).cosine == 0.0
    assert metrics(one, zeros).rel_error == math.inf


def test_tolerances_take_the_looser_side_and_refuse_unknown_dtypes() -> None:
    assert tolerance_for("float32", "eager", "hf") == TOLERANCES[("float32", Kind.WRAPPING)]
    assert tolerance_for("float32", "vllm", "hf") == TOLERANCES[("float32", Kind.FUSED)]
    assert (
        tolerance_for("float32", "eager", "tl_hooked")
        == TOLERANCES[("float32", Kind.REIMPLEMENTATION)]
    )
    assert tolerance_for("bfloat16", "eager", "nnsight").max_rel_error > 1e-3
    with pytest.raises(ValueError, match="no tolerance is defined for dtype 'int8'"):
        tolerance_for("int8", "eager", "hf")
    assert set(ENGINE_KINDS) >= {"hf", "tl_bridge", "tl_bridge_compat", "tl_hooked"}
    for tol in TOLERANCES.values():
        assert isinstance(tol, Tolerance) and 0 < tol.max_rel_error < 1 < tol.min_cosine + 1


def _peaking_at(peak: float) -> torch.Tensor:
    reference = _resid(seed=7).to(torch.float64)
    return reference * (peak / float(reference.abs().max()))


def test_a_tiny_reference_is_judged_relative_to_its_own_peak() -> None:
    # Peak 1e-3: an error 100x the relative tolerance is only 0.1x it in absolute terms, so an
    # absolute check (even one against 10x the tolerance) would pass what must fail.
    reference = _peaking_at(1e-3)
    subject = reference * (1 + 100 * EXACT.max_rel_error)  # right direction, wrong magnitude
    verdict = compare(subject, reference, point="resid_post", tolerance=EXACT)
    assert verdict.status is Status.FAIL
    assert verdict.metrics is not None
    assert verdict.metrics.rel_error == pytest.approx(100 * EXACT.max_rel_error, rel=1e-6)
    assert verdict.metrics.max_abs < EXACT.max_rel_error  # tiny in absolute terms
    assert "relative error" in verdict.reason


def test_a_large_reference_within_half_the_tolerance_passes() -> None:
    # Peak 1e3: half the relative tolerance is 500x it in absolute terms; an absolute check
    # would fail what the relative one passes.
    reference = _peaking_at(1e3)
    subject = reference * (1 + 0.5 * EXACT.max_rel_error)
    verdict = compare(subject, reference, point="resid_post", tolerance=EXACT)
    assert verdict.status is Status.PASS, verdict.reason
    assert verdict.metrics is not None
    assert verdict.metrics.rel_error == pytest.approx(0.5 * EXACT.max_rel_error, rel=1e-6)
    assert verdict.metrics.max_abs > 100 * EXACT.max_rel_error
