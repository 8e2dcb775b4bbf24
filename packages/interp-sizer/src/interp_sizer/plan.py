"""Does this model fit, on which GPUs and with which settings, and what is left for the KV cache?

`size(model, ...)` prices one request (backend, dtype, quantization, KV dtype, GPU count,
`gpu_memory_utilization`, context, concurrency, captured and steered points) on every GPU of the
catalogue and returns a `SizingReport`: per GPU a `GpuFit` with its memory terms, whether it
fits and why not, KV tokens, the longest context at the requested concurrency, a roofline speed
and the cheapest fixes; the smallest fitting configuration; and the `load_model(...)` call that
was priced.

The parts, each in its own module: `settings` checks the request and fills its defaults;
`vllm_pricing` and `eager_pricing` price one GPU per backend (sharing `pricing`); `snippet`
writes the call; `report` holds the request, verdict and report types and the report's JSON.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from interp_core.errors import InvalidArgument
from interp_sizer.activations import site_bytes_per_token
from interp_sizer.eager_pricing import eager_fit
from interp_sizer.gpus import GPUS, GpuSpec, get_gpu
from interp_sizer.pricing import kv_layout_for
from interp_sizer.report import GpuFit, SizingReport, SizingRequest, Term
from interp_sizer.settings import Settings, check_request
from interp_sizer.snippet import snippet
from interp_sizer.source import ResolvedModel, resolve_model
from interp_sizer.vllm_pricing import vllm_fit
from interp_sizer.weights import parameter_count

__all__ = [
    "GPU_COUNTS",
    "GpuFit",
    "SizingReport",
    "SizingRequest",
    "Term",
    "size",
]

GPU_COUNTS = (1, 2, 4, 8)


def size(
    model: str | os.PathLike[str] | ResolvedModel,
    request: SizingRequest | None = None,
    *,
    gpu: str | GpuSpec | None = None,
    gpus: Iterable[str | GpuSpec] | None = None,
    hub: bool | None = None,
    **fields: Any,
) -> SizingReport:
    """Price `model` under `request` (or keyword fields of `SizingRequest`) on every GPU.

    `gpu` selects the card the report's headline numbers and snippet are for; without it the
    smallest card that fits at the requested `num_gpus` is selected, or, when no count was
    given (`num_gpus=None`), the fewest GPUs that fit. `gpus` narrows the catalogue.
    """
    if request is None:
        request = SizingRequest()
    if fields:
        unknown = sorted(set(fields) - set(SizingRequest.__dataclass_fields__))
        if unknown:
            error = InvalidArgument.build(
                f"unknown sizing option(s) {', '.join(unknown)}",
                None,
                f"Known options: {', '.join(SizingRequest.__dataclass_fields__)}",
            )
            raise error
        for key in ("capture", "steer"):
            if isinstance(fields.get(key), str):
                fields[key] = (fields[key],)
            elif fields.get(key) is not None:
                fields[key] = tuple(fields[key])
        request = replace(request, **fields)
    resolved = model if isinstance(model, ResolvedModel) else resolve_model(model, hub=hub)
    s = check_request(resolved, request)
    catalogue = tuple(get_gpu(g) for g in gpus) if gpus is not None else GPUS
    chosen = get_gpu(gpu) if gpu is not None else None
    if chosen is not None and chosen not in catalogue:
        catalogue = (*catalogue, chosen)
    fits = tuple(_fit(resolved, s, card, s.num_gpus) for card in catalogue)
    smallest = _smallest(resolved, s, catalogue)
    if chosen is not None:
        selected = next(f for f in fits if f.gpu == chosen)
    elif request.num_gpus is not None:
        # A GPU count the user asked for is kept: the smallest card that fits at that count,
        # else the largest card at it (the verdict then says why not; `smallest` shows a fix).
        at_count = [f for f in fits if f.fits]
        selected = (
            min(at_count, key=lambda f: f.gpu.memory_gib)
            if at_count
            else max(fits, key=lambda f: f.gpu.memory_gib)
        )
    elif smallest is not None:
        selected = smallest
    else:
        selected = max(fits, key=lambda f: f.gpu.memory_gib)
    layout = kv_layout_for(resolved, s, selected.tensor_parallel if s.backend != "eager" else 1)
    kv_per_token = layout.bytes_per_token
    if selected.stages and s.pipeline_parallel > 1:
        kv_per_token = selected.stages[selected.priced_stage].kv_bytes_per_token
    notes = _notes(resolved, s)
    return SizingReport(
        model=resolved,
        request=request,
        dtype=s.dtype,
        kv_cache_dtype=s.kv_cache_dtype,
        max_model_len=s.max_model_len,
        gpu_memory_utilization=s.utilization if s.backend != "eager" else None,
        weights_bytes=resolved.inventory.load_bytes(s.dtype, s.quantization),
        kv_bytes_per_token=kv_per_token,
        kv_values_per_token_layer=layout.values_per_token_layer(),
        capture_bytes_per_token=site_bytes_per_token(s.capture, s.value_bytes),
        fits=fits,
        selected=selected,
        smallest=smallest,
        snippet=snippet(resolved, request, s, selected),
        notes=notes,
        gpus_per_node=s.gpus_per_node,
    )


def _notes(model: ResolvedModel, s: Settings) -> tuple[str, ...]:
    notes = []
    inventory = model.inventory
    if inventory.source == "config":
        notes.append(
            "weights derived from the config's dimensions (no safetensors headers on this "
            "machine); exact for Llama/Qwen/Mistral/DeepSeek layouts"
        )
    if inventory.checkpoint_quantization:
        notes.append(
            f"pre-quantized checkpoint ({inventory.checkpoint_quantization}): priced packed, as "
            "vLLM loads it; HF may dequantize when its kernels are missing"
        )
    facts = model.facts
    count = parameter_count(facts)
    if count.approximate_layers:
        notes.append(
            f"{len(count.approximate_layers)} non-attention mixer layers priced as attention "
            "(their own dimensions are not in the config)"
        )
    if facts.sliding_window is not None and s.backend != "eager":
        notes.append(
            f"sliding-window layers hold at most {facts.sliding_window} tokens (+ in-flight) "
            "per sequence; KV tokens follow vLLM's grouped allocator"
        )
    if "vision_config" in facts.extras:
        notes.append("a multimodal checkpoint: the vision tower is not priced from the config")
    if s.pipeline_parallel > 1:
        notes.append(
            f"pipeline_parallel={s.pipeline_parallel}: the terms are one GPU of the stage that "
            "leaves the least KV room; speeds assume one stream walks the stages one after "
            "another, so pipeline stages add capacity, not single-stream speed"
        )
    return tuple(notes)


def _fit(model: ResolvedModel, s: Settings, gpu: GpuSpec, n: int) -> GpuFit:
    if s.backend == "eager":
        return eager_fit(model, s, gpu, n)
    return vllm_fit(model, s, gpu, n)


def _gpu_counts(model: ResolvedModel, s: Settings) -> list[int]:
    """GPU counts to try for the smallest fit; the stage count the user gave is kept."""
    if s.backend == "eager":
        return [n for n in GPU_COUNTS if s.gpus_per_node is None or n <= s.gpus_per_node]
    return [
        s.pipeline_parallel * tp
        for tp in GPU_COUNTS
        if model.facts.n_heads % tp == 0 and (s.gpus_per_node is None or tp <= s.gpus_per_node)
    ]


def _smallest(model: ResolvedModel, s: Settings, gpus: Sequence[GpuSpec]) -> GpuFit | None:
    best: GpuFit | None = None
    for gpu in gpus:
        for n in _gpu_counts(model, s):
            fit = _fit(model, s, gpu, n)
            if fit.fits:
                if best is None or (n, n * gpu.memory_gib) < (
                    best.num_gpus,
                    best.num_gpus * best.gpu.memory_gib,
                ):
                    best = fit
                break
    return best
