"""The read-out that needs tensor arithmetic, written once for every torch backend.

`capture_attention` takes a model that satisfies `interp_core.protocol.InterpModel`, reads ONE
prompt (`[seq]`, `[1, seq]`, a list of ids or a string; a batch of several rows is refused, call
once per row: `interp_core.model_base.one_prompt`) and runs one `capture`, so steering made active
with `steer(model, ...)` applies as it would to the capture. Results carry no batch dimension.
The read-outs that need no arithmetic (`capture_residuals`, `generate_text`) are
`interp_core.model_base.ModelBase`'s, shared with every backend.

* `capture_attention`: per layer, the attention logits and weights `[heads, q, k]` and the value
  vectors per kv head `[pos, kv_heads, v_head_dim]`, so that for query head `h` and group size
  `g = heads // kv_heads`, `z[q, h] == probs[h, q, :] @ value[:, h // g]`. A family whose `z` is
  not that product (an output gate, a norm applied after mixing) is refused rather than handed a
  `value` that would not reproduce it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_core.model_base import one_prompt
from interp_core.sampling import check_lens_layers

__all__ = ["capture_attention", "one_prompt"]

# How far `probs @ value` may sit from the captured `z`, relative to z's largest magnitude, before
# the family is refused: the product is recomputed in float64, the model ran in its own dtype.
_TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}
_HALF_TOLERANCE = 2e-2


def _layers(model: Any, layers: Sequence[int] | None) -> list[int]:
    return check_lens_layers(layers, model.n_layers)


def _row(tensor: torch.Tensor) -> torch.Tensor:
    """The one row of a `[1, ...]` capture."""
    return tensor[0]


async def capture_attention(
    model: Any, tokens: Any, layers: Sequence[int]
) -> dict[int, dict[str, torch.Tensor]]:
    """`{layer: {"scores", "probs", "value"}}` for one prompt: scores and probs `[heads, q, k]`,
    value `[pos, kv_heads, v_head_dim]` with `z[q, h] == probs[h, q] @ value[:, h // g]`."""
    prompt = one_prompt(model, tokens, "capture_attention")
    chosen = _layers(model, layers)
    names = ("attn_scores", "attn_probs", "value", "z")
    points = [Address(name, layer) for layer in chosen for name in names]
    cache = await model.capture(prompt, points)
    out: dict[int, dict[str, torch.Tensor]] = {}
    for layer in chosen:
        scores, probs, value, z = (_row(cache[Address(name, layer)]) for name in names)
        out[layer] = {
            "scores": scores,
            "probs": probs,
            "value": _per_kv_head(model, layer, probs, value, z),
        }
    return out


def _per_kv_head(
    model: Any, layer: int, probs: torch.Tensor, value: torch.Tensor, z: torch.Tensor
) -> torch.Tensor:
    heads, _, keys = probs.shape
    width = z.shape[-1]
    v_head_dim = width // heads
    if v_head_dim * heads != width or value.shape[-1] % v_head_dim:
        message = (
            f"capture_attention cannot lay out layer {layer}'s values per head: z is {width} wide "
            f"for {heads} heads and value is {value.shape[-1]} wide"
        )
        raise PointUnsupported.build(message, None, "capture attn_probs, value and z directly")
    kv_heads = value.shape[-1] // v_head_dim
    if heads % kv_heads:
        message = f"layer {layer} has {heads} query heads, not a multiple of {kv_heads} kv heads"
        raise PointUnsupported.build(message, None, "capture attn_probs, value and z directly")
    per_kv = value.reshape(keys, kv_heads, v_head_dim)
    _check_reproduces_z(model, layer, probs, per_kv, z)
    return per_kv


def _check_reproduces_z(
    model: Any, layer: int, probs: torch.Tensor, value: torch.Tensor, z: torch.Tensor
) -> None:
    heads, queries, _ = probs.shape
    group = heads // value.shape[1]
    per_head = value.double().transpose(0, 1).repeat_interleave(group, dim=0)  # [heads, k, vd]
    mixed = probs.double() @ per_head
    want = z.double().reshape(queries, heads, -1).transpose(0, 1)
    scale = float(want.abs().max()) if want.numel() else 0.0
    error = float((mixed - want).abs().max()) if want.numel() else 0.0
    tolerance = _TOLERANCE.get(z.dtype, _HALF_TOLERANCE)
    if error > tolerance * max(scale, 1.0):
        architecture = getattr(getattr(model, "facts", None), "architecture", "this model")
        message = (
            f"capture_attention on {architecture} layer {layer}: probs @ value differs from z by "
            f"{error:.3g} (largest |z| {scale:.3g})"
        )
        why = (
            "this family changes the mixed values before o_proj (an output gate or a norm after "
            "mixing), so no per-head value reproduces z"
        )
        instead = "capture attn_probs, value and z directly and apply the family's own step"
        raise CapabilityUnsupported.build(message, why, instead)
