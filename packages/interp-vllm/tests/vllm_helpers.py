"""What do the vLLM test modules compare with, and on which families?

The relative difference every engine-against-eager check uses, the seeded steering vector, and
the test families the support table says vLLM runs in float32. One definition here, so a change
to the comparison or to the family list reaches every module at once.
"""

from __future__ import annotations

from typing import Any

import torch

from interp_testmodels.families import FAMILIES as TEST_FAMILIES
from interp_vllm.support import FLOAT32_TESTED

# The test families vLLM runs in float32, by the support table (keyed by model_type); why the
# others do not is in the table (interp_vllm.support.FAMILIES).
FLOAT32_FAMILIES = tuple(
    name
    for model_type in FLOAT32_TESTED
    for name, spec in TEST_FAMILIES.items()
    if spec.model_type == model_type
)


def relative_diff(a: Any, b: Any) -> float:
    """Max |a - b| in units of ATOL-at-magnitude-1: float32 rounding grows with the values, and
    steered activations reach ~20, where one ulp is already 2e-6."""
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, b.float().abs().max().item())
    return (a.float() - b.float()).abs().max().item() / scale


def seeded_vector(width: int, seed: int) -> torch.Tensor:
    """A seeded standard-normal steering vector of `width` entries."""
    return torch.randn(width, generator=torch.Generator().manual_seed(seed))
