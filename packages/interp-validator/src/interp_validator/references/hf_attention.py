"""How the HF-hooks reference reads attention scores the model never returns.

Models hand back attention probabilities, not the scaled, softcapped and masked scores the
registry defines `attn_scores` as. `attention_calls` records, per layer, the inputs of the score
computation as the model's own modeling code runs it (its `eager_attention_forward`, or the
GPT-J, Falcon and BLOOM special cases), and `reference_scores` recomputes the scores from them.
`split_qkv` unpacks a fused q/k/v projection in each of the layouts the families use.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from interp_validator.references.hf_layouts import LayoutMismatch

__all__ = ["AttentionCall", "attention_calls", "reference_scores", "split_qkv"]


@contextmanager
def _patched(namespace: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(namespace, name)
    setattr(namespace, name, make(original))
    try:
        yield
    finally:
        setattr(namespace, name, original)


@dataclass
class AttentionCall:
    """The inputs of one layer's q·kᵀ as the model computed it."""

    query: torch.Tensor | None  # [b, heads, q, d] after RoPE (BLOOM: filled from its qkv output)
    key: torch.Tensor | None  # [b, kv_heads, k, d] after RoPE
    mask: torch.Tensor | None
    scaling: float  # the factor (or, with `divide`, the divisor) applied to q·kᵀ
    softcap: float | None = None
    divide: bool = False  # GPT-J and Falcon divide by sqrt(d) rather than multiply by its inverse
    baddbmm_bias: torch.Tensor | None = None  # BLOOM's ALiBi, added through baddbmm


@contextmanager
def attention_calls(hf_model: Any, mixers: dict[int, Any]) -> Iterator[dict[int, AttentionCall]]:
    """Record, per layer, the inputs of the attention-score computation as the model runs it."""
    calls: dict[int, AttentionCall] = {}
    layer_of = {id(mixer): layer for layer, mixer in mixers.items()}
    modeling = sys.modules[type(hf_model).__module__]
    stack: list[Any] = []
    hooks: list[Any] = []

    if hasattr(modeling, "eager_attention_forward"):

        def make(original: Any) -> Any:
            def eager(module: Any, query: Any, key: Any, value: Any, mask: Any, **kwargs: Any):
                if id(module) in layer_of:
                    scaling = kwargs.get("scaling")
                    if scaling is None:  # GPT-2 and Gemma-2's own default
                        scaling = query.shape[-1] ** -0.5
                    calls[layer_of[id(module)]] = AttentionCall(
                        query.detach().clone(),
                        key.detach().clone(),
                        mask,
                        scaling,
                        kwargs.get("softcap"),
                    )
                return original(module, query, key, value, mask, **kwargs)

            return eager

        stack.append(_patched(modeling, "eager_attention_forward", make))
    elif hasattr(modeling, "GPTJAttention"):
        # GPT-J computes attention in a method; wrap it per instance.
        for layer, mixer in mixers.items():

            def make_attn(original: Any, layer: int = layer, mixer: Any = mixer) -> Any:
                def attn(query: Any, key: Any, value: Any, attention_mask: Any = None) -> Any:
                    calls[layer] = AttentionCall(
                        query.detach().clone().float(),
                        key.detach().clone().float(),
                        attention_mask,
                        mixer.scale_attn,
                        divide=True,
                    )
                    return original(query, key, value, attention_mask)

                return attn

            stack.append(_patched(mixer, "_attn", make_attn))
    elif hasattr(modeling, "FalconAttention"):
        current: dict[str, int] = {}

        def make_rope(original: Any) -> Any:
            def rope(q: Any, k: Any, cos: Any, sin: Any, *args: Any, **kwargs: Any) -> Any:
                q_embed, k_embed = original(q, k, cos, sin, *args, **kwargs)
                layer = current["layer"]
                calls[layer] = AttentionCall(
                    q_embed.detach().clone(),
                    k_embed.detach().clone(),
                    current_mask[layer],
                    math.sqrt(q.shape[-1]),
                    divide=True,
                )
                return q_embed, k_embed

            return rope

        current_mask: dict[int, Any] = {}
        for layer, mixer in mixers.items():

            def enter(mod: Any, args: Any, kwargs: Any, layer: int = layer) -> None:
                current["layer"] = layer
                current_mask[layer] = kwargs.get("attention_mask")

            hooks.append(mixer.register_forward_pre_hook(enter, with_kwargs=True))
        stack.append(_patched(modeling, "apply_rotary_pos_emb", make_rope))
    elif hasattr(modeling, "BloomAttention"):
        for layer, mixer in mixers.items():
            # BLOOM computes scores inline from its fused projection (read after the forward)
            # and the ALiBi bias and mask it is handed.
            def enter(mod: Any, args: Any, kwargs: Any, layer: int = layer) -> None:
                calls[layer] = AttentionCall(
                    None,
                    None,
                    kwargs["attention_mask"],
                    mod.inv_norm_factor,
                    baddbmm_bias=kwargs["alibi"],
                )

            hooks.append(mixer.register_forward_pre_hook(enter, with_kwargs=True))
    else:
        message = (
            f"no attention recorder for {modeling.__name__}: the HF reference knows how to read "
            "attention scores from eager_attention_forward, GPT-J, Falcon and BLOOM only; add a "
            "recorder for this modeling file"
        )
        raise LayoutMismatch(message)

    for ctx in stack:
        ctx.__enter__()
    try:
        yield calls
    finally:
        for ctx in reversed(stack):
            ctx.__exit__(None, None, None)
        for handle in hooks:
            handle.remove()


