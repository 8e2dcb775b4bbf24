"""Can `num_gpus` GPUs be split into `pipeline_parallel` stages of a model with `n_layers` layers?

One rule, read by the vLLM backend (before it starts workers) and by the sizer (before it prices
a layout), so both refuse the same splits in the same words: the stages must have equal
tensor-parallel width (`num_gpus / pipeline_parallel` GPUs each) and at least one layer each.
"""

from __future__ import annotations

from interp_core.errors import InvalidArgument

__all__ = ["check_pipeline_split"]


def check_pipeline_split(num_gpus: int, pipeline_parallel: object, n_layers: int) -> int:
    """The number of stages, once `num_gpus` split into `pipeline_parallel` stages can work."""
    if (
        not isinstance(pipeline_parallel, int)
        or isinstance(pipeline_parallel, bool)
        or pipeline_parallel < 1
    ):
        msg = f"pipeline_parallel={pipeline_parallel!r} must be a positive int (pipeline stages)"
        raise InvalidArgument(msg)
    if num_gpus % pipeline_parallel:
        valid = [p for p in range(1, num_gpus + 1) if num_gpus % p == 0]
        msg = (
            f"num_gpus={num_gpus} cannot be split into pipeline_parallel={pipeline_parallel} "
            f"stages of equal tensor-parallel width; choose pipeline_parallel from {valid}, or "
            f"change num_gpus"
        )
        raise InvalidArgument(msg)
    if pipeline_parallel > n_layers:
        msg = (
            f"pipeline_parallel={pipeline_parallel} stages need at least one layer each and the "
            f"model has {n_layers}; choose at most {n_layers}"
        )
        raise InvalidArgument(msg)
    return pipeline_parallel
