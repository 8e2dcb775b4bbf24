"""How are a mixture-of-experts router's choices rebuilt from its logits, family by family?

vLLM picks and weighs experts inside its fused MoE kernel, so `expert_weights` and
`expert_indices` exist only as a rebuild from `router_logits` with the family's own rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from interp_core.facts import ModelFacts

__all__ = ["routing_rule"]


def routing_rule(facts: ModelFacts, config: dict) -> Callable[[torch.Tensor], Any] | str:
    """The family's router rule from logits to (top-k weights, expert ids), or why not served.

    The rule is the family row's `router_rule` (interp_core.family_conventions); only rules
    checked against the eager backend (HF's routers) are named there; every other router
    (grouped, biased, sigmoid-scored, hashed) would need its own rebuild, so it is refused.
    """
    k = facts.moe.experts_per_token if facts.moe else 0
    rule = facts.family.router_rule
    if rule in {"softmax-topk", "softmax-topk-renormalized"}:
        renormalize = rule == "softmax-topk-renormalized" or bool(
            config.get("norm_topk_prob", False)
        )

        def softmax_then_topk(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            weights = torch.softmax(logits, dim=-1, dtype=torch.float32)
            weights, ids = torch.topk(weights, k, dim=-1)
            if renormalize:
                weights = weights / weights.sum(dim=-1, keepdim=True)
            return weights.to(logits.dtype), ids

        return softmax_then_topk
    if rule == "topk-softmax":
        # Top-k of the raw logits (gpt-oss: bias included), then a softmax over those k.

        def topk_then_softmax(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            top, ids = torch.topk(logits, k, dim=-1)
            return torch.softmax(top.float(), dim=-1).to(logits.dtype), ids

        return topk_then_softmax
    return (
        f"interp-vllm has no verified rebuild of {facts.architecture}'s routing (scoring, "
        "grouping or bias) from its router logits, and vLLM picks and weighs experts inside its "
        "fused MoE kernel"
    )
