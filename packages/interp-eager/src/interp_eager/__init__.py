"""interp-eager: the exact reference backend — HF transformers in-process, every point.

Use it through `interp_core.load_model(path, backend="eager")`; the classes are exported for
type checks and for code that wants the eager extras (`hf_model`, `tree`, `decode_residuals`).
"""

from interp_eager.__about__ import __version__
from interp_eager.backend import EagerBackend

__all__ = ["EagerBackend", "EagerModel", "__version__"]


def __getattr__(name: str) -> object:
    # EagerModel imports torch; keep `import interp_eager` (the registry's probe path) light.
    if name == "EagerModel":
        from interp_eager.model import EagerModel

        return EagerModel
    message = f"module 'interp_eager' has no attribute {name!r}"
    raise AttributeError(message)
