"""interp-engine: the eager backend (HF transformers in-process).

The package exists so the shape of the monorepo is visible; its implementation is tracked in the
project issues and lands in its own release.
"""

from interp_eager.__about__ import __version__

__all__ = ["__version__"]
