"""Residual rows to logits through the eager model's own head: its final norm, lm_head, logit
multiplier and final softcap, and on a multi-stream trunk the hyper head that collapses the
streams first (AltUp's unembed projections and average, or a named stream head).

Every read-out that decodes rows (the logit lens, `decode_residuals`, the lens over a
generation) goes through `decode_through_head`, so they all apply the model's read-out exactly
as the model does after its last layer.
"""

from __future__ import annotations

from typing import Any

import torch

from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_eager.altup import altup_collapse
from interp_eager.tree import STREAM_HEADS

__all__ = ["decode_through_head"]


def decode_through_head(model: Any, residuals: torch.Tensor, *, raw: bool) -> torch.Tensor:
    """Logits of `residuals` (`[..., d_model]`, or a stream stack on a multi-stream trunk);
    `raw`: without the multiplier and softcap."""
    tree = model.tree
    facts = model.facts
    if facts.n_streams > 1 and tuple(residuals.shape[-2:]) == (facts.n_streams, model.d_model):
        if residuals.dim() != 4:
            message = (
                f"a stream stack must be [batch, seq, {facts.n_streams}, {model.d_model}] to "
                f"be collapsed by the hyper head; got {tuple(residuals.shape)}"
            )
            raise CapabilityUnsupported(message)
        residuals = _stream_head(model)(residuals)
    logits = tree.lm_head(tree.final_norm(residuals))
    if raw:
        return logits
    if facts.logit_multiplier not in (None, 1.0):
        logits = logits * facts.logit_multiplier
    if facts.final_logit_softcap:
        cap = facts.final_logit_softcap
        logits = torch.tanh(logits / cap) * cap
    return logits


def _stream_head(model: Any) -> Any:
    facts = model.facts
    if facts.altup_active_stream is not None:
        return altup_collapse(model.tree.trunk)
    head = model.tree.stream_head
    if head is not None:
        return head
    message = (
        f"this {facts.architecture} carries {facts.n_streams} residual streams but its trunk "
        f"has no module named {' / '.join(STREAM_HEADS)} to collapse them before the final "
        f"norm; decode one stream (resid_post.L.stream-K) with raw=True"
    )
    raise PointUnsupported(message)
