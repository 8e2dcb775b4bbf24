"""How is a `VLLMModel`'s engine configured, started and stopped?

`EngineSettings` holds what the caller chose at load and turns it into vLLM's `AsyncEngineArgs`:
the hooked mode runs eagerly (Python hooks added to a compiled model never fire) with the worker
extension mixed in; the static mode keeps vLLM's compilation (and CUDA graphs) and uses its own
worker class, which traces the declared taps into the compiled forward; the generate-only mode is
plain vLLM.
On vLLM's CPU build the environment is prepared first (KV-cache size, one CPU share per worker;
under `distributed="ray"` the plugin `interp_vllm.cpu_ray` is switched on instead, and each node
binds its own workers).
`start()` warns about vLLM's known issues for the family (`interp_vllm.support`) and returns the
engine with the processes it started, which `shutdown_engine` reaps.

vLLM is imported on a throwaway thread (`import_vllm`), never on the call stack that builds the
engine: vLLM keeps some failed optional imports at module level (on the CPU build,
`vllm.multimodal.media.audio` stores torchcodec's `ModuleNotFoundError`), and a stored traceback
keeps every frame of the importing stack alive, locals included. Imported from `start()`, the
new engine stayed referenced by `start`'s frame after `shutdown()`, so vLLM's
`AsyncLLM.__del__` ran only at interpreter exit, against half-torn-down modules, and printed an
ignored `TypeError` at every exit.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import warnings
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from interp_core.backends import cuda_available
from interp_core.compat import known_issues_for as core_known_issues
from interp_core.errors import InvalidArgument
from interp_vllm import shm_segments
from interp_vllm.support import known_issues_for

__all__ = ["QUANTIZATION", "EngineSettings", "cpu_binding", "import_vllm", "shutdown_engine"]

_EXTENSION = "interp_vllm.worker.InterpWorkerExtension"
# The platform's worker with the static taps (interp_vllm.static_worker), by "is there CUDA".
_STATIC_WORKERS = {
    False: "interp_vllm.static_worker.CPUStaticWorker",
    True: "interp_vllm.static_worker.GPUStaticWorker",
}
STATIC_CONFIG_KEY = "interp_static"  # the additional_config entry the static workers read
# vLLM's CPU backend sizes its KV cache from this (GiB); 1 is plenty for the models tests use.
_CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
# vLLM's CPU build binds one worker per NUMA node unless told otherwise; on a one-node machine
# tensor parallelism then refuses to start. Splitting the allowed CPUs evenly is what it needs.
_CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
# On the CPU build this fraction of host memory must be free at start (vLLM's default 0.92 fails
# on any machine doing other work); the KV cache itself is sized by VLLM_CPU_KVCACHE_SPACE.
_CPU_MEMORY_FRACTION = 0.3
# Our names for the quantizations passed through -> vLLM's.
QUANTIZATION = {None: None, "fp8": "fp8", "bnb-4bit": "bitsandbytes"}


@dataclass(frozen=True)
class EngineSettings:
    """What a load chose for the engine; `extra` (extra_vllm_kwargs) overrides everything."""

    model_id: str
    mode: str
    dtype: str
    max_model_len: int
    num_gpus: int
    gpu_memory_utilization: float | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    # num_gpus workers in this many pipeline stages (tensor parallel num_gpus / stages inside
    # each), driven by vLLM's multiprocessing ("mp") or Ray ("ray") executor.
    pipeline_parallel: int = 1
    distributed: str = "mp"
    # vllm-static: the taps its workers trace into the compiled forward (site keys to read and
    # to write, write slots, the model's config); see interp_vllm.static_worker.
    static: Mapping[str, Any] | None = None

    @property
    def execution(self) -> str:
        """How the engine runs the forward: "eager" (Python hooks, the hooked backend),
        "compiled" (torch.compile; vLLM's CPU build) or "cuda-graphs" (compiled and replayed as
        CUDA graphs, vLLM's default on GPUs)."""
        if self.mode == "hooked" or self.extra.get("enforce_eager"):
            return "eager"
        return "cuda-graphs" if cuda_available() else "compiled"

    def engine_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_id,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.num_gpus // self.pipeline_parallel,
        }
        if self.pipeline_parallel > 1:
            kwargs["pipeline_parallel_size"] = self.pipeline_parallel
        if self.num_gpus > 1 or self.distributed == "ray":
            kwargs["distributed_executor_backend"] = self.distributed
        if self.mode == "hooked":
            # Python hooks added to a compiled model never fire (torch.compile, CUDA graphs).
            kwargs["enforce_eager"] = True
            kwargs["worker_extension_cls"] = _EXTENSION
        elif self.mode == "static":
            # Taps installed before vLLM compiles, so the compiled forward carries them.
            kwargs["worker_extension_cls"] = _EXTENSION
            kwargs["worker_cls"] = _STATIC_WORKERS[cuda_available()]
        if self.gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = self.gpu_memory_utilization
        elif not cuda_available():
            kwargs["gpu_memory_utilization"] = _CPU_MEMORY_FRACTION
        if self.quantization is not None:
            kwargs["quantization"] = QUANTIZATION[self.quantization]
        if self.kv_cache_dtype is not None:
            kwargs["kv_cache_dtype"] = self.kv_cache_dtype
        kwargs.update(self.extra)  # last: anything vLLM takes can be overridden
        if self.mode == "static" and self.static is not None:
            extra_config = dict(kwargs.get("additional_config") or {})
            kwargs["additional_config"] = {**extra_config, STATIC_CONFIG_KEY: dict(self.static)}
        return kwargs

    def start(self, model_type: str) -> tuple[Any, list[Any]]:
        """A running `AsyncLLM`, and the processes it started (its engine core)."""
        cpu_ray = self.distributed == "ray" and not cuda_available()
        if not cuda_available():
            os.environ.setdefault(_CPU_KV_ENV, "1")
            # Under Ray each node binds its own workers (interp_vllm.cpu_ray): this machine's
            # CPUs say nothing about another node's.
            if self.num_gpus > 1 and _CPU_BIND_ENV not in os.environ and not cpu_ray:
                os.environ[_CPU_BIND_ENV] = cpu_binding(self.num_gpus)
        if cpu_ray:
            from interp_vllm.cpu_ray import check_ready

            check_ready()
        # On a stack of its own: see the module docstring (frames kept alive by vLLM's imports).
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(import_vllm).result()
        import transformers
        import vllm
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        shared = core_known_issues(model_type, transformers.__version__, backend="vllm")
        for issue in shared + known_issues_for(model_type, vllm.__version__, self.mode):
            warnings.warn(issue.message(), stacklevel=3)
        before = {p.pid for p in multiprocessing.active_children()}
        with _cpu_ray_plugin(cpu_ray):
            engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**self.engine_kwargs()))
        # The engine core is our child; its workers are its children and exit when it does.
        children = [p for p in multiprocessing.active_children() if p.pid not in before]
        shm_segments.note(children)
        return engine, children


