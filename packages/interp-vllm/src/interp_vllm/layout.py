"""How many vLLM workers, in how many pipeline stages, driven by which executor?

`num_gpus` workers are split into `pipeline_parallel` stages, each stage holding a contiguous
run of layers and splitting every layer across its `num_gpus / pipeline_parallel` GPUs (tensor
parallelism). `distributed` picks vLLM's executor: "mp" (one process per worker on this
machine) or "ray" (vLLM's Ray executor on the cluster `ray.init` finds through RAY_ADDRESS,
which is what spans several nodes; on vLLM's CPU build through `interp_vllm.cpu_ray`). A split
that cannot work is refused here, before anything starts, naming the choices that can.
"""

from __future__ import annotations

import importlib.util
import os

from interp_core.backends import cuda_available
from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.parallel import check_pipeline_split
from interp_vllm.cpu_ray import DEFAULT_RESOURCE

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
    if distributed == "ray" and importlib.util.find_spec("ray") is None:
        msg = (
            "distributed='ray' needs Ray, which is not installed; "
            "pip install 'interpoint-vllm[ray]' (or use distributed='mp' on one machine)"
        )
        raise InvalidArgument(msg)
    if distributed == "ray" and not cuda_available() and not os.environ.get("RAY_ADDRESS"):
        # vLLM would start a Ray instance of its own on this machine, which declares none of the
        # CPU-worker resources its placement group asks for, and wait half an hour for them.
        msg = (
            "distributed='ray' on vLLM's CPU build runs on an existing Ray cluster, and "
            "RAY_ADDRESS is not set; start one whose nodes declare the CPU workers they take "
            f"(ray start ... --resources='{{\"{DEFAULT_RESOURCE}\": 1}}', see the multi-node "
            "guide) and set RAY_ADDRESS to its head, or use distributed='mp' on one machine"
        )
        raise InvalidArgument(msg)
    return stages
