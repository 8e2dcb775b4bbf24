"""How do vLLM's CPU workers run under vLLM's own Ray executor (`distributed="ray"` on a CPU)?

vLLM's Ray executor (`RayExecutorV2`, the one vLLM picks for `distributed_executor_backend=
"ray"`) asks for one placement-group bundle of the platform's Ray device per worker, puts one
worker actor in each, and asks every actor which of those devices Ray gave it. vLLM's CPU
platform names no Ray device (`CpuPlatform.ray_device_key == ""`), so the executor refuses to
start ("current platform cpu does not support ray"). This module fills that gap and nothing
else; the cluster, the placement, the control plane and the pipeline are vLLM's and Ray's.

It is a vLLM general plugin (entry point group `vllm.general_plugins`: vLLM calls `register` in
the process that builds the engine, in the engine core, and in every worker). `register` does
nothing unless `RESOURCE_ENV` is set (`interp_vllm.engine` sets it for `distributed="ray"` on
vLLM's CPU build) and the platform is vLLM's CPU platform. Then:

1. The CPU platform's Ray device becomes the Ray resource `RESOURCE_ENV` names (by default
   `DEFAULT_RESOURCE`): each node of the cluster declares how many CPU workers it takes, e.g.
   `ray start ... --resources='{"cpu_worker": 1}'`, and the executor's placement group takes one
   unit per worker. A custom resource, not "CPU": Ray refuses "CPU" in an actor's `resources`,
   and a node's CPU count says how many tasks it runs, not how many model workers it hosts.
2. The executor's actor class becomes `CPURayWorkerProc`, which answers the device query from
   its own rank (Ray hands out ids only for the accelerators it knows, so for a custom resource
   `get_accelerator_ids()` has no entry and vLLM's query fails with a `KeyError`), and binds the
   worker's threads to its share of the node's CPUs (below) before vLLM starts the worker.

Thread binding: vLLM's mp executor pins each worker's OpenMP threads as it spawns the worker
(`VLLM_CPU_OMP_THREADS_BIND`, one CPU list per local worker). Ray actors are not spawned by it,
so without help every worker on a node would spread over all the node's CPUs. A worker takes the
node's own `VLLM_CPU_OMP_THREADS_BIND` (set in the environment `ray start` ran in on that node;
vLLM's copy of the driver's environment comes later and never overrides a node's value), else
the CPUs the node lets it use split evenly among the workers placed on that node, and sets its
process affinity and torch's thread count to that list. The binding the driver machine would
use says nothing about another node's CPUs, so it is never carried to the workers.

vLLM's legacy Ray executor (`VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0`, built on Ray compiled graphs
and CUDA devices) is not supported: `check_ready` refuses it before the engine starts, and
refuses a start without this plugin installed (or with `VLLM_PLUGINS` leaving it out), which
would otherwise fail deep inside vLLM.

`CPURayWorkerProc` is built on first access (a module `__getattr__`): subclassing vLLM's actor
class needs vLLM and Ray, which importing this module (as `interp_vllm.layout` does) must not.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "BIND_ENV",
    "DEFAULT_RESOURCE",
    "PLUGIN_GROUP",
    "PLUGIN_NAME",
    "RESOURCE_ENV",
    "check_ready",
    "node_cpus",
    "register",
]

# Set (to the Ray resource each CPU worker takes) only for distributed="ray" on vLLM's CPU build;
# unset, this plugin leaves every other engine as vLLM built it.
RESOURCE_ENV = "INTERP_VLLM_RAY_CPU_RESOURCE"
DEFAULT_RESOURCE = "cpu_worker"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # vLLM's: one CPU list per local worker, '|'-separated
_LEGACY_ENV = "VLLM_USE_RAY_V2_EXECUTOR_BACKEND"
# The plugin's entry point (packages/interp-vllm/pyproject.toml), checked for before a start.
PLUGIN_GROUP = "vllm.general_plugins"
PLUGIN_NAME = "interp_vllm_cpu_ray"


def check_ready() -> None:
    """Refuse, before the engine starts, what would leave vLLM without this plugin's help."""
    from importlib.metadata import entry_points

    from interp_core.errors import InvalidArgument

    if os.environ.get(_LEGACY_ENV, "1").strip() == "0":
        msg = (
            f"distributed='ray' on vLLM's CPU build runs vLLM's default Ray executor, and "
            f"{_LEGACY_ENV}=0 selects its legacy one (Ray compiled graphs on CUDA devices); "
            f"unset {_LEGACY_ENV}"
        )
        raise InvalidArgument(msg)
    names = {e.name for e in entry_points(group=PLUGIN_GROUP)}
    if PLUGIN_NAME not in names:
        msg = (
            f"distributed='ray' on vLLM's CPU build needs interp-vllm's vLLM plugin (entry point "
            f"{PLUGIN_NAME!r} in {PLUGIN_GROUP!r}), which is not installed, so vLLM's Ray "
            "executor would refuse the CPU; reinstall interpoint-vllm "
            "(pip install 'interpoint-vllm[ray]')"
        )
        raise InvalidArgument(msg)
    allowed = os.environ.get("VLLM_PLUGINS")
    if allowed is not None and PLUGIN_NAME not in allowed.split(","):
        msg = (
            f"VLLM_PLUGINS={allowed!r} keeps vLLM from loading interp-vllm's plugin "
            f"{PLUGIN_NAME!r}, which distributed='ray' needs on vLLM's CPU build; add it to "
            f"VLLM_PLUGINS or unset VLLM_PLUGINS"
        )
        raise InvalidArgument(msg)


