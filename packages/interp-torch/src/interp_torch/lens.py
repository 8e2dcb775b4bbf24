"""How are fitted lenses, probes and top-k read-outs computed on tensors, once for every backend?

* `read_lens(source, facts)`: a fitted lens from a path (any of the three layouts of
  `interp_core.readouts`) or a mapping, checked against the model before any matrix reaches a
  device. Files are read with loaders that cannot execute code: safetensors, or
  `torch.load(weights_only=True)` for the `.pt` layouts (never plain pickle).
* `save_lens(path, jacobians, facts)`: our safetensors layout (`J.<layer>`, with the model's
  layer count and width in the metadata).
* `transport(rows, J_bar)`: `J_bar @ h` for each row `h`, i.e. `rows @ J_bar.T`, in float32 (or
  float64 when the rows are), cast back to the rows' dtype for the model's own final norm.
* `apply_directions(rows, vectors, bias, nonlinearity)`: a `DirectionSet` on `[..., width]` rows
  -> `[..., k]` float32.
* `top_tokens(logits, k)`: softmax over the full vocabulary, then the k best.
* `masked_top_tokens(logits, k, mask)`: the same probabilities, ranked among the ids a
  `[vocab]` boolean mask allows (the lens's "words only" read-out).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from interp_core.errors import InvalidArgument
from interp_core.readouts import (
    LENS_FORMAT,
    TopTokens,
    check_jacobians,
    jacobian_mapping,
    load_torch_lens,
    require_lens_file,
)

__all__ = [
    "apply_directions",
    "lens_nbytes",
    "masked_top_tokens",
    "read_lens",
    "save_lens",
    "top_tokens",
    "transport",
]


def _load_file(path: Path) -> tuple[Any, dict[str, str]]:
    require_lens_file(path)
    if path.suffix == ".safetensors":
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(str(path), framework="pt") as handle:
            meta = dict(handle.metadata() or {})
        return load_file(str(path)), meta
    return load_torch_lens(torch, path), {}


def read_lens(source: Any, facts: Any) -> dict[int, torch.Tensor]:
    """`{layer: J_bar [d_model, d_model]}` from a path or a mapping, refused (naming the lens's
    shape and the model's) when it was fitted for another model."""
    meta: dict[str, str] = {}
    if isinstance(source, str | Path):
        name = str(source)
        checkpoint, meta = _load_file(Path(source))
        if meta.get("format") not in (None, LENS_FORMAT):
            message = f"{name} is a safetensors file of format {meta['format']!r}, not a lens"
            raise InvalidArgument(message)
        mapping = jacobian_mapping(checkpoint, name)
    elif isinstance(source, Mapping):
        name = "the lens mapping"
        flat = all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in source)
        mapping = dict(source) if flat and source else jacobian_mapping(source, name)
    else:
        message = (
            f"set_lens_jacobians takes a path or a mapping of layer -> J_bar, got "
            f"{type(source).__name__}"
        )
        raise InvalidArgument(message)
    checked = check_jacobians(mapping, facts, name, meta)
    out = {}
    for layer, matrix in checked.items():
        if not isinstance(matrix, torch.Tensor):
            matrix = torch.as_tensor(matrix)
        if not matrix.is_floating_point() or not bool(torch.isfinite(matrix).all()):
            message = f"{name}'s J_bar for layer {layer} is not a finite float matrix"
            raise InvalidArgument(message)
        out[layer] = matrix.detach()
    return out


def save_lens(
    path: str | Path, jacobians: Mapping[int, torch.Tensor], facts: Any, model: str | None = None
) -> Path:
    """Write `jacobians` in our safetensors layout (checked against `facts` first)."""
    from safetensors.torch import save_file

    checked = check_jacobians(dict(jacobians), facts, "the lens to save")
    meta = {"format": LENS_FORMAT, "n_layers": str(facts.n_layers), "d_model": str(facts.d_model)}
    if model:
        meta["model"] = str(model)
    tensors = {f"J.{layer}": m.detach().to("cpu").contiguous() for layer, m in checked.items()}
    save_file(tensors, str(path), metadata=meta)
    return Path(path)


def lens_nbytes(jacobians: Mapping[int, torch.Tensor]) -> int:
    return sum(m.numel() * m.element_size() for m in jacobians.values())


def _wide(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def transport(rows: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """`J_bar @ h` for every row `h` of `rows` `[..., d_model]`, in the rows' dtype."""
    wide = _wide(rows.dtype)
    moved = rows.to(wide) @ matrix.to(device=rows.device, dtype=wide).T
    return moved.to(rows.dtype)


def apply_directions(
    rows: torch.Tensor,
    vectors: torch.Tensor,
    bias: torch.Tensor | None = None,
    nonlinearity: str = "none",
) -> torch.Tensor:
    """`[..., width]` rows against `[k, width]` vectors: `[..., k]` float32 values."""
    wide = _wide(rows.dtype)
    out = rows.to(wide) @ vectors.to(device=rows.device, dtype=wide).T
    if bias is not None:
        out = out + bias.to(device=rows.device, dtype=wide)
    if nonlinearity == "relu":
        out = out.clamp_min(0)
    return out.to(torch.float32)


def top_tokens(logits: torch.Tensor, k: int) -> TopTokens:
    """The k most probable tokens per row: ids int64 and probabilities float32, best first."""
    probs = torch.softmax(logits.float(), dim=-1)
    values, indices = probs.topk(min(int(k), probs.shape[-1]), dim=-1)
    return TopTokens(indices.to(torch.int64), values)


def masked_top_tokens(logits: torch.Tensor, k: int, mask: torch.Tensor | None) -> TopTokens:
    """`top_tokens`, ranked only among the ids `mask` allows; probabilities stay over the full
    vocabulary (the log-normaliser is taken before masking). A mask shorter than the logits
    (a head padded past the tokenizer's vocabulary) allows none of the padding ids."""
    if mask is None:
        return top_tokens(logits, k)
    logits = logits.float()
    log_z = logits.logsumexp(dim=-1, keepdim=True)
    vocab = int(logits.shape[-1])
    allowed = mask.to(device=logits.device, dtype=torch.bool).flatten()[:vocab]
    if allowed.shape[0] < vocab:
        allowed = torch.nn.functional.pad(allowed, (0, vocab - allowed.shape[0]), value=False)
    ranked = logits.masked_fill(~allowed, float("-inf"))
    chosen = min(int(k), vocab)
    indices = ranked.topk(chosen, dim=-1).indices
    probs = (logits.gather(-1, indices) - log_z).exp()
    return TopTokens(indices.to(torch.int64), probs)
