"""interp-torch: the torch side of interp-core, written once for every torch backend.

`interp_torch.steering` holds the steering arithmetic (add, orthogonal, projection_cap and an SAE
feature's clamp) with its dtype rule, and the check of a tensor steering vector's values; the
eager backend applies it in its forward hooks, the vLLM backends inside their worker processes.
`interp_torch.patching` runs activation-patching sweeps and attribution patching on any model.
"""

from interp_torch.__about__ import __version__
from interp_torch.steering import (
    apply_steering,
    check_steered_finite,
    check_steering_fits,
    compute_dtype,
    position_mask,
    steering_delta,
    steering_encoder,
    steering_vector,
)

__all__ = [
    "__version__",
    "apply_steering",
    "check_steered_finite",
    "check_steering_fits",
    "compute_dtype",
    "position_mask",
    "steering_delta",
    "steering_encoder",
    "steering_vector",
]
