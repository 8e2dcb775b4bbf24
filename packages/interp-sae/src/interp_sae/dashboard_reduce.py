"""The streaming reductions behind feature dashboards: everything per feature, nothing per token.

A dashboard job sees the corpus one forward batch at a time, as dense feature activations
`[batch, context, d_sae]`, and keeps only what is bounded by the SAE's width:

- `FeatureTotals`: firing count, sum, max and smallest non-zero activation per feature (float64
  sums), and the number of tokens considered.
- `Selection`: the `k` best tokens per feature by a score, each with its context's token ids and
  the feature's activations over that context (the dashboard's window). Merging a batch is a
  sort of the running `k` and the batch's own best `k`, so memory is `k × d_sae × context`
  whatever the corpus size; of equal scores the earlier token wins. Top activations score by
  the activation; quantile samples score by a pseudo-random key per token (`sample_keys`), so
  "the k smallest keys among the tokens in an interval" is a uniform sample that is the same in
  a one-shot computation, in any batching, and in every run with the same seed.
- `histogram_counts` / `interval_index`: bin and interval of each activation from the range the
  first pass found; a `[d_sae, bins]` count table is summed over batches.
- `FeaturePasses`: one SAE's two passes built from the above, and their state as named tensors.
  It lives here, beside the SAE, because it runs in two places: in the harvest job's process,
  and inside vLLM's workers (`interp_vllm.reduce_worker`), where the features are encoded next
  to the capture and only these reductions leave the worker. One class for both is what makes
  the two give the same dashboards.

A feature "fires" on a token where its activation is > 0 (every SAE activation interp-sae
implements is non-negative). Tokens the job ignores (BOS, EOS, padding by default) are given
activation 0 before any reduction and do not count as considered tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from interp_core.errors import InvalidArgument

__all__ = [
    "FeaturePasses",
    "FeatureTotals",
    "Selection",
    "encode_batch",
    "histogram_counts",
    "histogram_range",
    "interval_index",
    "sample_keys",
]

_NO_SCORE = float("-inf")


@dataclass
class FeatureTotals:
    """Per-feature totals over the considered tokens (first pass)."""

    d_sae: int
    tokens: int = 0
    fired: torch.Tensor = field(init=False)
    total: torch.Tensor = field(init=False)
    max: torch.Tensor = field(init=False)
    min_fired: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.fired = torch.zeros(self.d_sae, dtype=torch.int64)
        self.total = torch.zeros(self.d_sae, dtype=torch.float64)
        self.max = torch.zeros(self.d_sae, dtype=torch.float32)
        self.min_fired = torch.full((self.d_sae,), float("inf"), dtype=torch.float32)

    def add(self, acts: torch.Tensor, considered: int) -> None:
        """Merge `[tokens, d_sae]` float32 activations (ignored tokens already zero)."""
        firing = acts > 0
        self.tokens += considered
        self.fired += firing.sum(0)
        self.total += acts.sum(0, dtype=torch.float64)
        if acts.shape[0]:
            self.max = torch.maximum(self.max, acts.max(0).values)
            masked = torch.where(firing, acts, torch.full_like(acts, float("inf")))
            self.min_fired = torch.minimum(self.min_fired, masked.min(0).values)

    @property
    def density(self) -> torch.Tensor:
        """Fraction of considered tokens on which each feature fires."""
        return self.fired.to(torch.float64) / max(self.tokens, 1)

    @property
    def mean_when_firing(self) -> torch.Tensor:
        """Mean activation over the tokens where the feature fires (0 for a dead feature)."""
        return self.total / self.fired.clamp(min=1).to(torch.float64)

    @property
    def mean(self) -> torch.Tensor:
        """Mean activation over every considered token."""
        return self.total / max(self.tokens, 1)


@dataclass
class Selection:
    """The `k` highest-scoring tokens per feature, with their windows.

    `score [k, d_sae]` (−inf where fewer than `k` tokens qualified), `token [k, d_sae]` (global
    token index: context index × context size + position), `values [k, d_sae, context]` (the
    feature's activations over the token's context) and `ids [k, d_sae, context]` (that
    context's token ids). Rows are sorted best first after every merge.
    """

    k: int
    d_sae: int
    context_size: int
    score: torch.Tensor = field(init=False)
    token: torch.Tensor = field(init=False)
    values: torch.Tensor = field(init=False)
    ids: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        k, f, c = self.k, self.d_sae, self.context_size
        self.score = torch.full((k, f), _NO_SCORE, dtype=torch.float64)
        self.token = torch.full((k, f), -1, dtype=torch.int64)
        self.values = torch.zeros((k, f, c), dtype=torch.float32)
        self.ids = torch.zeros((k, f, c), dtype=torch.int32)

    def add(
        self, score: torch.Tensor, acts: torch.Tensor, ids: torch.Tensor, first_token: int
    ) -> None:
        """Merge a batch: `score [batch·context, d_sae]` float64 (−inf: not eligible), `acts
        [batch, context, d_sae]`, `ids [batch, context]`; `first_token` is the global index of
        the batch's first token."""
        _, context, width = acts.shape
        kk = min(self.k, score.shape[0])
        # Stable sorts, not topk: equal scores (a text that repeats gives bit-equal activations)
        # keep the earlier token, so the choice does not depend on the batching.
        best, flat = score.sort(dim=0, descending=True, stable=True)
        best, flat = best[:kk], flat[:kk]
        row = flat // context
        features = torch.arange(width).unsqueeze(0)
        windows = acts.permute(0, 2, 1)[row, features]  # [kk, d_sae, context]
        window_ids = ids.to(torch.int32)[row]  # [kk, d_sae, context]
        merged = torch.cat([self.score, best])  # the running tokens all come first
        self.score, pick = merged.sort(dim=0, descending=True, stable=True)
        self.score, pick = self.score[: self.k], pick[: self.k]
        self.token = torch.cat([self.token, flat + first_token]).gather(0, pick)
        wide = pick.unsqueeze(-1).expand(-1, -1, context)
        self.values = torch.cat([self.values, windows]).gather(0, wide)
        self.ids = torch.cat([self.ids, window_ids]).gather(0, wide)

    def entries(self, feature: int) -> list[tuple[float, int, torch.Tensor, torch.Tensor]]:
        """(score, token, values, ids) of one feature's selected tokens, best first."""
        keep = self.score[:, feature] > _NO_SCORE
        return [
            (
                float(self.score[i, feature]),
                int(self.token[i, feature]),
                self.values[i, feature],
                self.ids[i, feature],
            )
            for i in torch.nonzero(keep).flatten().tolist()
        ]


def sample_keys(seed: int, first_context: int, contexts: int, context_size: int) -> torch.Tensor:
    """A pseudo-random key in [0, 1) per token of `contexts` consecutive contexts, float64.

    Each context's keys come from a generator seeded by (seed, context index) alone, so a token's
    key does not depend on how contexts were batched.
    """
    rows = []
    for index in range(first_context, first_context + contexts):
        generator = torch.Generator().manual_seed(seed * 1_000_003 + index)
        rows.append(torch.rand(context_size, generator=generator, dtype=torch.float64))
    return torch.stack(rows).reshape(-1)


def histogram_range(low: torch.Tensor, high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The histogram's edges per feature from the smallest and largest value (float32).

    An empty range is widened by 1 on each side, as `torch.histc` widens it; a feature that
    never fired (low = +inf) gets [0, 1] and no counts.
    """
    low, high = low.clone(), high.clone()
    empty = ~torch.isfinite(low)
    low[empty], high[empty] = 0.0, 1.0
    same = low == high
    low[same] -= 1.0
    high[same] += 1.0
    return low, high


def histogram_counts(
    values: torch.Tensor,
    counted: torch.Tensor | None,
    low: torch.Tensor,
    high: torch.Tensor,
    bins: int,
) -> torch.Tensor:
    """`[d_sae, bins]` int64 counts of `values [tokens, d_sae]` where `counted` (None: all).

    Bin of a value: int((x − low) / (high − low) · bins), the last bin closed on the right —
    `torch.histc`'s rule, in float32 as histc computes it, so the counts equal histc's over the
    same values. A value outside [low, high] (a second pass on a backend that is not bit-exact
    between runs) is clamped into the end bin rather than dropped. Counted with `bincount` over
    (feature, bin) cells: an order of magnitude faster than `index_add_` of ones.
    """
    width = values.shape[1]
    position = ((values - low) / (high - low) * bins).to(torch.int64).clamp_(0, bins - 1)
    position += torch.arange(width).unsqueeze(0) * bins
    chosen = position.reshape(-1) if counted is None else position[counted]
    return torch.bincount(chosen, minlength=width * bins).reshape(width, bins)


def interval_index(values: torch.Tensor, maximum: torch.Tensor, intervals: int) -> torch.Tensor:
    """Which of `intervals` equal slices of (0, max] each firing value falls in (0 = lowest).

    Slice j is [max·j/n, max·(j+1)/n); the top one also holds max itself. Computed in float64.
    """
    scaled = values.to(torch.float64) / maximum.to(torch.float64).clamp(min=1e-30) * intervals
    return scaled.to(torch.int64).clamp(0, intervals - 1)


def encode_batch(
    sae: Any, rows: torch.Tensor, ids: torch.Tensor, ignored: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense activations `[batch, context, d_sae]` float32 of `rows` captured at the SAE's
    point over the contexts `ids [batch, context]`, with the `ignored` token ids' positions set
    to 0, and the mask of the tokens kept."""
    keep = ~torch.isin(ids, ignored.to(ids.device))
    rows = rows.detach().to("cpu", torch.float32).reshape(*ids.shape, -1)
    acts = sae.encode(rows.to(sae.device)).to("cpu", torch.float32)
    return acts * keep.unsqueeze(-1), keep


# The state of each pass as named tensors (a checkpoint's file, a worker's answer).
_TOTALS = ("fired", "total", "max", "min_fired")
_SELECTION = ("score", "token", "values", "ids")
_SECOND = ("histogram", "interval_tokens", "hist_low", "hist_high")


@dataclass
class FeaturePasses:
    """One SAE's dashboard reductions over a corpus, in two passes.

    The first pass (`add_first`) finds each feature's totals and top tokens; `start_second`
    fixes the ranges the second needs from them — the histogram spans [smallest firing value,
    max], the intervals split (0, max], sae-dashboard's definitions, which a streaming job cannot
    know before it has seen the corpus once — and the second (`add_second`) bins activations and
    samples the intervals. `samples[j]` holds the tokens sampled from interval j (0 = lowest);
    `interval_tokens[j, f]` counts the tokens of feature f in it; `histogram [d_sae, bins]`
    counts the firing activations between `hist_low` and `hist_high`.

    Every method is a deterministic function of the batches given in order, so a job split at
    batch boundaries (a checkpoint, a worker) reduces exactly as one that was not.
    """

    d_sae: int
    context_size: int
    top_k: int
    intervals: int
    samples_per_interval: int
    bins: int
    seed: int
    contexts: int = field(default=0, init=False)
    totals: FeatureTotals = field(init=False)
    top: Selection = field(init=False)
    samples: list[Selection] = field(default_factory=list, init=False)
    interval_tokens: Any = field(default=None, init=False)
    histogram: Any = field(default=None, init=False)
    hist_low: Any = field(default=None, init=False)
    hist_high: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.totals = FeatureTotals(self.d_sae)
        self.top = Selection(self.top_k, self.d_sae, self.context_size)

    def add_first(
        self, acts: torch.Tensor, ids: torch.Tensor, considered: int, first_context: int
    ) -> None:
        """Merge a batch into the first pass: `acts [batch, context, d_sae]` float32 (ignored
        tokens zero), `ids [batch, context]`, the `considered` tokens among them, and the index
        of the batch's first context in the corpus."""
        flat = acts.reshape(-1, acts.shape[-1])
        self.totals.add(flat, considered)
        score = torch.where(flat > 0, flat.to(torch.float64), _NO_SCORE)
        self.top.add(score, acts, ids, first_context * self.context_size)
        self.contexts = max(self.contexts, first_context + ids.shape[0])

    def add(
        self, phase: int, acts: torch.Tensor, ids: torch.Tensor, keep: torch.Tensor, first: int
    ) -> None:
        """Merge a batch into pass `phase` (0: `add_first`, 1: `add_second`); `keep` marks the
        tokens considered."""
        if phase == 0:
            self.add_first(acts, ids, int(keep.sum()), first)
        else:
            self.add_second(acts, ids, first)

    def start_second(self) -> None:
        """The second pass's ranges and empty tables, from the first pass's totals."""
        self.hist_low, self.hist_high = histogram_range(self.totals.min_fired, self.totals.max)
        self.samples = [
            Selection(self.samples_per_interval, self.d_sae, self.context_size)
            for _ in range(self.intervals)
        ]
        self.histogram = torch.zeros(self.d_sae, self.bins, dtype=torch.int64)
        self.interval_tokens = torch.zeros(self.intervals, self.d_sae, dtype=torch.int64)

    def add_second(self, acts: torch.Tensor, ids: torch.Tensor, first_context: int) -> None:
        """Merge a batch into the second pass (the same batches as the first, in order)."""
        keys = sample_keys(self.seed, first_context, ids.shape[0], self.context_size)
        keys = keys.unsqueeze(1)
        flat = acts.reshape(-1, acts.shape[-1])
        firing = flat > 0
        self.histogram += histogram_counts(flat, firing, self.hist_low, self.hist_high, self.bins)
        where = interval_index(flat, self.totals.max, self.intervals)
        first_token = first_context * self.context_size
        for j, selection in enumerate(self.samples):
            inside = firing & (where == j)
            self.interval_tokens[j] += inside.sum(0)
            # the smallest keys win: negate them for the descending selection
            selection.add(torch.where(inside, -keys, _NO_SCORE), acts, ids, first_token)

    def state(self, part: str) -> dict[str, torch.Tensor]:
        """The named tensors of `part`: "totals" (the first pass's totals and counts), "first"
        (those and the top examples) or "second" (the histogram, interval counts and samples,
        with the ranges they were taken over)."""
        _check_part(part)
        out: dict[str, torch.Tensor] = {}
        if part in ("totals", "first"):
            for name in _TOTALS:
                out[f"totals.{name}"] = getattr(self.totals, name)
            # one-element vectors, not 0-d tensors: a byte view (safetensors, RPC) needs a dim
            out["totals.tokens"] = torch.tensor([self.totals.tokens], dtype=torch.int64)
            out["contexts"] = torch.tensor([self.contexts], dtype=torch.int64)
        if part == "first":
            _put_selection(out, "top", self.top)
        if part == "second":
            for name in _SECOND:
                out[name] = getattr(self, name)
            for j, selection in enumerate(self.samples):
                _put_selection(out, f"samples.{j}", selection)
        return {k: v.contiguous() for k, v in out.items()}

    def load(self, tensors: dict[str, torch.Tensor], part: str) -> None:
        """Put back what `state(part)` returned (on another object, process or worker); the
        second pass's tables are loaded over the totals already there."""
        _check_part(part)
        if part in ("totals", "first"):
            for name in _TOTALS:
                setattr(self.totals, name, tensors[f"totals.{name}"])
            self.totals.tokens = int(tensors["totals.tokens"])
            self.contexts = int(tensors["contexts"])
        if part == "first":
            _get_selection(tensors, "top", self.top)
        if part == "second":
            self.start_second()
            for name in _SECOND:
                setattr(self, name, tensors[name])
            for j, selection in enumerate(self.samples):
                _get_selection(tensors, f"samples.{j}", selection)


def _check_part(part: str) -> None:
    if part not in ("totals", "first", "second"):
        message = f"part={part!r}: a pass's state is 'totals', 'first' or 'second'"
        raise InvalidArgument(message)


def _put_selection(out: dict[str, torch.Tensor], prefix: str, selection: Selection) -> None:
    for name in _SELECTION:
        out[f"{prefix}.{name}"] = getattr(selection, name)


def _get_selection(tensors: dict[str, torch.Tensor], prefix: str, selection: Selection) -> None:
    for name in _SELECTION:
        setattr(selection, name, tensors[f"{prefix}.{name}"])
