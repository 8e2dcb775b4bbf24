"""Did a backend's capture match the reference engine's, in direction and in magnitude?

One comparison is one (subject backend, reference engine, model, point, layer). It yields three
numbers, all computed in float64 on the two tensors as handed over:

- `max_abs`: the largest absolute difference of any entry.
- `rel_error`: `max_abs` divided by the largest absolute entry of the reference. Normalising by
  the reference's own peak (not entry by entry) keeps near-zero entries from dominating, and
  makes one tolerance fit points of very different scales (probabilities of 0-1, logits of
  tens). A tensor scaled by 1.01 has a relative error of about 0.01, whatever its direction.
- `cosine`: the cosine similarity per position (per token for `[batch, seq, ...]` points, per
  head and query row for attention matrices), and the minimum over positions. A wrong tensor,
  a permutation, or a sign flip shows here even where its norm happens to match.

A comparison passes only when the relative error is at most the tolerance AND the minimum
cosine is at least one minus it: a tensor scaled by 2 has a cosine of exactly 1 and fails, a
tensor with the right peak and the wrong direction fails too. Integer points (expert indices)
must be equal entry for entry. Anything non-finite fails (a masked attention score is not
"non-finite": masked entries are compared as a mask, see below), and so does a shape mismatch,
with both shapes in the reason.

Attention scores hold a fill value (the dtype's minimum, or -inf) where a key is masked. The
masks must agree exactly; then only the visible entries are compared.

Tolerances depend on the dtype and on how each side computes the tensor (`Kind`): engines that
wrap the same HF modules with eager attention agree to rounding; engines that process weights
(TransformerLens's folded, centred compatibility mode), re-implement the model
(`HookedTransformer`) or run their own kernels (vLLM) get a small allowance. The float32 numbers
come from measurements on this project's tiny models (see `TOLERANCES`); bfloat16 and float16
allowances follow from their machine epsilons (7.8e-3 and 9.8e-4) times a few roundings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import torch

from interp_core.points import Width, get_point
from interp_validator.records import Status

__all__ = [
    "ENGINE_KINDS",
    "SUBJECT_KINDS",
    "TOLERANCES",
    "Kind",
    "Metrics",
    "Status",  # re-exported from interp_validator.records
    "Tolerance",
    "Verdict",
    "compare",
    "metrics",
    "tolerance_for",
]


class Kind(StrEnum):
    """How an engine (or a subject backend) arrives at its tensors; sets its allowance."""

    WRAPPING = "wrapping"  # hooks on the HF modules themselves, eager attention
    PROCESSED = "processed"  # the HF modules with folded or centred weights
    REIMPLEMENTATION = "reimplementation"  # its own code for the architecture
    FUSED = "fused"  # its own kernels (fused attention, fused MLPs)


# Reference engines and subject backends by kind. A backend not listed is treated as FUSED: a
# third-party backend is not assumed to run the HF modules.
ENGINE_KINDS: Mapping[str, Kind] = MappingProxyType(
    {
        "hf": Kind.WRAPPING,
        "tl_bridge": Kind.WRAPPING,
        "nnsight": Kind.WRAPPING,
        "nnterp": Kind.WRAPPING,
        "tl_bridge_latest": Kind.WRAPPING,
        "nnsight_latest": Kind.WRAPPING,
        "tl_bridge_compat": Kind.PROCESSED,
        "tl_hooked": Kind.REIMPLEMENTATION,
    }
)
SUBJECT_KINDS: Mapping[str, Kind] = MappingProxyType(
    {"eager": Kind.WRAPPING, "vllm": Kind.FUSED, "vllm-static": Kind.FUSED}
)


@dataclass(frozen=True)
class Tolerance:
    """The largest relative error and smallest per-position cosine a comparison may show."""

    max_rel_error: float
    min_cosine: float
    basis: str  # where the number comes from, for the report

    def to_json(self) -> dict[str, Any]:
        return {
            "max_rel_error": self.max_rel_error,
            "min_cosine": self.min_cosine,
            "basis": self.basis,
        }


def _tol(rel: float, cos: float, basis: str) -> Tolerance:
    return Tolerance(rel, 1.0 - cos, basis)


# (dtype, kind) -> tolerance. float32 measured on the full sweep (32 families and SmolLM2, every
# point at the checked layers, against the eager backend): engines wrapping the HF modules agree
# to 0 on most points; the worst is 1.1e-6 relative (TransformerBridge's GPT-2 attention scores,
# where it recomputes q·kᵀ), 8.5e-7 next (its GPT-2 logits), nnsight/nnterp at most 3.9e-7:
# 5e-6 keeps a 4x margin. Processed weights (compatibility mode) reach 2.1e-6, HookedTransformer
# 2.3e-6 (SmolLM2 scores at layer 15), vLLM's CPU kernels 1e-6: 1e-5 for all three.
# Per dtype: the wrapping engines' tolerance, then the (rel, cos) the other three kinds share.
_BY_DTYPE = {
    "float32": (_tol(5e-6, 1e-6, "float32, same HF modules: rounding only"), 1e-5, 1e-5),
    "bfloat16": (_tol(2e-2, 1e-3, "bfloat16 (eps 7.8e-3), same HF modules"), 5e-2, 5e-3),
    "float16": (_tol(4e-3, 1e-4, "float16 (eps 9.8e-4), same HF modules"), 1e-2, 1e-3),
}
_BASES = {
    Kind.PROCESSED: "folded/centred weights",
    Kind.REIMPLEMENTATION: "re-implemented model",
    Kind.FUSED: "own kernels",
}


def _tolerances() -> dict[tuple[str, Kind], Tolerance]:
    table: dict[tuple[str, Kind], Tolerance] = {}
    for dtype, (wrapping, rel, cos) in _BY_DTYPE.items():
        table[dtype, Kind.WRAPPING] = wrapping
        for kind, basis in _BASES.items():
            table[dtype, kind] = _tol(rel, cos, f"{dtype}, {basis}")
    return table


TOLERANCES: Mapping[tuple[str, Kind], Tolerance] = MappingProxyType(_tolerances())


def tolerance_for(dtype: str, subject: str, engine: str) -> Tolerance:
    """The tolerance for comparing backend `subject` with reference `engine` in `dtype`.

    The looser of the two sides' allowances: an exact backend compared with a re-implementation
    gets the re-implementation's, and so does a fused backend compared with HF hooks.
    """
    kinds = (SUBJECT_KINDS.get(subject, Kind.FUSED), ENGINE_KINDS.get(engine, Kind.FUSED))
    try:
        candidates = [TOLERANCES[(dtype, kind)] for kind in kinds]
    except KeyError:
        known = sorted({d for d, _ in TOLERANCES})
        message = (
            f"no tolerance is defined for dtype {dtype!r}: the validator compares in "
            f"{', '.join(known)}; load both sides in one of those"
        )
        raise ValueError(message) from None
    return max(candidates, key=lambda t: (t.max_rel_error, -t.min_cosine))


@dataclass(frozen=True)
class Metrics:
    """The three numbers of one comparison (see the module docstring for their definitions)."""

    max_abs: float
    rel_error: float
    cosine: float


@dataclass(frozen=True)
class Verdict:
    """A status, the metrics when the tensors could be compared, and the reason when not pass."""

    status: Status
    metrics: Metrics | None = None
    reason: str | None = None


def _shape(tensor: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


def _masked(tensor: torch.Tensor) -> torch.Tensor:
    """Entries holding an attention mask's fill value (the dtype minimum, or -inf)."""
    if not tensor.is_floating_point():
        return torch.zeros_like(tensor, dtype=torch.bool)
    return tensor <= torch.finfo(tensor.dtype).min / 2


