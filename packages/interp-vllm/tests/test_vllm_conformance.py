"""The interp-core conformance kit, run against the three vLLM backends on the tiny Llama.

`vllm` (hooked) and `vllm-static` (resid_post at every layer, declared at load) must pass every
check exactly as the eager backend does; `vllm-generate` must pass the generation checks and
refuse every capture, lens and steering call up front, naming a backend that serves it. Each
class overrides `interp_model_factory`, so each backend gets its own engine (~30 s to start).

The plugin is enabled here rather than in conftest.py: pytest refuses `pytest_plugins` in a
conftest below the rootdir.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from vllm_helpers import family_engines

from interp_core.testing import Conformance

pytest_plugins = ["interp_core.testing.plugin"]
pytestmark = pytest.mark.slow


class TestHookedConformance(Conformance):
    interp_families = ("llama",)

    @pytest.fixture(scope="class")
    def interp_model_factory(self) -> Callable[[str], Any]:
        return family_engines("vllm")


class TestStaticConformance(Conformance):
    interp_families = ("llama",)

    @pytest.fixture(scope="class")
    def interp_model_factory(self) -> Callable[[str], Any]:
        return family_engines("vllm-static", static_points="auto")


class TestGenerateOnlyConformance(Conformance):
    interp_families = ("llama",)
    captures = False

    @pytest.fixture(scope="class")
    def interp_model_factory(self) -> Callable[[str], Any]:
        # Eager mode keeps the CPU engine start at ~30 s; vLLM's default compiles for ~45 s more.
        return family_engines("vllm-generate", extra_vllm_kwargs={"enforce_eager": True})
