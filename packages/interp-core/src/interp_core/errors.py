"""Every refusal the engine can raise, in one place.

A refusal names three things: what was asked, why it cannot be served, and what to do instead.
`InterpError.build` assembles that message so every subclass reads the same way; callers pass
the parts rather than a finished sentence, which keeps the voice uniform across packages.
"""

from __future__ import annotations

__all__ = [
    "AddressError",
    "BackendNotInstalled",
    "BackendUnavailable",
    "CapabilityUnsupported",
    "ConfigError",
    "DuplicateBackend",
    "GradientsUnsupported",
    "HubKernelUnsupported",
    "InterpError",
    "InvalidArgument",
    "InvalidBackend",
    "NestedEventLoop",
    "NoChatTemplateError",
    "PointNotCaptured",
    "PointNotWritable",
    "PointUnsupported",
    "SteeringSpecError",
    "UnknownBackend",
    "UnknownCoordinate",
    "UnknownPoint",
]


class InterpError(Exception):
    """Base of every error interp-engine raises on purpose."""

    @classmethod
    def build(cls, what: str, why: str | None = None, instead: str | None = None) -> InterpError:
        """An instance whose message is `what: why. instead`, empty parts left out."""
        message = what
        if why:
            message = f"{message}: {why}"
        if instead:
            message = f"{message.rstrip('.')}. {instead}"
        return cls(message)


class AddressError(InterpError, ValueError):
    """A string or tuple that is not a well-formed address."""


class UnknownCoordinate(AddressError):
    """An address carries a coordinate this version does not know.

    Distinct from `AddressError` because it usually means version skew: an address written by a
    newer interp-core read by an older one.
    """


class UnknownPoint(AddressError):
    """A point name that is not one of the standardized points."""


class ConfigError(InterpError, ValueError):
    """A model config that cannot be read into model facts."""


class PointUnsupported(InterpError, ValueError):
    """A well-formed point that this model or this backend cannot serve."""


class PointNotCaptured(InterpError, KeyError):
    """A cache lookup for a point that was not captured."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a refusal should read as prose.
        return str(self.args[0]) if self.args else ""


class CapabilityUnsupported(InterpError, ValueError):
    """An argument a backend cannot honour (raised before any work, never a warning)."""


class SteeringSpecError(InterpError, ValueError):
    """A steering specification that is malformed or contradicts the model."""


class PointNotWritable(SteeringSpecError, CapabilityUnsupported):
    """A write at a point this backend reads but cannot write here, raised alike by every backend.

    A subclass of both classes the backends once raised for it (eager `SteeringSpecError`, vLLM
    `CapabilityUnsupported`), so an `except` clause written for either still catches it.
    """


class UnknownBackend(InterpError, ValueError):
    """A backend name nothing registers."""


class BackendNotInstalled(UnknownBackend, ImportError):
    """A known first-party backend whose package is not installed."""


class BackendUnavailable(InterpError, RuntimeError):
    """A registered backend whose probe says it cannot run on this machine."""


class DuplicateBackend(InterpError, RuntimeError):
    """Two entry points register the same backend name."""


class InvalidBackend(InterpError, RuntimeError):
    """An `interp.backends` entry point that does not load a usable backend class.

    It failed to import, named something that is not a class, lacks `probe`/`supports`/`load`,
    or carries a `name` different from its entry-point name.
    """


class InvalidArgument(InterpError, ValueError):
    """An argument that is malformed whatever the backend (e.g. `num_gpus=0`)."""


class NestedEventLoop(InterpError, RuntimeError):
    """A sync free function called from inside a running event loop."""


class GradientsUnsupported(CapabilityUnsupported):
    """Gradients asked of a model or backend that cannot produce them.

    E.g. `detach=False` on an eager model loaded without `requires_grad=True`, or gradients through
    a vLLM forward pass (its workers run under inference mode).
    """


class HubKernelUnsupported(CapabilityUnsupported):
    """A checkpoint whose forward reaches for a hub kernel that cannot run on this GPU.

    E.g. DeepSeek-V4's FP8 paths on the eager backend off Hopper: transformers loads the
    `kernels-community/deep-gemm` build, which targets compute capability 9.0 only.
    """


class NoChatTemplateError(CapabilityUnsupported):
    """A chat rendering asked of a tokenizer that carries no chat template."""


class EngineDied(InterpError, RuntimeError):
    """The model's engine stopped under it: a worker, a node or the engine core died.

    The request it was serving fails with this error, and so does every later call, until the
    model is shut down and loaded again (a supervisor's job for a server).
    """
