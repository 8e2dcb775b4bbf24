"""In what order do a request's captured rows leave a worker?

`by_position` puts the chunks a request kept, step by step, in position order, one row per
position (a position recomputed after preemption keeps its latest row); `picked` applies a
`capture(rows=)` selection to one step's rows, on their device. The collect and drain RPCs
(`interp_vllm.worker`, `interp_vllm.stream_worker`), the read-outs' and the lens stream's
(`interp_vllm.readouts_worker`, `interp_vllm.lens_stream_worker`) share them.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

__all__ = ["by_position", "picked"]


def picked(rows: torch.Tensor, pick: torch.Tensor | None) -> torch.Tensor:
    return rows if pick is None else rows[pick.to(rows.device)]


def by_position(chunks: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[int], Any]:
    """Rows in position order, one per position; a later row of a position wins (recompute)."""
    if len(chunks) == 1:  # one chunk (the static tier joins its steps first): no copy
        where, rows = chunks[0][0].tolist(), chunks[0][1]
    else:
        where = torch.cat([w for w, _ in chunks]).tolist()
        rows = torch.cat([r for _, r in chunks])
    if all(b > a for a, b in itertools.pairwise(where)):
        return where, rows
    latest = {position: index for index, position in enumerate(where)}
    order = sorted(latest)
    pick = torch.tensor([latest[p] for p in order], dtype=torch.long, device=rows.device)
    return order, rows.index_select(0, pick)
