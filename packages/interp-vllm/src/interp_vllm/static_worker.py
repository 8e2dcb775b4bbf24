"""The vLLM worker of `vllm-static`: taps installed before compilation, one plan per step.

vLLM builds its worker from a class named by `worker_cls`. `CPUStaticWorker` and
`GPUStaticWorker` are the platform's own worker classes with one change: once `load_model` has
loaded the weights, and before the first forward (vLLM's profiling and warm-up) compiles the
model, they install the declared taps (`interp_vllm.static_taps`). The declaration travels in
`additional_config["interp_static"]` (site keys to read and to write, write slots, the model's
config, and the op table's size, `entries`), which also makes vLLM's compilation hash differ
per tap set.

What the install leaves is one typed part of the worker's state, `_interp_compiled`
(`interp_vllm.worker_state.CompiledTaps`: the taps, the sites they were resolved from, or the
error). A failure while installing is not raised there (vLLM would report only that the engine
core failed to start): it is kept there and `interp_install` returns it, so the client refuses
with the failing point and the reason.

Per step, on the host, around the compiled forward (`wrap_runner`):

- after vLLM's `_prepare_inputs` has laid out the batch (request order, token counts, absolute
  positions), the step plan is built exactly as the hooked backend builds it, and the per-row
  steering parameters of this step's steered requests are written into the taps' buffers;
- after the runner's `execute_model`, the rows of every interpreted request are taken out of the
  read buffers (plain captures of every point in one copy per step, `interp_vllm.static_rows`),
  and any request whose steered rows were not finite is refused.

vLLM's compile cache (AOT artifacts keyed by the config hash) is switched off in this worker's
process: a cached artifact would be replayed without re-tracing, and our hooks' tensors must be
the ones this process allocated. The inductor kernel cache stays on.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from interp_core.errors import CapabilityUnsupported
from interp_core.steering import STATIC_WRITER_SLOTS
from interp_vllm.engine import STATIC_CONFIG_KEY
from interp_vllm.site_kinds import site_groups, watch_group
from interp_vllm.static_rows import keep_stacked
from interp_vllm.static_taps import StaticTaps
from interp_vllm.worker_state import CompiledTaps, local_part, non_finite

# Also CPUStaticWorker and GPUStaticWorker, built on first use (module __getattr__).
__all__ = [
    "collect_step",
    "install_static_taps",
    "plan_step",
    "wrap_runner",
]

_PARENTS = {
    "CPUStaticWorker": "vllm.v1.worker.cpu_worker.CPUWorker",
    "GPUStaticWorker": "vllm.v1.worker.gpu_worker.Worker",
}
_BUILT: dict[str, type] = {}
# How many rows the probe forward runs with (any small count: only per-row shapes are kept).
_PROBE_TOKENS = 4


def __getattr__(name: str) -> type:
    """The worker classes are built on first use, each from its platform's parent only."""
    if name not in _PARENTS:
        message = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(message)
    if name not in _BUILT:
        _BUILT[name] = _static_worker_class(name, _PARENTS[name])
    return _BUILT[name]


def _static_worker_class(name: str, parent_path: str) -> type:
    import importlib

    module, _, attribute = parent_path.rpartition(".")
    parent = getattr(importlib.import_module(module), attribute)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        os.environ["VLLM_DISABLE_COMPILE_CACHE"] = "1"  # see the module docstring
        parent.__init__(self, *args, **kwargs)

    def load_model(self: Any, *args: Any, **kwargs: Any) -> None:
        parent.load_model(self, *args, **kwargs)
        install_static_taps(self)

    from interp_vllm.worker import InterpWorkerExtension

    # The extension is a base from the start: vLLM then skips mixing it in, which it would refuse
    # in a process where an earlier (hooked) engine already mixed it into the parent class.
    bases = (parent, InterpWorkerExtension)
    cls = type(name, bases, {"__init__": __init__, "load_model": load_model})
    cls.__module__ = __name__
    cls.__qualname__ = name
    return cls


