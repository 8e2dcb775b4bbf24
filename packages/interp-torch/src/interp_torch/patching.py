"""Activation patching sweeps and attribution patching, on any backend's model.

`patch_sweep` follows TransformerLens's convention (its `patching` module): run the corrupted
prompt, patch in the clean run's activation at one place, and report the metric of the patched
logits. Places are layer × position for per-token points (`per="position"`, TransformerLens's
`get_act_patch_resid_pre` & co., shape `[layers, positions]`) or layer × head for points with a
head axis, every position at once (`per="head"`, its `get_act_patch_attn_head_out_all_pos` on
`z`, shape `[layers, heads]`). Every patch is an ordinary `interp_core.Patch` passed as
`steering=` to an ordinary capture of `lm_head`, so a backend serves a sweep exactly as it
serves one patch. The patches run as the rows of one batched capture of the corrupted prompt,
row i carrying patch i alone (`batch_rows`, `interp_core.write_indices`), chunked to a memory
bound: eager runs a chunk as one forward instead of one forward per patch, vLLM as concurrent
requests its engine batches, remote as one HTTP call. The metric runs here on the returned
logits, one row at a time.

`attribution_patch` is the first-order estimate of the same grid from one clean forward, one
corrupted forward and one backward pass (Nanda's attribution patching):

    estimate[l, p] = (clean[l, p] − corrupt[l, p]) · ∂metric/∂act[l, p]  at the corrupted run

summed over the row (per position) or over the head's channels and every position (per head).
The gradient is read through zero `add` writes at each place (a write is a leaf of the graph
with the activation's gradient), so it needs a backend with gradients: eager loaded with
`requires_grad=True`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, SteeringSpecError
from interp_core.patching import LogitDiff, patch_from
from interp_core.point_lookup import get_point
from interp_core.point_spec import Width
from interp_core.steering import SteeringSpec
from interp_core.sync import run

__all__ = ["PER", "SWEEP_MEMORY_BYTES", "attribution_patch", "patch_sweep"]

PER = ("position", "head")
Metric = Callable[[torch.Tensor], Any]
_HEAD_WIDTHS = (Width.Q_HEADS, Width.KV_HEADS, Width.Z_HEADS)


def _refuse(what: str, why: str | None, instead: str | None) -> NoReturn:
    error = SteeringSpecError.build(what, why, instead)
    raise error


def _tokens(model: Any, prompt: Any) -> torch.Tensor:
    ids = model.to_tokens(prompt) if isinstance(prompt, str) else torch.as_tensor(prompt)
    return ids.unsqueeze(0) if ids.dim() == 1 else ids


def _plan(
    model: Any, clean: Any, corrupt: Any, point: str, per: str, layers: Sequence[int] | None
) -> tuple[torch.Tensor, torch.Tensor, list[int], int]:
    """The prompts as `[1, seq]` ids, the layers swept, and the grid's second axis length."""
    if per not in PER:
        _refuse(f"patch_sweep got per={per!r}", f"it sweeps per {' or '.join(PER)}", None)
    clean_ids, corrupt_ids = _tokens(model, clean), _tokens(model, corrupt)
    if clean_ids.shape[0] != 1 or corrupt_ids.shape[0] != 1:
        _refuse(
            "patch_sweep got a batch of prompts",
            "each patch is written into every row of its call, so one sweep is one prompt pair",
            "run one sweep per (clean, corrupted) pair",
        )
    if clean_ids.shape != corrupt_ids.shape:
        _refuse(
            f"the clean prompt has {clean_ids.shape[1]} tokens, "
            f"the corrupted {corrupt_ids.shape[1]}",
            "a patch copies the activation at the same position of the other run",
            "pad or reword the prompts to the same token length",
        )
    facts = model.facts
    width = get_point(point).width
    if per == "head" and width not in _HEAD_WIDTHS:
        _refuse(
            f"a head sweep at {point}",
            f"{point} has no head axis ({width.rule} wide)",
            "sweep heads at z (TransformerLens's attention head outputs), or per='position'",
        )
    if per == "position" and width not in (Width.D_MODEL, Width.D_MLP, *_HEAD_WIDTHS):
        _refuse(f"a position sweep at {point}", f"{point} is {width.rule} wide", None)
    chosen = list(range(facts.n_layers)) if layers is None else [int(x) for x in layers]
    heads = facts.n_kv_heads if width is Width.KV_HEADS else facts.n_heads
    columns = int(clean_ids.shape[1]) if per == "position" else heads
    return clean_ids, corrupt_ids, chosen, columns


def _value(result: Any) -> float:
    return float(result.detach() if isinstance(result, torch.Tensor) else result)


