"""How does a `vllm-static` worker keep a step's captured rows: every declared point at once?

The taps leave each declared read's rows of a step in its own persistent buffer. A request that
captures several points (resid_post at every layer, say) used to take its rows out point by
point: per point and step a slice, a copy off the device and a list entry, a few dozen
microseconds of host work each, which on one decode stream of the bench model was a few percent
of every step (py-spy, `docs/guides/performance.md`). Here a step's plain captures leave in one
copy per group of like buffers (same row shape, dtype and device): the buffers' rows are stacked
into one `[points, rows, ...]` tensor, moved off the device once, and each request keeps one view
of it per step. The per-point tensors are cut out only when the request is collected
(`Request.take_rows`), by one concatenation over its steps.

"Plain" is a capture of the point's rows with nothing else attached: no `capture(rows=)`
selection, no lens and no SAE encoding at that point. Those keep their rows through the
general path (`InterpWorkerExtension._interp_keep_step`), which this module hands them back for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from interp_vllm.static_taps import StaticTaps
    from interp_vllm.worker_state import Request, Segment, Step

__all__ = ["keep_stacked", "plain_capture"]


def plain_capture(request: Request, key: str) -> bool:
    """Whether `request` reads `key` as a capture of its rows and nothing else."""
    return (
        key in request.capture
        and request.rows_wanted is None
        and key not in request.lens
        and key not in request.features
    )


def keep_stacked(
    taps: StaticTaps, step: Step, readers: dict[str, list[Segment]]
) -> dict[str, list[Segment]]:
    """Keep this step's plain captures (`readers`: read key -> the segments reading it), one
    copy per group of like buffers; the readers left for the general path, by key."""
    left: dict[str, list[Segment]] = {}
    wanted: dict[int, tuple[Segment, set[str]]] = {}
    for key, segments in readers.items():
        rest = []
        for segment in segments:
            if plain_capture(segment.request, key):
                wanted.setdefault(id(segment), (segment, set()))[1].add(key)
            else:
                rest.append(segment)
        if rest:
            left[key] = rest
    if not wanted:
        return left
    groups: dict[tuple[tuple[int, ...], torch.dtype, torch.device], list[str]] = {}
    for key in sorted({k for _, keys in wanted.values() for k in keys}):
        rows = taps.reads[key].rows
        groups.setdefault((tuple(rows.shape[1:]), rows.dtype, rows.device), []).append(key)
    for keys in groups.values():
        _keep_group(taps, step, keys, list(wanted.values()))
    return left


def _keep_group(
    taps: StaticTaps, step: Step, keys: list[str], wanted: list[tuple[Segment, set[str]]]
) -> None:
    members = [(s, [k for k in keys if k in mine]) for s, mine in wanted]
    members = [(s, mine) for s, mine in members if mine]
    # One span covers every member's rows: a row of a request that captures nothing here is
    # copied too (a step is laid out by vLLM, not by us), which costs less than a gather.
    low = min(s.start for s, _ in members)
    high = max(s.stop for s, _ in members)
    # Copied before the next step's forward overwrites the buffers; off the device once.
    block = torch.stack([taps.reads[k].rows[low:high] for k in keys]).to("cpu")
    index = {k: i for i, k in enumerate(keys)}
    for segment, mine in members:
        part = block[:, segment.start - low : segment.stop - low]
        if len(mine) != len(keys):
            part = part.index_select(0, torch.tensor([index[k] for k in mine]))
        where = step.positions[segment.start : segment.stop]
        _held(segment.request, tuple(mine)).append((where, part))


def _held(request: Request, keys: tuple[str, ...]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return request.stacked.setdefault(keys, [])