def install_static_taps(worker: Any) -> None:
    """Resolve the declared sites, probe their shapes eagerly, allocate, hook (before compile)."""
    from interp_vllm.sites import resolve_sites
    from interp_vllm.worker import faithful_activations, site_key

    declared = (worker.vllm_config.additional_config or {}).get(STATIC_CONFIG_KEY)
    if not declared:
        return
    worker._interp_compiled = compiled = CompiledTaps()
    try:
        runner = worker.model_runner
        model = runner.model
        config = dict(declared["config"])
        faithful_activations(model, config)  # module swaps must precede the trace
        resolution = resolve_sites(model, config)
        sites = {site_key(n, layer): s for (n, layer), s in resolution.sites.items()}
        reads = {k for k in declared["reads"] if k in sites}
        writes = {k for k in declared["writes"] if k in sites and sites[k].add is not None}
        shapes = _probe(runner, model, {k: sites[k] for k in reads | writes})
        missing = sorted((reads | writes) - set(shapes))
        if missing:
            compiled.error = (
                f"the static taps {missing} saw no tensor in a probe forward before compilation"
            )
            return
        capacity = int(worker.vllm_config.scheduler_config.max_num_batched_tokens)
        entries = int(declared.get("entries", STATIC_WRITER_SLOTS))
        taps = StaticTaps(capacity=capacity, slots=int(declared["slots"]), entries=entries)
        taps.allocate(shapes, reads, writes)
        taps.install(sites)
        compiled.taps, compiled.resolution = taps, resolution
        wrap_runner(worker, runner, taps)
    except Exception as exc:  # reported by interp_install, where the client can refuse
        compiled.taps = None
        compiled.error = f"{type(exc).__name__}: {exc}"


def _probe(runner: Any, model: Any, sites: dict[str, Any]) -> dict[str, Any]:
    """Per-row shape, dtype and device of each site, from one eager forward before compilation.

    vLLM's compiled modules run their plain `forward` while `do_not_compile` is set, so this
    forward traces nothing and the probe hooks fire as Python.
    """
    shapes: dict[str, Any] = {}

    def record(keys: list[str]) -> Any:
        def seen(args: Any, kwargs: Any, out: Any) -> None:
            for key in keys:
                value = sites[key].read(args, kwargs, out)
                shapes[key] = (tuple(value.shape[1:]), value.dtype, value.device)

        return seen

    handles = [
        watch_group(module, phase, record(keys))
        for module, phase, keys in site_groups(sites, sites).values()
    ]
    compiled = [m for m in model.modules() if hasattr(m, "do_not_compile")]
    saved = [m.do_not_compile for m in compiled]
    try:
        for module in compiled:
            module.do_not_compile = True
        with torch.no_grad():
            runner._dummy_run(_PROBE_TOKENS)
    finally:
        for module, value in zip(compiled, saved, strict=True):
            module.do_not_compile = value
        for handle in handles:
            handle.remove()
    return shapes


def wrap_runner(worker: Any, runner: Any, taps: StaticTaps) -> None:
    """Plan each step after vLLM lays out its batch, collect after the forward ran.

    Until `interp_install` has set up the request state (the client calls it once the engine is
    up), steps run with every row neutral: vLLM's own warm-up and profiling forwards.
    """
    prepare = runner._prepare_inputs
    execute = runner.execute_model

    def prepare_inputs(scheduler_output: Any, num_scheduled_tokens: Any, *a: Any, **k: Any) -> Any:
        result = prepare(scheduler_output, num_scheduled_tokens, *a, **k)
        state = worker._interp_state
        if state is None:
            return result
        try:
            counts = [int(n) for n in num_scheduled_tokens]
            state.layout = (list(runner.input_batch.req_ids[: len(counts)]), counts)
            plan_step(worker, taps, runner.positions[: sum(counts)])
        except Exception as exc:  # never let bookkeeping take the engine down
            state.step = None
            for params in taps.writes.values():
                params.reset()
            state.orphan_errors.append(f"step plan: {type(exc).__name__}: {exc}")
        return result

    def execute_model(*a: Any, **k: Any) -> Any:
        try:
            return execute(*a, **k)
        finally:
            state = worker._interp_state
            if state is not None:
                try:
                    collect_step(worker, taps)
                except Exception as exc:  # never let bookkeeping take the engine down
                    state.orphan_errors.append(f"collect: {type(exc).__name__}: {exc}")
                state.step = None

    runner._prepare_inputs = prepare_inputs
    runner.execute_model = execute_model


