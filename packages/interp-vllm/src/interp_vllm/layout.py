"""How many vLLM workers, in how many pipeline stages, driven by which executor?

`num_gpus` workers are split into `pipeline_parallel` stages, each stage holding a contiguous
run of layers and splitting every layer across its `num_gpus / pipeline_parallel` GPUs (tensor
parallelism). `distributed` picks vLLM's executor: "mp" (one process per worker on this
machine) or "ray" (vLLM's Ray executor on the cluster `ray.init` finds through RAY_ADDRESS,
which is what spans several nodes). A split that cannot work is refused here, before anything
starts, naming the choices that can.
"""

from __future__ import annotations

import importlib.util

from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts

__all__ = ["EXECUTORS", "check_layout"]

EXECUTORS = ("mp", "ray")


def check_layout(
    num_gpus: int, pipeline_parallel: object, distributed: object, facts: ModelFacts
) -> int:
    """The number of pipeline stages, once the split is known to be one vLLM can run."""
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
    if pipeline_parallel > facts.n_layers:
        msg = (
            f"pipeline_parallel={pipeline_parallel} stages need at least one layer each and the "
            f"model has {facts.n_layers}; choose at most {facts.n_layers}"
        )
        raise InvalidArgument(msg)
    if distributed not in EXECUTORS:
        msg = f"distributed={distributed!r} is not a vLLM executor here; choose 'mp' or 'ray'"
        raise InvalidArgument(msg)
    if distributed == "ray" and importlib.util.find_spec("ray") is None:
        msg = (
            "distributed='ray' needs Ray, which is not installed; pip install 'interp-vllm[ray]' "
            "(or use distributed='mp' on one machine)"
        )
        raise InvalidArgument(msg)
    return pipeline_parallel
