"""Direct feature attribution (DFA) for SAEs that read `z` (TransformerLens' `attn.hook_z`).

At a query position t, head h's slice of `z` is the attention-weighted sum of the value vectors,
`z[t, h] = Σ_s pattern[h, t, s] · v[s, kv(h)]`, so the linear part of the feature's encoder,
`z[t] · W_enc[:, f]`, splits exactly over source positions s:
`Σ_h pattern[h, t, s] · (v[s, kv(h)] · W_enc[h, :, f])`. Those per-source terms are the DFA; they
sum to the pre-activation less the encoder's biases. It is computed where that identity holds
(no output gate on `z`, no run-time input normalisation) and left out elsewhere.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dfa_points", "dfa_values"]


def dfa_points(sae: Any, model: Any) -> list[str]:
    """The extra points DFA needs for `sae` on `model`, or [] when it has none (not a z SAE,
    the identity does not hold, or the backend cannot capture those points here)."""
    address = sae.address
    facts = model.facts
    if address.name != "z" or address.layer is None:
        return []
    if sae.normalize != "none" or facts.gated_attn_output or facts.mla is not None:
        return []
    points = [f"attn_probs.{address.layer}", f"value.{address.layer}"]
    supports = getattr(model, "supports", None)
    if supports is None or not all(supports(point) for point in points):
        return []
    return points


def dfa_values(sae: Any, feature: int, target: int, cache: Any, facts: Any) -> dict[str, Any]:
    """The contract's dfa fields of `feature` at query position `target`."""
    layer = sae.address.layer
    pattern = cache[f"attn_probs.{layer}"][0].float().cpu()  # [heads, query, key]
    values = cache[f"value.{layer}"][0].float().cpu()  # [seq, n_kv_heads * head_dim]
    heads, seq = int(pattern.shape[0]), int(pattern.shape[-1])
    kv_heads = facts.n_kv_heads
    values = values.reshape(seq, kv_heads, -1)
    width = int(values.shape[-1])
    encoder = sae.W_enc[:, feature].float().cpu().reshape(heads, width)  # [heads, head_dim]
    # Grouped-query heads share their kv head: head h reads kv head h // (heads / kv_heads).
    shared = values[:, [h * kv_heads // heads for h in range(heads)]]  # [seq, heads, head_dim]
    per_head = (shared * encoder[None]).sum(-1)  # [seq, heads]: v[s, kv(h)] · W_enc[h, :, f]
    terms = (pattern[:, target, :].T * per_head).sum(-1)  # [seq]
    listed = [float(v) for v in terms.tolist()]
    return {"dfaValues": listed, "dfaTargetIndex": target, "dfaMaxValue": max(listed)}
