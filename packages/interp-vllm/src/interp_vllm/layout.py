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

from interp_core.backends import cuda_available
from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.parallel import check_pipeline_split

__all__ = ["EXECUTORS", "check_layout"]

EXECUTORS = ("mp", "ray")


def check_layout(
    num_gpus: int, pipeline_parallel: object, distributed: object, facts: ModelFacts
) -> int:
    """The number of pipeline stages, once the split is known to be one vLLM can run.

    The split rule (and its words) is the core's, shared with the sizer.
    """
    stages = check_pipeline_split(num_gpus, pipeline_parallel, facts.n_layers)
    if distributed not in EXECUTORS:
        msg = f"distributed={distributed!r} is not a vLLM executor here; choose 'mp' or 'ray'"
        raise InvalidArgument(msg)
    if distributed == "ray" and not cuda_available():
        msg = (
            "distributed='ray' runs vLLM's Ray executor, which vLLM's CPU build does not support "
            "(its CPU platform declares no Ray device, so the executor refuses to place workers); "
            "use distributed='mp' on this machine, and 'ray' on GPU nodes"
        )
        raise InvalidArgument(msg)
    if distributed == "ray" and importlib.util.find_spec("ray") is None:
        msg = (
            "distributed='ray' needs Ray, which is not installed; pip install 'interp-vllm[ray]' "
            "(or use distributed='mp' on one machine)"
        )
        raise InvalidArgument(msg)
    return stages
