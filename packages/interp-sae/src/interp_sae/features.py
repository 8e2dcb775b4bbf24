"""Feature activations from a model call: one forward pass, every SAE encoded at its point.

`features(model, tokens, saes, top_k=...)` captures each SAE's address once (several SAEs at
one point share the capture) and encodes on the SAE's device in the same process, so only the
features (or their top-k indices and values) are returned, not the activations. It works on any
backend through the model protocol's `capture`. Before anything is encoded, the features the
call will hold (dense `[batch, seq, d_sae]`, plus top-k) are checked against the memory budget.

A backend that can encode next to its capture says so with a `worker_features` method (vLLM:
the SAEs are loaded into its workers once and only the top-k indices and values per token come
back); `features` uses it whenever top-k is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_sae.memory import check_fits
from interp_sae.sae import SAE, TopK, top_features

__all__ = ["FeatureActivations", "features", "features_sync"]


@dataclass(frozen=True)
class FeatureActivations:
    """One SAE's features over a call: `dense` `[batch, seq, d_sae]`, or `top` (k per token)."""

    sae: SAE
    dense: torch.Tensor | None = None
    top: TopK | None = None

    @property
    def address(self) -> Address:
        return self.sae.address


def _as_list(saes: SAE | Sequence[SAE]) -> list[SAE]:
    items = [saes] if isinstance(saes, SAE) else list(saes)
    if not items or not all(isinstance(s, SAE) for s in items):
        message = "features() takes an SAE or a non-empty sequence of them (load_sae(path))"
        raise InvalidArgument(message)
    return items


def _check_budget(saes: list[SAE], cache: Any, top_k: int | None, budget: int | None) -> None:
    """Refuse, before any feature is computed, features that would not fit `budget`."""
    sizes = {}
    for index, sae in enumerate(saes):
        shape = tuple(cache[sae.address].shape)
        rows = shape[0] * shape[1] if len(shape) > 2 else shape[0]
        # The dense features are computed before top-k is taken, so count them either way.
        width = sae.d_sae if top_k is None else sae.d_sae + 2 * top_k
        sizes[f"sae{index}"] = ((rows, width), 4)
    check_fits(sizes, saes[0].device, budget, f"the features of {len(saes)} SAE(s)")


def _encode(sae: SAE, acts: torch.Tensor, top_k: int | None) -> FeatureActivations:
    dense = sae.encode(acts.reshape(*acts.shape[:2], -1) if acts.dim() > 2 else acts)
    if top_k is None:
        return FeatureActivations(sae, dense=dense)
    _check_top_k(sae, top_k)
    return FeatureActivations(sae, top=top_features(dense, top_k))


async def features(
    model: Any,
    tokens: Any,
    saes: SAE | Sequence[SAE],
    *,
    top_k: int | None = None,
    steering: Any = None,
    attention_mask: Any = None,
    memory_budget_bytes: int | None = None,
) -> list[FeatureActivations]:
    """Feature activations of each SAE, in order, from one forward pass of `model`."""
    items = _as_list(saes)
    worker_side = getattr(model, "worker_features", None)
    if worker_side is not None and top_k is not None and attention_mask is None:
        return await _in_workers(worker_side, tokens, items, top_k, steering)
    points = list(dict.fromkeys(sae.address for sae in items))
    cache = await model.capture(tokens, points, steering=steering, attention_mask=attention_mask)
    _check_budget(items, cache, top_k, memory_budget_bytes)
    return [_encode(sae, cache[sae.address], top_k) for sae in items]


async def _in_workers(
    worker_side: Any, tokens: Any, saes: list[SAE], top_k: int, steering: Any
) -> list[FeatureActivations]:
    """A backend that encodes next to the capture (vLLM's workers): only top-k comes back."""
    for sae in saes:
        _check_top_k(sae, top_k)
        if not sae.source:
            message = (
                "this SAE was not loaded from a folder, and the workers load SAEs by path; "
                "save it and load_sae(path), or pass top_k=None to encode in this process"
            )
            raise InvalidArgument(message)
    specs = [
        {"path": sae.source, "address": str(sae.address), "write_address": str(sae.write_address)}
        for sae in saes
    ]
    answers = await worker_side(tokens, specs, top_k=top_k, steering=steering)
    return [
        FeatureActivations(sae, top=TopK(a["values"], a["indices"]))
        for sae, a in zip(saes, answers, strict=True)
    ]


def _check_top_k(sae: SAE, top_k: Any) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= sae.d_sae:
        message = f"top_k={top_k!r}: pass an int from 1 to the SAE's {sae.d_sae} features"
        raise InvalidArgument(message)


def features_sync(
    model: Any,
    tokens: Any,
    saes: SAE | Sequence[SAE],
    *,
    top_k: int | None = None,
    steering: Any = None,
    attention_mask: Any = None,
    memory_budget_bytes: int | None = None,
) -> list[FeatureActivations]:
    """Blocking `features(...)` (see `interp_core.sync` for where the call runs)."""
    return sync.run(
        model,
        lambda: features(
            model,
            tokens,
            saes,
            top_k=top_k,
            steering=steering,
            attention_mask=attention_mask,
            memory_budget_bytes=memory_budget_bytes,
        ),
    )
