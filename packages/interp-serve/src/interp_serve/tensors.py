"""Activations as safetensors bytes, both ways.

safetensors is a flat header plus raw little-endian buffers: nothing in it can run code, which is
why it is the only binary format the server emits. The server writes whatever tensor library the
backend returns (torch on the first-party backends, numpy otherwise) through the matching
safetensors module; the client reads into torch when asked to (the default when torch is
installed) or numpy, which has no bfloat16, so a bfloat16 capture read as numpy is refused.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Mapping
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "TENSOR_TYPES",
    "decode",
    "describe",
    "encode",
    "metadata",
    "nbytes",
    "resolve_tensor_type",
]

TENSOR_TYPES = ("torch", "numpy")


def dtype_name(tensor: Any) -> str:
    """'float32', 'bfloat16', ... for a torch tensor or a numpy array."""
    return str(tensor.dtype).removeprefix("torch.")


def nbytes(tensor: Any) -> int:
    """Bytes of a torch tensor's or a numpy array's values, by its own element size."""
    size = tensor.element_size() if hasattr(tensor, "element_size") else tensor.itemsize
    return math.prod(int(d) for d in tensor.shape) * int(size)


def describe(tensors: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Shape and dtype of each tensor, the metadata a response carries next to its handle."""
    return {
        key: {"shape": [int(d) for d in t.shape], "dtype": dtype_name(t), "bytes": nbytes(t)}
        for key, t in tensors.items()
    }


def _is_torch(tensor: Any) -> bool:
    return type(tensor).__module__.startswith("torch")


def encode(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """safetensors bytes of `{name: tensor}` (CPU, contiguous copies), with string metadata."""
    extra = dict(metadata) if metadata else None
    if tensors and all(_is_torch(t) for t in tensors.values()):
        from safetensors.torch import save

        # Two points may be one tensor (embeddings is resid_pre.0 on most models); safetensors
        # refuses shared storage, so every tensor after the first on a storage is copied.
        seen: set[int] = set()
        plain = {}
        for key, tensor in tensors.items():
            cpu = tensor.detach().to("cpu").contiguous()
            storage = cpu.untyped_storage().data_ptr()
            plain[key] = cpu.clone() if storage in seen else cpu
            seen.add(storage)
        return save(plain, metadata=extra)
    import numpy as np
    from safetensors.numpy import save as save_numpy

    arrays = {k: np.ascontiguousarray(np.asarray(t)) for k, t in tensors.items()}
    return save_numpy(arrays, metadata=extra)


def metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` strings of safetensors bytes (the header is 8 bytes of length, then
    JSON), read without touching the tensors."""
    if len(data) < 8:
        message = f"{len(data)} bytes are not a safetensors file (its header alone takes 8)"
        raise InvalidArgument(message)
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    found = header.get("__metadata__") or {}
    return {str(k): str(v) for k, v in found.items()}


def resolve_tensor_type(tensor_type: str | None) -> str:
    """The tensor library the client returns: torch when installed, unless numpy is asked for."""
    if tensor_type is None or tensor_type == "auto":
        return "torch" if importlib.util.find_spec("torch") is not None else "numpy"
    if tensor_type not in TENSOR_TYPES:
        message = (
            f"tensor_type={tensor_type!r} is not one the remote backend returns: it gives "
            f"{' or '.join(repr(t) for t in TENSOR_TYPES)} arrays; pass one of those, or 'auto'"
        )
        raise InvalidArgument(message)
    return tensor_type


def decode(data: bytes, tensor_type: str) -> dict[str, Any]:
    """`{name: tensor}` from safetensors bytes, as torch tensors or numpy arrays."""
    if tensor_type == "torch":
        from safetensors.torch import load

        return dict(load(data))
    from safetensors.numpy import load as load_numpy

    try:
        return dict(load_numpy(data))
    except (TypeError, ValueError) as error:
        message = (
            f"the server's activations cannot be read as numpy arrays ({error}); numpy has no "
            f"bfloat16. Load the remote model with tensor_type='torch' (needs torch installed)"
        )
        raise CapabilityUnsupported(message) from error
