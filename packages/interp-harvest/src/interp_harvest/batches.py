"""The packed corpus as forward batches, for the jobs that reduce as they go (statistics, fitted
lenses, dashboards): each batch is a `[contexts, context_size]` tensor of token ids, and the
progress callback hears of it once it has been handled. The activations job writes shards
instead and keeps its own loop (its batches stop at shard boundaries and resume mid-corpus).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from interp_core.errors import InvalidArgument
from interp_harvest.corpus import Corpus
from interp_harvest.packing import PackingPolicy, pack, tokenizer_encoder
from interp_harvest.progress import Progress

__all__ = ["context_batches", "whole_contexts"]


def whole_contexts(tokens: int, context_size: int) -> int:
    """How many whole contexts a token budget holds; refused when none."""
    contexts = tokens // context_size
    if contexts < 1:
        message = f"a budget of {tokens:,} tokens holds no whole context of {context_size} tokens"
        raise InvalidArgument(message)
    return contexts


def context_batches(
    tokenizer: Any,
    corpus: Corpus,
    policy: PackingPolicy,
    contexts: int,
    batch_size: int,
    on_progress: Callable[[Progress], None] | None = None,
    *,
    phase: int = 0,
    phases: int = 1,
    skip_before: int = 0,
) -> Iterator[tuple[int, Any]]:
    """`(index of the batch's first context, ids [batch, context_size])` over the first
    `contexts` contexts. Progress is reported after the consumer is done with a batch (when it
    asks for the next one), so the bar counts work done, not work handed out; `phase` of
    `phases` names the pass of a job that reads the corpus more than once. Batches whose first
    context comes before `skip_before` (a resumed job's, already reduced) are packed but not
    handed out, and count as done but not as this run's work."""
    import torch

    encode = tokenizer_encoder(tokenizer)
    total = contexts * policy.context_size
    started, done, this_run = time.monotonic(), 0, 0
    batch: list[Any] = []
    # chained, not listed: the packed corpus is never held whole (a None marks its end)
    stream = pack(corpus, encode, policy, max_contexts=contexts)
    for context in itertools.chain(stream, [None]):
        if context is not None:
            batch.append(context)
            if len(batch) < batch_size:
                continue
        if not batch:
            break
        first, count = batch[0].index, len(batch) * policy.context_size
        if first >= skip_before:
            yield first, torch.tensor([c.tokens for c in batch], dtype=torch.long)
            this_run += count
        done += count
        batch = []
        if on_progress is not None:
            seconds = time.monotonic() - started
            on_progress(Progress(done, total, this_run, seconds, phase, phases))
