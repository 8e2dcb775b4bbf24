"""interp-engine: one import for the whole public API.

`import interp_engine` re-exports everything public in `interp_core` (addresses, points, facts,
`load_model`, the free functions, steering). Backends are found through the `interp.backends`
entry points, so installing `interp-engine[vllm]` makes `load_model(..., backend="vllm")` work
without a new import.
"""

from interp_core import *  # noqa: F403 - the umbrella's job is to re-export the core's API
from interp_core import __all__ as _core_all
from interp_engine.__about__ import __version__

__all__ = [name for name in _core_all if name != "__version__"] + ["__version__"]
