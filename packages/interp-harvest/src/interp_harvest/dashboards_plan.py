"""What a dashboards job will hold and run, priced before any forward (`--dry-run`).

The job's memory is set by the SAEs' width and the settings, never by the corpus
(`interp_harvest.dashboards`): per SAE the running examples (`top_k` top tokens and
`intervals × samples_per_interval` interval samples, each a score, a token index and the
context's activations and ids per feature), the per-feature totals, histogram and interval
counts; while a batch is reduced, its dense features and their scores; for the logit tables,
`W_U` once in float32 and a block of features' logits over the vocabulary. The held state is
the bytes of the tensors the job allocates (a test holds the plan to them); a batch's share is
its features, their scores and one merge's sort, the largest of the transient tensors. The work
is two passes over the corpus, one forward per batch each. What the batch files will weigh
depends on the tokenizer's strings, so it is not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from interp_harvest.progress import format_bytes

__all__ = ["DashboardsPlan", "SAEPlan", "plan_dashboards"]

# Kept in step with interp_harvest.dashboards (where they are used).
LOGIT_FEATURES = 256  # features whose logits over the whole vocabulary are held at once


@dataclass(frozen=True)
class SAEPlan:
    name: str
    address: str
    d_sae: int
    examples: int  # bytes of the running top examples and interval samples
    counts: int  # totals, histogram and interval counts
    batch: int  # one batch's features and scores while it is reduced

    @property
    def held(self) -> int:
        return self.examples + self.counts


@dataclass(frozen=True)
class DashboardsPlan:
    contexts: int
    context_size: int
    batch_size: int
    saes: tuple[SAEPlan, ...]
    logit_bytes: int  # W_U in float32 and one block of features' logits (0 without logits)
    features_per_batch: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tokens(self) -> int:
        return self.contexts * self.context_size

    @property
    def forwards(self) -> int:
        return 2 * math.ceil(self.contexts / self.batch_size)

    @property
    def peak_bytes(self) -> int:
        """Every SAE's held state, one batch of each reduced, and the logit tables' block."""
        return sum(s.held + s.batch for s in self.saes) + self.logit_bytes

    def summary(self) -> str:
        lines = [
            f"{self.tokens:,} tokens = {self.contexts:,} contexts x {self.context_size} tokens; "
            f"two passes, {self.forwards:,} forwards of up to {self.batch_size} contexts",
        ]
        for sae in self.saes:
            files = math.ceil(sae.d_sae / self.features_per_batch)
            lines.append(
                f"  {sae.name} ({sae.address}): {sae.d_sae:,} features; held "
                f"{format_bytes(sae.held)} (examples {format_bytes(sae.examples)}), a batch "
                f"{format_bytes(sae.batch)}; {files:,} batch file{'' if files == 1 else 's'}"
            )
        if self.logit_bytes:
            lines.append(f"  logit tables: {format_bytes(self.logit_bytes)} (W_U and a block)")
        lines.append(
            f"memory held by the job (beside the model): about {format_bytes(self.peak_bytes)}"
        )
        lines.extend(self.notes)
        return "\n".join(lines)


def plan_dashboards(
    saes: list[tuple[str, Any]],
    *,
    contexts: int,
    context_size: int,
    batch_size: int,
    settings: Any,
    vocab_size: int,
    d_model: int,
    logits: bool,
    features_per_batch: int,
) -> DashboardsPlan:
    """The plan for `saes` (name, SAE) under `settings` (`DashboardSettings`)."""
    c = context_size
    kept = settings.top_k + settings.intervals * settings.samples_per_interval
    rows = batch_size * c
    plans = []
    for name, sae in saes:
        f = int(sae.d_sae)
        # Selection: score float64, token int64, values float32 and ids int32 per context
        examples = kept * f * (8 + 8 + 4 * c + 4 * c)
        # FeatureTotals (fired int64, total float64, max and min float32), the histogram and
        # the interval counts (int64)
        counts = f * (8 + 8 + 4 + 4) + f * settings.bins * 8 + settings.intervals * f * 8
        # the batch's features (float32), their float64 scores, and a stable sort of the running
        # k with them (values float64, indices int64)
        batch = rows * f * (4 + 8) + (settings.top_k + rows) * f * (8 + 8)
        plans.append(SAEPlan(name, str(sae.address), f, examples, counts, batch))
    block = min(LOGIT_FEATURES, max((p.d_sae for p in plans), default=0))
    logit_bytes = (vocab_size * d_model * 4 + block * vocab_size * 4) if logits else 0
    return DashboardsPlan(
        contexts, context_size, batch_size, tuple(plans), logit_bytes, features_per_batch
    )
