"""Read-outs built from ordinary captures, written once for every torch backend.

Each function takes a model that satisfies `interp_core.protocol.InterpModel`, reads ONE prompt
(`[seq]`, `[1, seq]`, a list of ids or a string; a batch of several rows is refused, call once per
row) and runs one `capture`, so steering made active with `steer(model, ...)` applies as it
would to the capture. Results carry no batch dimension.

* `capture_attention`: per layer, the attention logits and weights `[heads, q, k]` and the value
  vectors per kv head `[pos, kv_heads, v_head_dim]`, so that for query head `h` and group size
  `g = heads // kv_heads`, `z[q, h] == probs[h, q, :] @ value[:, h // g]`. A family whose `z` is
  not that product (an output gate, a norm applied after mixing) is refused rather than handed a
  `value` that would not reproduce it.
* `capture_residuals`: `{layer: resid_post [seq, d_model]}` at the chosen layers.
* `generate_text`: the text of one generation; a string prompt is tokenized first (with BOS).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument, PointUnsupported
from interp_core.sampling import check_lens_layers

__all__ = ["capture_attention", "capture_residuals", "generate_text", "one_prompt"]

# How far `probs @ value` may sit from the captured `z`, relative to z's largest magnitude, before
# the family is refused: the product is recomputed in float64, the model ran in its own dtype.
_TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}
_HALF_TOLERANCE = 2e-2


def _layers(model: Any, layers: Sequence[int] | None) -> list[int]:
    return check_lens_layers(layers, model.n_layers)


def one_prompt(model: Any, tokens: Any, method: str) -> Any:
    """`tokens` as one prompt (`[1, seq]` or a flat list); a batch of several rows is refused."""
    if isinstance(tokens, str):
        tokens = model.to_tokens(tokens)
    shape = getattr(tokens, "shape", None)
    if shape is not None:
        rows = 1 if len(shape) < 2 else int(shape[0])
        if len(shape) == 1:
            tokens = tokens.unsqueeze(0)
    elif isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], (list, tuple)):
        rows = len(tokens)
    else:
        rows = 1
    if rows != 1:
        message = f"{method} reads one prompt; got a batch of {rows} rows"
        why = "its results are per prompt (no batch dimension), as the protocol documents them"
        instead = f"call {method} once per row, or capture() for a batched forward"
        raise InvalidArgument.build(message, why, instead)
    return tokens


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


async def capture_residuals(
    model: Any, tokens: Any, layers: Sequence[int] | None = None, *, detach: bool = True
) -> dict[int, torch.Tensor]:
    """`{layer: resid_post [seq, d_model]}` at `layers` (default: all) for one prompt."""
    streams = getattr(getattr(model, "facts", None), "n_streams", 1)
    if streams > 1:
        message = f"capture_residuals on a trunk of {streams} residual streams"
        why = "resid_post there is a stack of streams, not one d_model-wide residual"
        instead = "capture resid_streams.L (or resid_post.L.stream-K) with capture()"
        raise CapabilityUnsupported.build(message, why, instead)
    prompt = one_prompt(model, tokens, "capture_residuals")
    chosen = _layers(model, layers)
    points = [Address("resid_post", layer) for layer in chosen]
    kwargs = {} if detach else {"detach": False}
    cache = await model.capture(prompt, points, **kwargs)
    return {layer: _row(cache[point]) for layer, point in zip(chosen, points, strict=True)}


async def generate_text(
    model: Any,
    prompt: Any,
    *,
    max_tokens: int = 200,
    temperature: float = 1.0,
    seed: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    steering: Any = None,
) -> str:
    """The generated text (prompt excluded) of one generation of up to `max_tokens` tokens."""
    generation = await model.generate(
        one_prompt(model, prompt, "generate_text"),
        max_new_tokens=max_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        steering=steering,
    )
    return str(generation.text)
