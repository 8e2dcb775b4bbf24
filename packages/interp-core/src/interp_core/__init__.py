"""interp-core."""

from interp_core.__about__ import __version__

__all__ = ["__version__"]
