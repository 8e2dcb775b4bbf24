"""What can go wrong while sizing, and what should the user do instead?

Every refusal the sizer raises derives from `interp_core.errors.InterpError`, so a caller that
catches the engine's errors catches these too. Messages name what was asked, why it cannot be
priced, and what to ask instead (`InterpError.build`).
"""

from __future__ import annotations

from interp_core.errors import InterpError

__all__ = [
    "HubUnavailable",
    "SizerError",
    "UnknownGpu",
    "UnknownModel",
    "UnsupportedSetting",
]


class SizerError(InterpError, ValueError):
    """Base of the sizer's refusals."""


class UnknownModel(SizerError):
    """A model string that is no file, folder, cached repo, bundled config or reachable repo."""


class UnknownGpu(SizerError):
    """A GPU name that is not in the catalogue."""


class UnsupportedSetting(SizerError):
    """A combination of settings the chosen backend cannot run (fp8 on eager, TP that does not
    divide the heads, captures on vllm-generate, ...)."""


class HubUnavailable(SizerError):
    """The model is not on this machine and the Hub cannot be reached (offline, or the `hub`
    extra is not installed)."""
