"""The CPU allocator setting the eager backend applies at load (see interp_eager.allocator)."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str, **env: str) -> str:
    import os

    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return result.stdout.strip()


def test_glibc_keeps_freed_memory_once_applied() -> None:
    # In a fresh process: applied, idempotent, and reported as in effect.
    code = "from interp_eager.allocator import keep_freed_memory as k; print(k(), k())"
    assert _run(code) == "True True"


def test_the_opt_out_leaves_malloc_alone() -> None:
    code = "from interp_eager.allocator import keep_freed_memory as k; print(k())"
    assert _run(code, INTERP_EAGER_KEEP_HEAP="0") == "False"