def _rows(tensor: torch.Tensor, attention: bool) -> torch.Tensor:
    """One row per position: [batch*seq, rest] for token-major points, [b*h*q, k] for attention."""
    if attention:
        return tensor.reshape(-1, tensor.shape[-1])
    if tensor.dim() < 2:
        return tensor.reshape(1, -1)
    return tensor.reshape(tensor.shape[0] * tensor.shape[1], -1)


def _min_cosine(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """The smallest per-row cosine; two all-zero rows agree (1), one all-zero row does not (0)."""
    dot = (ours * theirs).sum(-1)
    norms = ours.norm(dim=-1) * theirs.norm(dim=-1)
    both_zero = (ours.norm(dim=-1) == 0) & (theirs.norm(dim=-1) == 0)
    cosine = torch.where(norms > 0, dot / norms.clamp_min(torch.finfo(norms.dtype).tiny), 0.0)
    cosine = torch.where(both_zero, torch.ones_like(cosine), cosine)
    return float(cosine.min()) if cosine.numel() else 1.0


def metrics(ours: torch.Tensor, theirs: torch.Tensor, *, attention: bool = False) -> Metrics:
    """max abs, relative error and minimum per-position cosine of two same-shape finite tensors."""
    a = ours.detach().to(device="cpu", dtype=torch.float64)
    b = theirs.detach().to(device="cpu", dtype=torch.float64)
    diff = (a - b).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(b.abs().max()) if b.numel() else 0.0
    if scale > 0:
        rel = max_abs / scale
    else:
        rel = 0.0 if max_abs == 0 else math.inf
    return Metrics(max_abs, rel, _min_cosine(_rows(a, attention), _rows(b, attention)))


def _non_finite(tensor: torch.Tensor, who: str) -> str | None:
    if not tensor.is_floating_point():
        return None
    bad = ~torch.isfinite(tensor)
    if not bool(bad.any()):
        return None
    nans = int(torch.isnan(tensor).sum())
    infs = int(bad.sum()) - nans
    parts = [f"{nans} NaN" if nans else "", f"{infs} infinite" if infs else ""]
    what = " and ".join(p for p in parts if p)
    return (
        f"the {who} holds {what} entries of {tensor.numel()}: a NaN or overflow is never a "
        "match; find the first point where it appears"
    )


def _hint(m: Metrics, tol: Tolerance) -> str:
    if m.rel_error <= 10 * tol.max_rel_error and m.cosine >= 1 - 10 * (1 - tol.min_cosine):
        return (
            "barely out of tolerance: rounding from a different order of operations, or the "
            "first sign of a drift; compare other layers and engines before loosening it"
        )
    if m.cosine >= tol.min_cosine:
        return (
            "the direction agrees but the magnitude does not: look for a scale (a multiplier, "
            "an embedding scale, a norm gain, a softcap)"
        )
    if m.cosine < 0.5:
        return "the two engines hold different tensors: check the point mapping on this family"
    return "direction and magnitude both differ"


def compare(
    subject: Any,
    reference: Any,
    *,
    point: str,
    tolerance: Tolerance,
    centred: bool = False,
) -> Verdict:
    """Compare a subject's tensor with a reference engine's at one point; pass or fail with why.

    `centred=True` mean-centres both sides over the last axis first, for references that report
    a centred residual stream or centred logits (TransformerLens's compatibility mode); the
    reference is centred already, so only the subject changes beyond rounding.
    """
    spec = get_point(point)
    ours_shape, theirs_shape = _shape(subject), _shape(reference)
    if ours_shape != theirs_shape:
        reason = (
            f"shape {ours_shape} differs from the reference's {theirs_shape}: the two sides do "
            "not hold the same tensor (a flattened heads axis, a missing batch axis, or another "
            "point); fix the mapping or the layout before comparing values"
        )
        return Verdict(Status.FAIL, None, reason)
    ours = subject.detach().cpu()
    theirs = reference.detach().cpu()
    if ours.numel() == 0:
        return Verdict(Status.FAIL, None, "both tensors are empty: nothing was captured")
    attention = spec.width is Width.SCORES
    if spec.dtype_kind == "int":
        m = metrics(ours, theirs)
        if torch.equal(ours.to(torch.int64), theirs.to(torch.int64)):
            return Verdict(Status.PASS, m)
        wrong = int((ours.to(torch.int64) != theirs.to(torch.int64)).sum())
        reason = f"{wrong} of {ours.numel()} integer entries differ; indices must match exactly"
        return Verdict(Status.FAIL, m, reason)
    if centred:
        ours = ours.to(torch.float64)
        ours = ours - ours.mean(dim=-1, keepdim=True)
        theirs = theirs.to(torch.float64)
        theirs = theirs - theirs.mean(dim=-1, keepdim=True)
    if point == "attn_scores":
        mask_ours, mask_theirs = _masked(subject.detach().cpu()), _masked(theirs)
        if not torch.equal(mask_ours, mask_theirs):
            extra = int((mask_ours & ~mask_theirs).sum())
            missing = int((mask_theirs & ~mask_ours).sum())
            reason = (
                f"the attention masks differ: the subject masks {extra} entries the reference "
                f"shows and shows {missing} it masks (a sliding window or causal mask is off)"
            )
            return Verdict(Status.FAIL, None, reason)
        ours = ours.masked_fill(mask_ours, 0.0)
        theirs = theirs.masked_fill(mask_theirs, 0.0)
    for tensor, who in ((ours, "subject"), (theirs, "reference")):
        problem = _non_finite(tensor, who)
        if problem is not None:
            return Verdict(Status.FAIL, None, problem)
    m = metrics(ours, theirs, attention=attention)
    if m.rel_error <= tolerance.max_rel_error and m.cosine >= tolerance.min_cosine:
        return Verdict(Status.PASS, m)
    checks = []
    if m.rel_error > tolerance.max_rel_error:
        checks.append(
            f"relative error {m.rel_error:.3g} > {tolerance.max_rel_error:.3g} "
            f"(max abs {m.max_abs:.3g})"
        )
    if m.cosine < tolerance.min_cosine:
        checks.append(f"cosine {m.cosine:.9g} < {tolerance.min_cosine:.9g}")
    return Verdict(Status.FAIL, m, f"{'; '.join(checks)}: {_hint(m, tolerance)}")
