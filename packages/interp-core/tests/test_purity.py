"""interp-core must import with nothing but the standard library.

The sizer, the docs build and the validator's driver read points and facts without a tensor
library; if the core ever imported torch, all of them would silently grow a multi-gigabyte
dependency. These tests import every module in a fresh interpreter where the heavy libraries
cannot be imported at all.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import interp_core

BLOCKED = ("torch", "numpy", "transformers", "vllm", "safetensors", "huggingface_hub", "jax")

# A finder placed first on sys.meta_path that refuses the blocked top-level names; a module that
# tries to import one fails loudly instead of quietly picking up an installed copy.
_PRELUDE = textwrap.dedent(
    """
    import importlib.abc, pkgutil, sys

    BLOCKED = {blocked!r}
    STRICT = {strict!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in BLOCKED:
                raise ImportError(f"blocked for the purity test: {{name}}")
            if STRICT and top not in sys.stdlib_module_names and top not in ("interp_core",):
                raise ImportError(f"not standard library: {{name}}")
            return None

    sys.meta_path.insert(0, Refuse())
    import interp_core
    names = ["interp_core"]
    for info in pkgutil.walk_packages(interp_core.__path__, "interp_core."):
        if STRICT and info.name.startswith("interp_core.testing"):
            continue
        names.append(info.name)
    for name in names:
        __import__(name)
    print(len(names))
    """
)


def _run(strict: bool) -> int:
    code = _PRELUDE.format(blocked=BLOCKED, strict=strict)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip())


def test_every_core_module_imports_with_only_the_standard_library() -> None:
    # The conformance kit (interp_core.testing) is a pytest plugin, so it alone may import pytest.
    imported = _run(strict=True)
    assert imported >= 8  # address, points, facts, shapes, protocol, backends, sync, errors, ...


def test_every_module_including_the_kit_imports_without_tensor_libraries() -> None:
    # The kit adds modules the strict run skipped, so more modules import here.
    assert _run(strict=False) > _run(strict=True)


def test_the_blocking_finder_really_blocks() -> None:
    # Guard against a purity test that cannot fail: the same prelude must refuse torch.
    code = _PRELUDE.format(blocked=BLOCKED, strict=False) + "\nimport numpy\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "blocked for the purity test: numpy" in result.stderr


def test_core_declares_no_runtime_dependencies() -> None:
    from importlib.metadata import requires

    runtime = [r for r in (requires("interpoint-core") or []) if "extra ==" not in r]
    assert runtime == [], runtime
    assert interp_core.__version__
