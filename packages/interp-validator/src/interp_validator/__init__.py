"""interp-engine: cross-engine validation and benchmarks.

The package exists so the shape of the monorepo is visible; its implementation is tracked in the
project issues and lands in its own release.
"""

from interp_validator.__about__ import __version__

__all__ = ["__version__"]
