"""Gemma-3n's read-out of its AltUp streams: the collapse the model applies before its final norm.

After the last block the model keeps stream 0 as it is, maps each other stream through its own
unembed projection (`altup_unembed_projections[k-1]`), rescales each projection to stream 0's
root-mean-square (the denominator floored at sqrt(1e-5)), and averages the streams. The logit
lens decodes a stream stack through this same step, so at the last layer it is the model's own
prediction. The operations follow the modelling code's order, so the result is bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from interp_core.errors import PointUnsupported

__all__ = ["altup_collapse"]

# The floor under each projected stream's mean square, as the model states it.
_EPSILON = 1e-5


def altup_collapse(trunk: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function from a stream stack `[batch, seq, n_streams, d]` to the averaged `[b, s, d]`."""
    projections = getattr(trunk, "altup_unembed_projections", None)
    if projections is None:
        message = (
            f"{type(trunk).__name__} carries AltUp streams but has no altup_unembed_projections "
            "to collapse them before the final norm; decode one stream (resid_post.L.stream-K) "
            "with raw=True"
        )
        raise PointUnsupported(message)

    def collapse(stack: torch.Tensor) -> torch.Tensor:
        streams = stack.permute(2, 0, 1, 3)  # the model's own [n, b, s, d]
        target = torch.mean(streams[0] ** 2, dim=-1, keepdim=True) ** 0.5
        epsilon = torch.tensor(_EPSILON, device=target.device)
        collapsed = [streams[0]]
        for k in range(1, streams.shape[0]):
            projected = projections[k - 1](streams[k]).to(dtype=streams.dtype)
            magnitude = torch.mean(projected**2, dim=-1, keepdim=True)
            magnitude = torch.sqrt(torch.maximum(magnitude, epsilon))
            collapsed.append(projected * target / magnitude)
        return torch.mean(torch.stack(collapsed), dim=0)

    return collapse