def reference_scores(call: AttentionCall) -> torch.Tensor:
    """Scaled q·kᵀ (softcapped where the family caps) plus the mask: the registry's definition."""
    query, key = call.query, call.key
    assert query is not None and key is not None
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if call.baddbmm_bias is not None:
        # BLOOM: alibi.baddbmm(q, kᵀ, beta=1, alpha=1/sqrt(d)), then the mask.
        q_flat = query.reshape(batch * heads, q_len, dim)
        k_flat = key.reshape(batch * heads, -1, dim).transpose(-1, -2)
        scores = call.baddbmm_bias.baddbmm(
            batch1=q_flat, batch2=k_flat, beta=1.0, alpha=call.scaling
        )
        scores = scores.view(batch, heads, q_len, -1)
        return scores + call.mask if call.mask is not None else scores
    if kv_heads != heads:
        groups = heads // kv_heads
        key = key[:, :, None].expand(batch, kv_heads, groups, key.shape[2], dim)
        key = key.reshape(batch, heads, -1, dim)
    scores = torch.matmul(query, key.transpose(2, 3))
    scores = scores / call.scaling if call.divide else scores * call.scaling
    if call.softcap is not None:
        scores = torch.tanh(scores / call.softcap) * call.softcap
    if call.mask is not None:
        scores = scores + call.mask
    return scores


# --- fused projections ---------------------------------------------------------------------------
def split_qkv(
    fused: torch.Tensor, layout: str, heads: int, kv_heads: int, dim: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of a fused projection's output `[b, s, width]`, each flattened `[b, s, n*d]`."""
    b, s, _ = fused.shape
    if layout == "thirds":  # [q | k | v]: GPT-2, Phi-3, GPT-BigCode multi-query
        q, k, v = fused.split([heads * dim, kv_heads * dim, kv_heads * dim], dim=-1)
        return q, k, v
    if layout == "per_head":  # [head, (q, k, v), d]: GPT-NeoX, BLOOM
        per_head = fused.view(b, s, heads, 3, dim)
        q, k, v = (per_head[..., i, :].reshape(b, s, heads * dim) for i in range(3))
        return q, k, v
    if layout == "per_kv_group":  # [kv, (q * group, k, v), d]: Falcon's new decoder
        group = heads // kv_heads
        grouped = fused.view(b, s, kv_heads, group + 2, dim)
        q = grouped[:, :, :, :group].reshape(b, s, heads * dim)
        k = grouped[:, :, :, group].reshape(b, s, kv_heads * dim)
        v = grouped[:, :, :, group + 1].reshape(b, s, kv_heads * dim)
        return q, k, v
    message = f"unknown qkv layout {layout!r}: use 'thirds', 'per_head' or 'per_kv_group'"
    raise LayoutMismatch(message)
