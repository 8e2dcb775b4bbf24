"""How are attn_scores and attn_probs rebuilt from the q and k vLLM's attention kernel received?

vLLM's attention runs in a fused kernel that never materialises the score matrix, so the hooked
backend captures the kernel's inputs instead (the internal `_q_rot` / `_k_rot` sites of
`sites.py`: post-RoPE, post-QK-norm, flat `[T, heads*head_dim]` / `[T, kv_heads*head_dim]`) and
this module rebuilds the matrices client-side exactly as the eager backend reports them, for one
request's prompt with positions starting at 0:

- scores are `q @ k^T` times the family's scaling (head_dim**-0.5; Gemma's
  query_pre_attn_scalar**-0.5; Granite's attention_multiplier; GPT-2's division by
  sqrt(head_dim), optionally by layer + 1), then Gemma-2's attention-logit softcap
  `tanh(s / cap) * cap`, then the causal (and, on sliding layers, window) mask;
- masked entries hold float32's most negative finite value, which is what HF's eager attention
  produces by adding its additive mask (`score + finfo.min` rounds to `finfo.min`);
- grouped-query key heads are repeated the way HF's `repeat_kv` does (query head h reads key
  head h // (heads / kv_heads));
- probabilities are the float32 softmax of the scores; on families with attention sinks the sink
  logit joins each row's denominator and is then dropped, so rows sum to less than one.

BLOOM's ALiBi bias is added as HF's eager BLOOM adds it: `slope_h * key_position` (softmax
ignores the per-row constant `-slope_h * query_position`), before the mask. Other ALiBi variants
(MPT, Falcon with `alibi`) scale or order the bias differently and are refused, as is latent
attention (MLA), whose keys are never materialised per head.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from interp_core.facts import ModelFacts

__all__ = [
    "alibi_slopes",
    "probs_from_scores",
    "scaling_for",
    "scores_from_qk",
    "unsupported_reason",
]


def unsupported_reason(config: Mapping[str, Any]) -> str | None:
    """None when this module can rebuild the family's attention matrices, else why not."""
    facts = ModelFacts.from_config(config)
    alibi = facts.family.alibi
    if alibi == "variant" or (alibi != "slopes" and config.get("alibi")):
        return (
            f"{facts.architecture} biases attention scores with a variant of ALiBi the rebuild "
            "from q and k does not reproduce"
        )
    if facts.mla is not None:
        return (
            f"{facts.architecture} uses multi-head latent attention, whose keys the kernel "
            "reads from a compressed latent the rebuild does not decompress"
        )
    if "chunked" in facts.layer_kinds:
        return (
            f"{facts.architecture} masks some layers to fixed chunks, a mask the rebuild from q "
            "and k does not reproduce"
        )
    if facts.shared_key_value or facts.n_streams > 1:
        return f"the attention rebuild does not model {facts.architecture}'s attention"
    return None


def scaling_for(config: Mapping[str, Any], layer: int) -> tuple[str, float]:
    """How the family scales q·k: ("mul", factor) or ("div", divisor), as HF's eager does it.

    The operation matters at float32's last bit: GPT-2 divides by sqrt(head_dim) where Llama
    multiplies by its inverse.
    """
    facts = ModelFacts.from_config(config)
    scale = facts.family.score_scale
    if scale == "query_pre_attn_scalar" and config.get("query_pre_attn_scalar") is not None:
        return "mul", float(config["query_pre_attn_scalar"]) ** -0.5
    if scale == "attention_multiplier":
        return "mul", float(config.get("attention_multiplier", facts.head_dim**-0.5))
    if scale == "gpt2-divide":
        divisor = math.sqrt(facts.head_dim) if config.get("scale_attn_weights", True) else 1.0
        if config.get("scale_attn_by_inverse_layer_idx"):
            divisor *= layer + 1
        return "div", divisor
    return "mul", facts.head_dim**-0.5


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """BLOOM's per-head ALiBi slopes (float32), in HF's `build_alibi_tensor` arithmetic."""
    closest = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != n_heads:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, n_heads - closest)
        powers = torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra, powers)], dim=0)
    return slopes


def _window(facts: ModelFacts, layer: int) -> int | None:
    if facts.layer_kind(layer) == "sliding":
        return facts.sliding_window
    return None


def scores_from_qk(
    q_rot: torch.Tensor, k_rot: torch.Tensor, config: Mapping[str, Any], layer: int
) -> torch.Tensor:
    """`[1, heads, T, T]` pre-softmax scores of one prompt, as the eager backend reports them."""
    why = unsupported_reason(config)
    if why is not None:
        raise ValueError(why)
    facts = ModelFacts.from_config(config)
    heads, kv_heads, dim = facts.n_heads, facts.n_kv_heads, facts.head_dim
    tokens = q_rot.shape[0]
    q = q_rot.reshape(tokens, heads, dim).transpose(0, 1)
    k = k_rot.reshape(tokens, kv_heads, dim).transpose(0, 1)
    k = k.repeat_interleave(heads // kv_heads, dim=0)
    if facts.family.alibi == "slopes":
        # HF: alibi.baddbmm(q, k^T, beta=1, alpha=1/sqrt(head_dim)), the bias being
        # slope * key position.
        positions = torch.arange(tokens, dtype=torch.float32, device=q.device)
        bias = alibi_slopes(heads).to(q.device)[:, None, None] * positions[None, None, :]
        _, factor = scaling_for(config, layer)
        scores = torch.baddbmm(bias.to(q.dtype), q, k.transpose(1, 2), beta=1.0, alpha=factor)
    else:
        scores = torch.matmul(q, k.transpose(1, 2))
        op, factor = scaling_for(config, layer)
        scores = scores * factor if op == "mul" else scores / factor
    cap = facts.attn_logit_softcap
    if cap:
        scores = torch.tanh(scores / cap) * cap
    query = torch.arange(tokens, device=scores.device).unsqueeze(1)
    key = torch.arange(tokens, device=scores.device).unsqueeze(0)
    allowed = key <= query
    window = _window(facts, layer)
    if window is not None:
        allowed = allowed & (key > query - window)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    return scores.unsqueeze(0)


def probs_from_scores(scores: torch.Tensor, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over keys in float32; with `sinks` ([heads]) the sink shares each denominator."""
    if sinks is None:
        return torch.softmax(scores.float(), dim=-1).to(scores.dtype)
    column = sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    combined = torch.cat([scores, column], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    return torch.softmax(combined, dim=-1)[..., :-1]