@contextlib.contextmanager
def _cpu_ray_plugin(on: bool) -> Iterator[None]:
    """While the engine starts, tell interp_vllm.cpu_ray (a vLLM plugin) to act: the engine core
    inherits the variable when it is spawned, and no later engine of this process sees it."""
    from interp_vllm.cpu_ray import DEFAULT_RESOURCE, RESOURCE_ENV

    if not on or RESOURCE_ENV in os.environ:  # a resource the user named stays theirs
        yield
        return
    os.environ[RESOURCE_ENV] = DEFAULT_RESOURCE
    try:
        yield
    finally:
        os.environ.pop(RESOURCE_ENV, None)


def import_vllm() -> None:
    """Import the vLLM modules `EngineSettings.start` uses (run it where no engine is held)."""
    import vllm
    import vllm.engine.arg_utils
    import vllm.v1.engine.async_llm  # noqa: F401


def cpu_binding(workers: int) -> str:
    """`VLLM_CPU_OMP_THREADS_BIND` for `workers` CPU workers: the allowed CPUs split evenly."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cpus = cpus or list(range(os.cpu_count() or 1))
    if len(cpus) < workers:
        msg = (
            f"num_gpus={workers} on the CPU build of vLLM needs one CPU per worker, and "
            f"{len(cpus)} are available; lower num_gpus"
        )
        raise InvalidArgument(msg)
    share = len(cpus) // workers
    groups = [cpus[i * share : (i + 1) * share] for i in range(workers)]
    return "|".join(",".join(str(c) for c in group) for group in groups)


def shutdown_engine(engine: Any, children: list[Any]) -> None:
    """Stop the engine core, then reap the processes it started so none is left as a zombie.

    vLLM's own shutdown signals the engine core (and kills it after a grace period) but does not
    join it, so the process would linger as a zombie until this interpreter exits.
    """
    try:
        engine.shutdown()
    finally:
        for child in children:
            child.join(timeout=10)
            if child.is_alive():
                child.kill()
                child.join(timeout=5)
        # vLLM never unlinks the ring buffers of an engine core that was killed (by its own
        # shutdown's grace period, a crash or an operator); they are released here.
        shm_segments.release(children)