def register() -> None:
    """The general plugin: give the CPU platform a Ray device, only when `RESOURCE_ENV` is set."""
    resource = os.environ.get(RESOURCE_ENV)
    if not resource:
        return
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.platforms.cpu import CpuPlatform

    CpuPlatform.ray_device_key = resource
    import vllm.v1.executor.ray_executor_v2 as executor

    # The executor looks the class up when it creates the actors (`ray.remote(RayWorkerProc)`);
    # Ray ships it by reference, so each actor imports this module and gets the same class.
    executor.RayWorkerProc = __getattr__("CPURayWorkerProc")


def node_cpus(local_rank: int, local_workers: int, binding: str | None) -> list[int] | None:
    """The CPUs a node's `local_rank`-th of `local_workers` CPU workers runs its threads on.

    `binding` is the node's own VLLM_CPU_OMP_THREADS_BIND: "0-3|4-7" (one list per local
    worker), "nobind" (None: leave the threads where the OS puts them, as vLLM does), or None /
    "auto" to split the CPUs this process may use evenly.
    """
    from interp_core.errors import InvalidArgument

    if binding == "nobind":
        return None
    if binding and binding != "auto":
        lists = binding.split("|")
        if len(lists) != local_workers:
            msg = (
                f"this Ray node sets {BIND_ENV}={binding!r} ({len(lists)} CPU lists) and hosts "
                f"{local_workers} vLLM workers; give one list per worker the node takes"
            )
            raise InvalidArgument(msg)
        return _parse_cpus(lists[local_rank])
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < local_workers:
        msg = (
            f"this Ray node hosts {local_workers} vLLM CPU workers and lets them use "
            f"{len(allowed)} CPUs; declare fewer worker units (the Ray resource in its "
            f"`ray start --resources`) on that node"
        )
        raise InvalidArgument(msg)
    share = len(allowed) // local_workers
    return allowed[local_rank * share : (local_rank + 1) * share]


def _parse_cpus(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def _bind_threads(cpus: list[int]) -> None:
    """Pin every thread of this process to `cpus` and run torch on that many threads."""
    import torch

    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except OSError:  # a thread that ended meanwhile
            continue
    torch.set_num_threads(len(cpus))


def _worker_class() -> Any:
    from vllm.v1.executor.ray_executor_v2 import RayWorkerProc

    class CPURayWorkerProc(RayWorkerProc):  # type: ignore[misc, valid-type]
        """vLLM's Ray worker actor, for CPU workers: see the module docstring."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # Read before vLLM copies the driver's environment in (initialize_worker).
            self._node_binding = os.environ.get(BIND_ENV)
            super().__init__(*args, **kwargs)

        def get_node_and_physical_gpu_ids(self) -> tuple[str, list[int]]:
            import ray

            # One distinct id per worker: the executor only counts and sorts them per node.
            return ray.get_runtime_context().get_node_id(), [self._init_kwargs["rank"]]

        def initialize_worker(
            self,
            local_rank: int,
            env_vars: dict[str, str],
            distributed_init_method: str,
            driver_env_vars: dict[str, str] | None = None,
            assigned_physical_gpu_ids: list[int] | None = None,
        ) -> None:
            local_workers = len(assigned_physical_gpu_ids or [None])
            cpus = node_cpus(local_rank, local_workers, self._node_binding)
            if cpus is not None:
                _bind_threads(cpus)
            driver = {k: v for k, v in (driver_env_vars or {}).items() if k != BIND_ENV}
            super().initialize_worker(
                local_rank,
                env_vars,
                distributed_init_method,
                driver,
                assigned_physical_gpu_ids=None,  # CUDA's device map; no meaning on a CPU
            )

    CPURayWorkerProc.__module__ = __name__
    CPURayWorkerProc.__qualname__ = "CPURayWorkerProc"
    return CPURayWorkerProc


def __getattr__(name: str) -> Any:
    # Ray ships the actor class by reference (module + name), so it must be this attribute.
    if name == "CPURayWorkerProc":
        cls = _worker_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