def plan_step(worker: Any, taps: StaticTaps, positions: torch.Tensor) -> None:
    """This step's plan (as the hooked backend's), and its steered rows' parameters filled."""
    state = worker._interp
    for params in taps.writes.values():
        params.reset()
    state.step = None
    segments = worker._interp_segments()
    if not segments:
        return
    step = worker._interp_build_step(segments, (), {"positions": positions})
    state.step = step
    for key, params in taps.writes.items():
        width = params.add.shape[-1]
        for segment in step.by_key.get(key, ()):
            request = segment.request
            ops = request.writes.get(key)
            if not ops or request.refusal is not None:
                continue
            rows = step.positions[segment.start : segment.stop]
            try:
                _fill_request(taps, key, width, segment, rows, ops)
            except Exception as exc:  # this request alone: its rows go back to neutral
                taps.neutral(key, segment.start, segment.stop)
                request.refuse(
                    CapabilityUnsupported.build(
                        f"the vLLM workers could not steer this request at {key}",
                        f"{type(exc).__name__}: {exc}",
                        "use backend='vllm' for this steering",
                    )
                )


def _fill_request(
    taps: StaticTaps, key: str, width: int, segment: Any, rows: torch.Tensor, ops: list[Any]
) -> None:
    """One request's operations at `key` into the op table, each at the level its rows reach.

    A row's level is how many of the request's earlier operations cover it, so operations at
    disjoint positions (a patch, one per position) share level 0 and overlapping ones stack in
    order, as the hooked backend applies them. An operation with no row in this step (a
    prompt-position patch while decoding) takes no entry."""
    depth = torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
    for write in ops:
        local = local_part(write, width)
        if local.positions is None:
            mask = torch.ones(rows.shape[0], dtype=torch.bool, device=rows.device)
        else:
            mask = torch.isin(rows, local.positions)
        levels = depth[mask]
        if levels.numel() == 0:
            continue
        deepest = int(levels.max())
        if deepest >= taps.slots:
            message = (
                f"{deepest + 1} operations cover one position at {key}; the static taps apply "
                f"{taps.slots} there"
            )
            raise ValueError(message)
        taps.fill(key, levels, segment.start, segment.stop, mask, local, write.spec)
        depth[mask] += 1


def collect_step(worker: Any, taps: StaticTaps) -> None:
    """After the forward: refuse requests whose steered rows overflowed, keep everyone's rows."""
    step = worker._interp.step
    if step is None:
        return
    readers_at: dict[str, list[Any]] = {}
    for key, segments in step.by_key.items():
        params = taps.writes.get(key)
        steered = [
            s
            for s in segments
            if params is not None and key in s.request.writes and s.request.refusal is None
        ]
        if steered:
            flags = torch.stack([params.finite[s.start : s.stop].all() for s in steered])
            for segment, ok in zip(steered, flags.tolist(), strict=True):
                if not ok:
                    written = torch.zeros(1, dtype=taps.dtypes[key])
                    request = segment.request
                    request.refuse(non_finite(key, request.writes[key][-1], written))
        if key not in taps.reads:
            continue
        readers = [s for s in segments if s.request.refusal is None and s.request.reads(key)]
        if readers:
            readers_at[key] = readers
    # The buffers' rows are copied out before the next step overwrites them: plain captures of
    # every point in one copy (interp_vllm.static_rows), the rest point by point.
    for key, readers in keep_stacked(taps, step, readers_at).items():
        worker._interp_keep_step(step, key, readers, taps.reads[key].rows)