def patch_sweep(
    model: Any,
    clean: Any,
    corrupt: Any,
    metric: Metric,
    *,
    point: str = "resid_pre",
    per: str = "position",
    layers: Sequence[int] | None = None,
    rows_per_forward: int | None = None,
) -> torch.Tensor:
    """The metric of the corrupted run with each clean activation patched in, as a grid.

    `clean`/`corrupt` are prompts (text or `[seq]`/`[1, seq]` ids) of equal token length;
    `metric` maps `[1, seq, vocab]` logits to a number (`interp_core.LogitDiff`, or any
    function). Returns float32 `[len(layers), seq]` for `per="position"`, `[len(layers),
    heads]` for `per="head"` (kv heads at k/v points).

    The patches run as the rows of batched forwards of the corrupted prompt, row i carrying
    patch i alone (`batch_rows`), `rows_per_forward` rows at a time (default: as many as
    `SWEEP_MEMORY_BYTES` of the rows' logits and activations allow; 1 is the loop of single
    patches). With a `LogitDiff` only its position's logits are returned by the backend
    (`rows=`), so the metric reads `[1, 1, vocab]`.
    """
    clean_ids, corrupt_ids, chosen, columns = _plan(model, clean, corrupt, point, per, layers)
    addresses = [Address(point, layer) for layer in chosen]
    size = _rows_per_forward(model.facts, int(corrupt_ids.shape[1]), rows_per_forward)
    # A logit difference reads one position: only that row of logits leaves the backend.
    rows = [metric.position] if isinstance(metric, LogitDiff) else None
    read = dataclasses.replace(metric, position=-1) if isinstance(metric, LogitDiff) else metric

    async def sweep() -> list[torch.Tensor]:
        cache = await model.capture(clean_ids, addresses)
        places = [(a, c) for a in addresses for c in range(columns)]
        logits = []
        for start in range(0, len(places), size):
            part = places[start : start + size]
            patches = [
                patch_from(cache, a, [c], batch_rows=i)
                if per == "position"
                else patch_from(cache, a, heads=[c], batch_rows=i)
                for i, (a, c) in enumerate(part)
            ]
            ids = corrupt_ids.expand(len(part), -1)
            out = await model.capture(ids, ["lm_head"], steering=patches, rows=rows)
            logits.extend(torch.as_tensor(out["lm_head"]).float().split(1))
        return logits

    logits = run(model, sweep)
    values = [_value(read(each)) for each in logits]
    return torch.tensor(values, dtype=torch.float32).reshape(len(chosen), columns)


# What one batched forward of a sweep may hold: its rows' logits (float32) plus a layer's
# working activations (a few d_model and d_mlp rows per token), which bounds the chunk.
SWEEP_MEMORY_BYTES = 32 * 2**20


def _rows_per_forward(facts: Any, seq: int, given: int | None) -> int:
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            _refuse(f"patch_sweep got rows_per_forward={given!r}", None, "pass an int >= 1")
        return given
    per_token = facts.vocab_size + 8 * facts.d_model + 2 * (facts.d_mlp or 4 * facts.d_model)
    return max(1, SWEEP_MEMORY_BYTES // (4 * seq * per_token))


def attribution_patch(
    model: Any,
    clean: Any,
    corrupt: Any,
    metric: Metric,
    *,
    point: str = "resid_pre",
    per: str = "position",
    layers: Sequence[int] | None = None,
) -> torch.Tensor:
    """The first-order estimate of `patch_sweep(...)`'s grid minus the corrupted metric.

    Same arguments and shape as `patch_sweep`; needs gradients (eager, `requires_grad=True`).
    The estimate is of the change each patch makes, `patched − corrupt`, so compare it with
    `patch_sweep(...) − metric(corrupted logits)`.
    """
    clean_ids, corrupt_ids, chosen, columns = _plan(model, clean, corrupt, point, per, layers)
    if not getattr(model, "requires_grad", False):
        error = CapabilityUnsupported.build(
            f"attribution_patch on backend={getattr(model, 'backend_name', '?')!r} without "
            "gradients",
            "it needs ∂metric/∂activation from a backward pass",
            "load the model with backend='eager', requires_grad=True, or use patch_sweep",
        )
        raise error
    addresses = [Address(point, layer) for layer in chosen]
    clean_cache = model.run_with_cache(clean_ids, addresses)
    corrupt_cache = model.run_with_cache(corrupt_ids, addresses)
    seq = int(corrupt_ids.shape[1])
    leaves: dict[tuple[int, int], torch.Tensor] = {}
    specs = []
    for index, address in enumerate(addresses):
        width = int(corrupt_cache[address].shape[-1])
        for position in range(seq):
            leaf = torch.zeros(width, dtype=torch.float32, requires_grad=True)
            leaves[index, position] = leaf
            specs.append(SteeringSpec(address, leaf, positions=[position]))
    logits = model.run_with_cache(corrupt_ids, ["lm_head"], steering=specs, detach=False)
    order = list(leaves)
    grads = torch.autograd.grad(metric(logits["lm_head"].float()), [leaves[k] for k in order])
    grid = torch.zeros(len(chosen), columns, dtype=torch.float64)
    for (index, position), grad in zip(order, grads, strict=True):
        address = addresses[index]
        diff = (clean_cache[address][0, position] - corrupt_cache[address][0, position]).double()
        product = diff * grad.double()
        if per == "position":
            grid[index, position] = product.sum()
        else:
            grid[index] += product.reshape(columns, -1).sum(-1)
    return grid.float()
