"""interpoint: one import for the whole public API.

`import interpoint` re-exports everything public in `interp_core` (addresses, points, facts,
`load_model`, the free functions, steering). Backends are found through the `interp.backends`
entry points, so installing `interpoint[vllm]` makes `load_model(..., backend="vllm")` work
without a new import. The distribution and the import are both `interpoint`, not
`interp-engine` / `interp_engine`: those belong to another project on the registry.
"""

from interp_core import *  # noqa: F403 - the umbrella's job is to re-export the core's API
from interp_core import __all__ as _core_all
from interpoint.__about__ import __version__

__all__ = [name for name in _core_all if name != "__version__"] + ["__version__"]
