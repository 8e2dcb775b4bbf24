"""interp-core must import with nothing but the standard library.

The sizer, the docs build and the validator's driver read points and facts without a tensor
library; if the core ever imported torch, all of them would silently grow a multi-gigabyte
dependency. These tests import every module in a fresh interpreter where the heavy libraries
cannot be imported at all.
"""

from __future__ import annotations

import interp_core
from interp_core.testing.purity import import_everything


def _run(strict: bool) -> int:
    # Strict: the standard library alone, without the conformance kit (a pytest plugin, so it
    # alone may import pytest); otherwise every module, refusing only the tensor libraries.
    if strict:
        result = import_everything(
            "interp_core", allowed=("interp_core",), skip=("interp_core.testing",)
        )
    else:
        result = import_everything("interp_core")
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1])


def test_every_core_module_imports_with_only_the_standard_library() -> None:
    # The conformance kit (interp_core.testing) is a pytest plugin, so it alone may import pytest.
    imported = _run(strict=True)
    assert imported >= 8  # address, points, facts, shapes, protocol, backends, sync, errors, ...


def test_every_module_including_the_kit_imports_without_tensor_libraries() -> None:
    # The kit adds modules the strict run skipped, so more modules import here.
    assert _run(strict=False) > _run(strict=True)


def test_the_blocking_finder_really_blocks() -> None:
    # Guard against a purity test that cannot fail: the same prelude must refuse torch.
    result = import_everything("interp_core", after="import numpy")
    assert result.returncode != 0
    assert "blocked for the purity test: numpy" in result.stderr


def test_core_declares_no_runtime_dependencies() -> None:
    from importlib.metadata import requires

    runtime = [r for r in (requires("interpoint-core") or []) if "extra ==" not in r]
    assert runtime == [], runtime
    assert interp_core.__version__
