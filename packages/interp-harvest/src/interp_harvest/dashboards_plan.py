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
from dataclasses import dataclass
from typing import Any

from interp_harvest.progress import format_bytes

__all__ = ["LOGIT_FEATURES", "DashboardsPlan"]

# Features whose logits over the whole vocabulary are held at once (interp_harvest.dashboards
# computes them in blocks of this many; the plan prices one block).
LOGIT_FEATURES = 256


@dataclass(frozen=True)
class DashboardsPlan:
    """A dashboards job before it runs: `saes` (name, address, d_sae), the corpus's contexts
    and the job's settings (`DashboardSettings`); the bytes are computed from them."""

    saes: tuple[tuple[str, str, int], ...]
    contexts: int
    context_size: int
    batch_size: int
    settings: Any
    unembedding: tuple[int, int] | None  # (vocab, d_model) read for the logit tables, or None
    features_per_batch: int = 128

    @property
    def tokens(self) -> int:
        return self.contexts * self.context_size

    @property
    def points(self) -> tuple[str, ...]:
        """The points the SAEs read, each captured once."""
        return tuple(dict.fromkeys(address for _, address, _ in self.saes))

    @property
    def forwards(self) -> int:
        return 2 * math.ceil(self.contexts / self.batch_size)

    def examples_bytes(self, d_sae: int) -> int:
        """The running top examples and interval samples: per kept token and feature a score
        (float64), a token index (int64) and the context's activations (float32) and ids
        (int32)."""
        s = self.settings
        kept = s.top_k + s.intervals * s.samples_per_interval
        return kept * d_sae * (8 + 8 + 8 * self.context_size)

    def counts_bytes(self, d_sae: int) -> int:
        """Per-feature totals (fired int64, total float64, max and min float32), the histogram
        and the interval counts (int64)."""
        s = self.settings
        return d_sae * (8 + 8 + 4 + 4) + d_sae * s.bins * 8 + s.intervals * d_sae * 8

    def batch_bytes(self, d_sae: int) -> int:
        """One batch while it is reduced: its features (float32) and their scores (float64),
        and a stable sort of the running top-k with them (values float64, indices int64)."""
        rows = self.batch_size * self.context_size
        return rows * d_sae * (4 + 8) + (self.settings.top_k + rows) * d_sae * (8 + 8)

    @property
    def logit_bytes(self) -> int:
        """W_U in float32 and one block of features' logits over the vocabulary (0: none)."""
        if self.unembedding is None:
            return 0
        vocab, width = self.unembedding
        block = min(LOGIT_FEATURES, max((d for _, _, d in self.saes), default=0))
        return vocab * width * 4 + block * vocab * 4

    @property
    def peak_bytes(self) -> int:
        """Every SAE's held state, one batch of each reduced, and the logit tables' block."""
        held = sum(
            self.examples_bytes(d) + self.counts_bytes(d) + self.batch_bytes(d)
            for _, _, d in self.saes
        )
        return held + self.logit_bytes

    def summary(self) -> str:
        lines = [
            f"{self.tokens:,} tokens = {self.contexts:,} contexts x {self.context_size} tokens; "
            f"two passes, {self.forwards:,} forwards of up to {self.batch_size} contexts",
        ]
        for name, address, d_sae in self.saes:
            examples = self.examples_bytes(d_sae)
            held = examples + self.counts_bytes(d_sae)
            files = math.ceil(d_sae / self.features_per_batch)
            lines.append(
                f"  {name} ({address}): {d_sae:,} features; held {format_bytes(held)} (examples "
                f"{format_bytes(examples)}), a batch {format_bytes(self.batch_bytes(d_sae))}; "
                f"{files:,} batch file{'' if files == 1 else 's'}"
            )
        if self.logit_bytes:
            lines.append(f"  logit tables: {format_bytes(self.logit_bytes)} (W_U and a block)")
        lines.append(
            f"memory held by the job (beside the model): about {format_bytes(self.peak_bytes)}"
        )
        return "\n".join(lines)
