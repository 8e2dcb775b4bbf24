"""Tensors across vLLM's RPC as raw bytes, shape and dtype name (its serializer carries none)."""

from __future__ import annotations

import torch

__all__ = ["decode_tensor", "encode_tensor"]


def encode_tensor(tensor: torch.Tensor) -> tuple[bytes, list[int], str]:
    """A tensor as raw bytes, shape and dtype name: what vLLM's RPC can carry."""
    flat = tensor.detach().to("cpu").contiguous()
    raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return raw, list(flat.shape), str(flat.dtype).removeprefix("torch.")


def decode_tensor(raw: bytes, shape: list[int], dtype: str) -> torch.Tensor:
    """The inverse of `encode_tensor`: a fresh, writable tensor owned by the caller."""
    kind = getattr(torch, dtype)
    if not raw:
        return torch.empty(shape, dtype=kind)
    # The bytearray is already the caller's own writable copy: no second copy.
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(kind).reshape(shape)
