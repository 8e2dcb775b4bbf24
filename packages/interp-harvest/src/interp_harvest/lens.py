"""Fitting a Jacobian lens over a corpus: `J_bar[layer]`, the mean Jacobian of the final
residual with respect to that layer's residual.

For every token position `t` of every packed context, `J_l(t) = d resid_post.{L-1}(t) /
d resid_post.l(t)` (`[d_model, d_model]`, the output residual's index first, so the lens reads
`J_bar @ h`); `J_bar[l]` is its mean over the tokens. Only the same position's dependence is
taken: `resid_post.l` at earlier positions also reaches position `t` through attention, but the
lens transports one position's residual, and that is the term it needs.

How it is computed, through the backend protocol only: a forward of a batch of contexts with a
zero vector added (a steering `add` write) at every layer and every position, `delta[l, t]`,
each its own leaf tensor that requires grad. The writes change no value, and the gradient of
the final residual at `t` with respect to `delta[l, t]` is exactly `J_l(t)`; rows are
independent, so one backward seeded at position `t` of every row gives the sum of the rows'
`J_l(t)` for every layer at once, vectorised over the `d_model` output coordinates
(`is_grads_batched`). So a batch costs one forward and `context_size` batched backwards, and
memory holds one batch's graph and the `[d_model, d_model]` float64 sums: nothing grows with the
corpus.

It needs a backend that keeps the autograd graph (`eager`, loaded with `requires_grad=True`);
the others are refused with that instead. The file is the public layout
`{"J": {layer: tensor}}` (float32, `torch.save`), which `set_lens_jacobians(path)` reads.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, GradientsUnsupported, InvalidArgument
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_harvest.batches import context_batches, whole_contexts
from interp_harvest.corpus import Corpus
from interp_harvest.packing import PackingPolicy
from interp_harvest.plan import check_batch_size
from interp_harvest.progress import Progress
from interp_harvest.shards import atomic_write_bytes

__all__ = ["FittedLens", "fit_lens", "write_lens"]


@dataclass
class FittedLens:
    """`sums[layer]`: the float64 sum of the per-token Jacobians over `count` tokens."""

    sums: dict[int, Any]
    count: int

    @property
    def jacobians(self) -> dict[int, Any]:
        """`{layer: J_bar}`, the means, in float32 (the layout's dtype)."""
        import torch

        return {layer: (s / self.count).to(torch.float32) for layer, s in self.sums.items()}


def _check_model(model: InterpModel) -> None:
    refusal = getattr(model, "graph_refusal", "it does not say that it keeps autograd graphs")
    if refusal is not None:
        what = f"fitting a Jacobian lens on backend={model.backend_name!r}"
        why = f"the lens is a gradient, and {refusal}"
        instead = "load the model with backend='eager' and requires_grad=True"
        raise GradientsUnsupported.build(what, why, instead)
    if model.facts.n_streams > 1:
        what = f"fitting a Jacobian lens on a trunk of {model.facts.n_streams} residual streams"
        why = "resid_post there is a stack of streams, not one d_model-wide residual"
        raise CapabilityUnsupported.build(what, why, "fit a lens on a one-stream model")


def fit_lens(
    model: InterpModel,
    data: str | os.PathLike[str] | Corpus,
    *,
    tokens: int,
    context_size: int,
    layers: Sequence[int] | None = None,
    bos: str = "context",
    exclude_bos: bool = False,
    batch_size: int = 8,
    text_field: str = "text",
    on_progress: Callable[[Progress], None] | None = None,
) -> FittedLens:
    """`J_bar` for `layers` (default: every layer) over the first `tokens` tokens (whole
    contexts) of the corpus; `exclude_bos` leaves the BOS positions out of the mean."""
    import torch

    check_batch_size(batch_size)
    _check_model(model)
    n_layers, width = int(model.n_layers), int(model.d_model)
    chosen = list(range(n_layers)) if layers is None else sorted(set(layers))
    if not chosen or any(not 0 <= layer < n_layers for layer in chosen):
        message = f"layers={layers!r}: a lens is fitted at layers in [0, {n_layers})"
        raise InvalidArgument(message)
    contexts_wanted = whole_contexts(tokens, context_size)
    corpus = data if isinstance(data, Corpus) else Corpus(data, text_field=text_field)
    policy = PackingPolicy(context_size, bos, getattr(model.tokenizer, "bos_token_id", None))
    sums = {layer: torch.zeros(width, width, dtype=torch.float64) for layer in chosen}
    count = 0
    batches = context_batches(
        model.tokenizer, corpus, policy, contexts_wanted, batch_size, on_progress
    )
    for _, ids in batches:
        keep = torch.ones_like(ids, dtype=torch.bool)
        if exclude_bos and policy.bos_token_id is not None:
            keep = ids != policy.bos_token_id
        count += int(keep.sum())
        for layer, summed in _batch_sums(model, ids, keep, chosen).items():
            sums[layer] += summed
    if count == 0:
        message = f"the corpus {str(corpus.path)!r} gave no token to fit a lens on"
        raise InvalidArgument(message)
    return FittedLens(sums, count)


def _batch_sums(model: InterpModel, ids: Any, keep: Any, layers: list[int]) -> dict[int, Any]:
    """Sum over the kept tokens of the batch of `J_l(t)` for each layer, in float64."""
    import torch

    rows, length = (int(d) for d in ids.shape)
    width = int(model.d_model)
    final = Address("resid_post", int(model.n_layers) - 1)
    deltas = {
        (layer, t): torch.zeros(width, requires_grad=True)
        for layer in layers
        for t in range(length)
    }
    specs = [
        SteeringSpec(Address("resid_post", layer), delta, op="add", positions=(t,))
        for (layer, t), delta in deltas.items()
    ]
    # The protocol's capture keyword for a graph-keeping forward (interp_core.model_base passes
    # it the same way); only backends with graph_refusal None get here.
    cache = sync.run(model, lambda: model.capture(ids, [final], steering=specs, detach=False))
    output = cache[final]
    out = {layer: torch.zeros(width, width, dtype=torch.float64) for layer in layers}
    eye = torch.eye(width, dtype=output.dtype)
    for t in range(length):
        chosen = keep[:, t]
        if not bool(chosen.any()):
            continue
        # seed[i] picks output coordinate i at position t of every kept row
        seed = torch.zeros(width, rows, length, width, dtype=output.dtype)
        seed[:, chosen, t, :] = eye.unsqueeze(1)
        grads = torch.autograd.grad(
            output,
            [deltas[(layer, t)] for layer in layers],
            grad_outputs=seed,
            retain_graph=t < length - 1,
            is_grads_batched=True,
        )
        for layer, grad in zip(layers, grads, strict=True):
            out[layer] += grad.detach().to(torch.float64)
    return out


def write_lens(lens: FittedLens, path: str | os.PathLike[str]) -> Path:
    """The lens as the public `{"J": {layer: tensor}}` file (torch.save, float32), written
    atomically; `set_lens_jacobians(path)` and `interp_torch.lens.read_lens` read it."""
    import torch

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save({"J": lens.jacobians}, buffer)
    atomic_write_bytes(target, buffer.getvalue())
    return target
