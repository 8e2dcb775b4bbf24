"""The `load_model(...)` call for what was priced, as the user would type it."""

from __future__ import annotations

import json
from collections.abc import Sequence

from interp_sizer.activations import Site
from interp_sizer.pricing import default_batched_tokens
from interp_sizer.report import GpuFit, SizingRequest
from interp_sizer.settings import Settings
from interp_sizer.source import ResolvedModel
from interp_sizer.stages import nodes

__all__ = ["snippet"]


def _q(text: str) -> str:
    """A Python string literal in double quotes (the house style of the printed snippet)."""
    return json.dumps(text)


def _points_literal(sites: Sequence[Site]) -> str:
    """A Python expression listing the addresses, compact when a point covers every layer."""
    by_name: dict[str, list[Site]] = {}
    for site in sites:
        by_name.setdefault(site.name, []).append(site)
    parts: list[str] = []
    for name, group in by_name.items():
        layers = [site.layer for site in group]
        plain = all(site.address == f"{name}.{site.layer}" for site in group)
        if plain and len(group) > 3 and layers == list(range(layers[0], layers[0] + len(group))):
            start, stop = layers[0], layers[0] + len(group)
            span = f"range({stop})" if start == 0 else f"range({start}, {stop})"
            parts.append(f'*(f"{name}.{{layer}}" for layer in {span})')
        else:
            parts.extend(_q(site.address) for site in group)
    if len(parts) == 1 and parts[0].startswith("*("):
        return "[" + parts[0][2:-1] + "]"  # one generator alone reads better as a comprehension
    return "[" + ", ".join(parts) + "]"


def snippet(model: ResolvedModel, request: SizingRequest, s: Settings, fit: GpuFit) -> str:
    args: list[str] = [_q(model.model_id), f"backend={_q(s.backend)}", f"dtype={_q(s.dtype)}"]
    if s.quantization is not None:
        args.append(f"quantization={_q(s.quantization.name)}")
    if s.kv_cache_dtype != "auto":
        args.append(f"kv_cache_dtype={_q(s.kv_cache_dtype)}")
    args.append(f"num_gpus={fit.num_gpus}")
    if s.pipeline_parallel > 1:
        args.append(f"pipeline_parallel={s.pipeline_parallel}")
    if nodes(fit.num_gpus, s.gpus_per_node) > 1:
        # More than one machine: vLLM's Ray executor on the cluster RAY_ADDRESS names.
        args.append(f"distributed={_q('ray')}")
    if s.backend != "eager":
        args.append(f"gpu_memory_utilization={s.utilization:g}")
        args.append(f"max_model_len={s.max_model_len}")
        if fit.max_num_batched_tokens is not None and (
            request.max_num_batched_tokens is not None
            or fit.max_num_batched_tokens != default_batched_tokens(fit.gpu)
        ):
            # Not a keyword of load_model: vLLM engine arguments travel in extra_vllm_kwargs.
            batched = f'{{"max_num_batched_tokens": {fit.max_num_batched_tokens}}}'
            args.append(f"extra_vllm_kwargs={batched}")
    else:
        args.append(f"attn_implementation={_q(s.attn_implementation or 'sdpa')}")
    if s.backend == "vllm-static":
        if s.static_auto:
            args.append('static_points="auto"')
        else:
            args.append(f"static_points={_points_literal(s.static_reads)}")
            args.append(f"static_writes={_points_literal(s.static_writes)}")
    body = "".join(f"    {arg},\n" for arg in args)
    return f"from interpoint import load_model\n\nmodel = load_model(\n{body})\n"
