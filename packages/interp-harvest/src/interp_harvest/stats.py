"""The statistics job: per-point mean, variance and norms over a corpus, streamed.

What mean ablation (the mean), normalisation (the variance, the mean norm) and SAE training's
activation scaling need, computed per feature over every token of every packed context. Each
forward's batch is reduced to (count, mean, sum of squared deviations) in float64 and merged
into the running totals with the pairwise update of Chan et al., so memory stays one batch
whatever the corpus size and the result does not drift the way a float32 running sum does.

Variance is the population variance (divided by the token count). `exclude_bos` leaves out the
positions holding the BOS token, whose activations are often orders of magnitude off the rest.
Output: one safetensors file with, per point `P`, `P.mean` and `P.var` (`[width]`, flattened
after the token axis), `P.norm_mean`, `P.norm_max` and `P.count` (0-d), all float64 except the
int64 count.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_core import sync
from interp_core.address import Address, to_address
from interp_core.errors import InvalidArgument, PointUnsupported
from interp_core.protocol import InterpModel
from interp_core.shapes import point_shape
from interp_harvest.batches import context_batches, whole_contexts
from interp_harvest.corpus import Corpus
from interp_harvest.packing import PackingPolicy
from interp_harvest.plan import check_batch_size
from interp_harvest.progress import Progress
from interp_harvest.shards import atomic_write_bytes

__all__ = ["PointStats", "harvest_stats", "write_stats"]

_SEQ = 1_000_033


@dataclass
class PointStats:
    """Running totals for one point (float64 torch tensors)."""

    count: int
    mean: Any
    m2: Any
    norm_sum: float
    norm_max: float

    @property
    def var(self) -> Any:
        return self.m2 / self.count

    @property
    def norm_mean(self) -> float:
        return self.norm_sum / self.count

    def add(self, rows: Any) -> None:
        """Merge a `[tokens, width]` float64 batch into the totals."""
        n = rows.shape[0]
        if n == 0:
            return
        batch_mean = rows.mean(0)
        batch_m2 = ((rows - batch_mean) ** 2).sum(0)
        norms = rows.norm(dim=1)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + batch_m2 + delta**2 * (self.count * n / total)
        self.count = total
        self.norm_sum += float(norms.sum())
        self.norm_max = max(self.norm_max, float(norms.max()))


def harvest_stats(
    model: InterpModel,
    data: str | os.PathLike[str] | Corpus,
    *,
    points: Sequence[Any],
    tokens: int,
    context_size: int,
    bos: str = "context",
    exclude_bos: bool = False,
    batch_size: int = 8,
    text_field: str = "text",
    on_progress: Callable[[Progress], None] | None = None,
) -> dict[Address, PointStats]:
    """Per-point statistics over the first `tokens` tokens (whole contexts) of the corpus."""
    import torch

    check_batch_size(batch_size)
    corpus = data if isinstance(data, Corpus) else Corpus(data, text_field=text_field)
    addresses = [to_address(p) for p in points]
    if not addresses:
        message = "no points to summarise; name at least one address (e.g. resid_post.6)"
        raise InvalidArgument(message)
    for address in addresses:
        # A stand-in sequence length no width equals: a shape holding it twice is [.., q, k].
        if point_shape(address, model.facts, 1, _SEQ).count(_SEQ) > 1:
            message = (
                f"{address} is an attention matrix, whose width depends on the key position; "
                f"per-feature statistics need a vector point (e.g. z or attn_out)"
            )
            raise PointUnsupported(message)
        verdict = model.supports(address)
        if not verdict:
            message = f"{address} cannot be read on {model.backend_name}: {verdict.explain()}"
            raise PointUnsupported(message)
    contexts_wanted = whole_contexts(tokens, context_size)
    policy = PackingPolicy(context_size, bos, getattr(model.tokenizer, "bos_token_id", None))
    totals: dict[Address, PointStats] = {}
    batches = context_batches(
        model.tokenizer, corpus, policy, contexts_wanted, batch_size, on_progress
    )
    for _, ids in batches:
        keep = (
            (ids != policy.bos_token_id).reshape(-1)
            if exclude_bos and policy.bos_token_id is not None
            else None
        )
        cache = sync.capture(model, ids, addresses)
        for address in addresses:
            tensor = cache[address].detach().to("cpu", torch.float64)
            rows = tensor.reshape(ids.numel(), -1)
            if keep is not None:
                rows = rows[keep]
            if address not in totals:
                width = rows.shape[1]
                zeros = torch.zeros(width, dtype=torch.float64)
                totals[address] = PointStats(0, zeros, zeros.clone(), 0.0, 0.0)
            totals[address].add(rows)
    if not totals:
        message = f"the corpus {str(corpus.path)!r} packs into no context of {context_size} tokens"
        raise InvalidArgument(message)
    return totals


def write_stats(stats: dict[Address, PointStats], path: str | os.PathLike[str]) -> Path:
    """The statistics as one safetensors file (written atomically); returns its path."""
    import torch
    from safetensors.torch import save

    tensors: dict[str, Any] = {}
    for address, point in stats.items():
        name = str(address)
        tensors[f"{name}.mean"] = point.mean
        tensors[f"{name}.var"] = point.var
        tensors[f"{name}.norm_mean"] = torch.tensor(point.norm_mean, dtype=torch.float64)
        tensors[f"{name}.norm_max"] = torch.tensor(point.norm_max, dtype=torch.float64)
        tensors[f"{name}.count"] = torch.tensor(point.count, dtype=torch.int64)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, save(tensors, metadata={"format": "interp-harvest/stats"}))
    return target
