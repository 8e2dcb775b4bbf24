"""Does a package import with only what it declares? A fresh interpreter that refuses the rest.

The core must import with the standard library alone and the sizer with the core beside it; if
either ever imported a tensor library, every user of it would silently grow gigabytes. Each
suite's purity test imports every module of its package in a child interpreter whose first
import finder refuses the blocked top-level names (and, when `allowed` is given, anything that
is neither the standard library nor an allowed package), so a stray import fails loudly instead
of quietly finding an installed copy.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence

__all__ = ["HEAVY", "import_everything"]

# The libraries no pure package may reach at import time.
HEAVY = ("torch", "numpy", "transformers", "vllm", "safetensors", "huggingface_hub", "jax")

_PRELUDE = textwrap.dedent(
    """
    import importlib, importlib.abc, pkgutil, sys

    BLOCKED = {blocked!r}
    ALLOWED = {allowed!r}
    SKIP = {skip!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in BLOCKED:
                raise ImportError(f"blocked for the purity test: {{name}}")
            if ALLOWED is not None and top not in sys.stdlib_module_names and top not in ALLOWED:
                raise ImportError(f"not standard library: {{name}}")
            return None

    sys.meta_path.insert(0, Refuse())
    package = importlib.import_module({package!r})
    names = [{package!r}]
    for info in pkgutil.walk_packages(package.__path__, {package!r} + "."):
        if not info.name.startswith(SKIP):  # an empty tuple skips nothing
            names.append(info.name)
    for name in names:
        __import__(name)
    print(len(names))
    """
)


def import_everything(
    package: str,
    *,
    allowed: Sequence[str] | None = None,
    blocked: Sequence[str] = HEAVY,
    skip: Sequence[str] = (),
    after: str = "",
) -> subprocess.CompletedProcess[str]:
    """Import `package` and every module below it (but those starting with a `skip` prefix) in a
    fresh interpreter refusing `blocked`, and with `allowed` given, anything outside the
    standard library and `allowed`; then run `after`. Its stdout ends with the module count."""
    code = _PRELUDE.format(
        package=package,
        blocked=tuple(blocked),
        allowed=None if allowed is None else tuple(allowed),
        skip=tuple(skip),
    )
    return subprocess.run(
        [sys.executable, "-c", code + after + "\n"], capture_output=True, text=True, check=False
    )
