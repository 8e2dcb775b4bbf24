"""Why does capturing many points cost more than its hooks, and what does the backend do about it?

A plain forward pass frees each activation soon after making it, and glibc's malloc hands the
same memory to the next one. A capture keeps its tensors alive, so those buffers cannot be
reused: glibc then maps fresh pages from the kernel for every large activation (and trims them
back afterwards), and the page faults — not the hooks — made "capture every point" cost 1.40×
a plain forward on the CPU (measured by the validator's P2 benchmark, `interp-bench`).

`keep_freed_memory()` asks glibc, once per process, to serve large blocks from its heap and to
keep freed heap memory instead of returning it to the kernel (mallopt M_MMAP_THRESHOLD at its
32 MiB maximum, M_TRIM_THRESHOLD 1 GiB). The cost is a resident size that stays near the
process's high-water mark. The eager backend calls it when it loads a model on the CPU; set
INTERP_EAGER_KEEP_HEAP=0 to opt out. Elsewhere (not glibc, not Linux) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["ENV_VAR", "keep_freed_memory"]

ENV_VAR = "INTERP_EAGER_KEEP_HEAP"
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's maximum on 64-bit systems
_TRIM_THRESHOLD = 1024 * 1024 * 1024

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the malloc settings once; True when they are in effect for this process."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get(ENV_VAR, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    )
    return _applied
