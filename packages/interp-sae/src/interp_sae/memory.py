"""How much memory will an SAE take, and is it there? Answered from the file headers alone.

A safetensors file starts with its header (every tensor's dtype and shape), an `.npz` archive
holds `.npy` members whose headers say the same; neither needs the weights read. The SAE is held
in float32 (wider stays wider), so that is the size counted.
"""

from __future__ import annotations

import json
import math
import struct
import zipfile
from pathlib import Path

import numpy as np
import torch

from interp_core.errors import CapabilityUnsupported

__all__ = ["available_bytes", "check_fits", "npz_shapes", "safetensors_shapes", "size_text"]

_ITEMSIZE = {"F64": 8, "I64": 8, "U64": 8}


def safetensors_shapes(path: Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """name -> (shape, bytes per element once loaded) from a safetensors header."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    return {
        name: (tuple(entry["shape"]), _ITEMSIZE.get(entry["dtype"], 4))
        for name, entry in header.items()
        if name != "__metadata__"
    }


def npz_shapes(path: Path) -> dict[str, tuple[tuple[int, ...], int]]:
    """name -> (shape, bytes per element once loaded) from the headers of an .npz's members."""
    shapes = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            with archive.open(member) as handle:
                version = np.lib.format.read_magic(handle)
                reader = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, _, dtype = reader(handle)
            shapes[member.removesuffix(".npy")] = (tuple(shape), max(4, dtype.itemsize))
    return shapes


def size_text(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError


def available_bytes(device: torch.device) -> int | None:
    """Free memory on `device` (None when it cannot be told)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return None
    return None


def check_fits(
    shapes: dict[str, tuple[tuple[int, ...], int]],
    device: torch.device,
    budget: int | None,
    what: str,
) -> int:
    """Refuse (CapabilityUnsupported) before loading when the tensors exceed `budget`.

    `budget` is the caller's limit in bytes; None means the device's free memory. Returns the
    size in bytes.
    """
    total = sum(math.prod(shape) * size for shape, size in shapes.values())
    limit = budget if budget is not None else available_bytes(device)
    source = "memory_budget_bytes" if budget is not None else f"free memory on {device}"
    if limit is not None and total > limit:
        error = CapabilityUnsupported.build(
            f"loading {what} needs {size_text(total)} on {device}",
            f"only {size_text(limit)} is available ({source})",
            "free memory, load it on another device, or raise memory_budget_bytes",
        )
        raise error
    return total
