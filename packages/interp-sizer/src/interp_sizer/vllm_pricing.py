"""How much of the card does a vLLM backend need, on both sides of the utilization line?

vLLM is priced as its memory profiler sees it, per rank (interp-engine's two-sided budget): inside
`gpu_memory_utilization × card` go the weights, the profile run's activation peak, non-torch
memory, CUDA graphs, static tap buffers and at least one request's KV (the rest of the pool
becomes KV cache); outside it go warm-up overshoot, fragmentation and buffers allocated after
start-up (captures in flight).
"""

from __future__ import annotations

import math
from dataclasses import replace

from interp_core.steering import STATIC_OP_SCALARS, STATIC_WRITE_SLOTS, STATIC_WRITER_SLOTS
from interp_sizer import calibration as cal
from interp_sizer.activations import Site, site_bytes_per_token, vllm_activation_peak_bytes
from interp_sizer.gpus import GpuSpec
from interp_sizer.kv import vllm_kv_capacity
from interp_sizer.pricing import (
    GIB,
    default_batched_tokens,
    fragmentation_term,
    gib,
    gpu_problems,
    kv_layout_for,
    largest,
    lens_term,
    overhead_term,
    speed,
    weights_term,
)
from interp_sizer.report import GpuFit, Stage, Term
from interp_sizer.settings import Settings
from interp_sizer.source import ResolvedModel
from interp_sizer.stages import stage_layout, stage_sites, stages

__all__ = ["STATIC_LADDER", "vllm_fit"]

# Step sizes the static-tap backend tries, largest first: its buffers scale with the step.
STATIC_LADDER = (16384, 8192, 4096, 2048, 1024)


def vllm_fit(model: ResolvedModel, s: Settings, gpu: GpuSpec, n: int) -> GpuFit:
    """`n` GPUs in `s.pipeline_parallel` stages: every stage priced, the binding one reported."""
    mnbt_default = default_batched_tokens(gpu)
    if s.backend == "vllm-static" and s.max_num_batched_tokens is None:
        # Static tap buffers scale with the step size: take the largest rung that fits.
        ladder = [t for t in STATIC_LADDER if t <= mnbt_default] or [STATIC_LADDER[-1]]
        fit = None
        for rung in ladder:
            fit = _all_stages(model, s, gpu, n, rung, mnbt_default)
            if fit.fits:
                return fit
        assert fit is not None
        return fit
    return _all_stages(model, s, gpu, n, s.max_num_batched_tokens or mnbt_default, mnbt_default)


def _all_stages(
    model: ResolvedModel, s: Settings, gpu: GpuSpec, n: int, mnbt: int, mnbt_default: int
) -> GpuFit:
    tp = n // s.pipeline_parallel
    plan = stages(model, s, n, kv_layout_for(model, s, tp))
    fits = [_vllm_fit_at(model, s, gpu, n, stage, mnbt, mnbt_default) for stage in plan]
    # vLLM sizes every worker's KV cache and keeps the smallest block count for all of them,
    # so the stage with the least room (the heaviest, as a rule) decides; a stage that does not
    # fit at all decides first.
    index = min(
        range(len(fits)),
        key=lambda i: (fits[i].fits, fits[i].max_concurrency, -plan[i].weights_bytes, -i),
    )
    return replace(fits[index], stages=plan, priced_stage=index)


def _vllm_fit_at(
    model: ResolvedModel,
    s: Settings,
    gpu: GpuSpec,
    n: int,
    stage: Stage,
    mnbt: int,
    mnbt_default: int,
) -> GpuFit:
    facts = model.facts
    card = gpu.memory_bytes
    pool = int(card * s.utilization)
    margin = card - pool
    block = int(cal.VLLM_BLOCK_SIZE_CUDA.value)
    in_flight = int(cal.VLLM_CONCURRENT_BATCHES.value) * mnbt
    tp = n // s.pipeline_parallel
    pipelined = s.pipeline_parallel > 1
    whole = kv_layout_for(model, s, tp)
    layers = range(stage.first_layer, stage.stop_layer)
    layout = stage_layout(whole, layers) if pipelined else whole
    max_num_seqs = int(cal.VLLM_MAX_NUM_SEQS.value)

    def here(sites: tuple[Site, ...]) -> tuple[Site, ...]:
        return stage_sites(sites, layers, stage.index, s.pipeline_parallel) if pipelined else sites

    terms = [weights_term(model, s, tp, stage if pipelined else None)]
    terms.append(
        Term(
            "activations",
            "activation peak (profile run)",
            vllm_activation_peak_bytes(facts, s.value_bytes, mnbt, max_num_seqs, tp),
            "activations",
            "pool",
            "calibrated",
            f"{mnbt} batched tokens, {max_num_seqs} sampler rows, x{cal.ACTIVATION_MARGIN.value}",
        )
    )
    # NCCL communicators exist as soon as there is a second rank, tensor or pipeline.
    non_torch = cal.NON_TORCH_MEMORY.value + (cal.NCCL_PER_EXTRA_RANK.value if n > 1 else 0)
    terms.append(
        overhead_term(
            "non_torch",
            "CUDA context and non-torch memory",
            gib(non_torch),
            "pool",
            "NCCL buffers included" if n > 1 else "",
        )
    )
    if s.backend in ("vllm-generate", "vllm-static"):
        # The static taps are traced into vLLM's own graphs: the same graph memory as vanilla.
        terms.append(
            overhead_term(
                "cuda_graphs",
                "CUDA graphs",
                gib(cal.CUDA_GRAPH_POOL.value),
                "pool",
                "estimated and subtracted by vLLM",
            )
        )
    if s.backend == "vllm-static":
        # Reads keep rows at the model's dtype. Each write point holds an op table (its default
        # entries and the neutral one: two float32 vectors and nine float32 scalars each) and,
        # per row, an int64 index per level and a finite flag (interp_vllm.static_taps).
        reads, writes = here(s.static_reads), here(s.static_writes)
        entries = STATIC_WRITER_SLOTS + 1
        scalars = len(writes) * STATIC_OP_SCALARS * 4
        table = entries * (site_bytes_per_token(writes, 2 * 4, tp) + scalars)
        per_row = len(writes) * (STATIC_WRITE_SLOTS * 8 + 1)
        static_bytes = mnbt * (site_bytes_per_token(reads, s.value_bytes, tp) + per_row) + table
        terms.append(
            Term(
                "static_buffers",
                "static tap buffers",
                static_bytes,
                "capture",
                "pool",
                "computed",
                f"{len(reads)} read + {len(writes)} write sites × {mnbt} rows"
                + (f" on stage {stage.index}" if pipelined else ""),
            )
        )
    non_kv = sum(t.bytes for t in terms)
    kv_pool = pool - non_kv
    capacity = vllm_kv_capacity(
        layout,
        max(kv_pool, 0),
        block_size=block,
        max_model_len=s.max_model_len,
        max_in_flight_tokens=in_flight,
    )
    kv_floor = capacity.blocks_per_request * capacity.bytes_per_block
    terms.append(
        Term(
            "kv_cache",
            "KV cache",
            max(kv_pool, 0),
            "kv",
            "pool",
            "computed",
            f"{layout.bytes_per_token / 1024:.1f} KiB/token/GPU at {s.kv_cache_dtype}; "
            f"{capacity.tokens:,} tokens",
        )
    )

    # Outside the pool: what vLLM does not profile but the card must still hold.
    margin_terms = [
        overhead_term("overshoot", "warm-up overshoot", gib(cal.WARMUP_OVERSHOOT.value), "margin"),
        fragmentation_term(card, "margin"),
    ]
    # Installed after vLLM profiled its pool, on the stage with the final norm (the last).
    lens = lens_term(model, s, "margin") if stage.index == s.pipeline_parallel - 1 else None
    if lens is not None:
        margin_terms.append(lens)
    capture_per_token = 0
    if s.backend == "vllm":
        capture_per_token = site_bytes_per_token(s.capture, s.value_bytes, tp)
        captured, steered = here(s.capture), here(s.steer)
        rows = s.concurrency * s.prompt_tokens
        live = rows * site_bytes_per_token(captured, s.value_bytes, tp) + site_bytes_per_token(
            steered, s.value_bytes, tp
        )
        if live:
            margin_terms.append(
                Term(
                    "captures",
                    "captures in flight",
                    live,
                    "capture",
                    "margin",
                    "computed",
                    f"{len(captured)} capture sites × {rows:,} rows until collected; "
                    f"{len(steered)} steering vectors",
                )
            )
    elif s.backend == "vllm-static":
        capture_per_token = site_bytes_per_token(s.static_reads, s.value_bytes, tp)
    terms.extend(margin_terms)
    margin_used = sum(t.bytes for t in margin_terms)

    problems = gpu_problems(model, s, gpu)
    if kv_pool < kv_floor:
        short = kv_floor - kv_pool
        problems.append(
            f"the pool ({pool / GIB:.1f} GiB at gpu_memory_utilization={s.utilization:g}) is "
            f"{short / GIB:.2f} GiB short of weights + overheads + one "
            f"{s.max_model_len:,}-token sequence of KV"
        )
    if margin_used > margin:
        problems.append(
            f"outside the pool, {margin_used / GIB:.2f} GiB is needed but "
            f"gpu_memory_utilization={s.utilization:g} leaves {margin / GIB:.2f} GiB"
        )
    if kv_pool >= kv_floor and capacity.max_concurrency < s.concurrency:
        problems.append(
            f"{s.concurrency} sequences of {s.max_model_len:,} tokens need "
            f"{s.concurrency / max(capacity.max_concurrency, 1e-9):.1f}x the KV pool; "
            f"{capacity.max_concurrency:.1f} fit"
        )

    def context_fits(length: int) -> bool:
        found = vllm_kv_capacity(
            layout,
            max(kv_pool, 0),
            block_size=block,
            max_model_len=length,
            max_in_flight_tokens=in_flight,
        )
        return found.max_concurrency >= s.concurrency

    max_context = largest(1, model.facts.max_position_embeddings or s.max_model_len, context_fits)
    sequences = max(1, min(s.concurrency, int(capacity.max_concurrency)))
    # One stream walks the stages one after another: its speed is that of all the layers on
    # one tensor-parallel group (pipelining overlaps only different requests, not priced).
    throughput = speed(model, s, gpu, tp, whole, sequences, capture_per_token)
    fits = not problems
    advice = _vllm_advice(model, s, gpu, fits, max_context, margin_used, card, mnbt, mnbt_default)
    return GpuFit(
        gpu=gpu,
        num_gpus=n,
        fits=fits,
        problems=tuple(problems),
        terms=tuple(terms),
        budget_bytes=pool,
        margin_bytes=margin,
        kv_tokens=capacity.tokens,
        kv_block_tokens=capacity.block_tokens,
        max_concurrency=capacity.max_concurrency,
        max_context=max_context,
        max_num_batched_tokens=mnbt,
        throughput=throughput,
        advice=tuple(advice),
    )


def _vllm_advice(
    model: ResolvedModel,
    s: Settings,
    gpu: GpuSpec,
    fits: bool,
    max_context: int,
    margin_used: int,
    card: int,
    mnbt: int,
    mnbt_default: int,
) -> list[str]:
    advice = []
    if fits:
        return advice
    if 0 < max_context < s.max_model_len:
        advice.append(f"max_model_len={max_context} fits {s.concurrency} sequence(s)")
    if s.kv_cache_dtype == "auto" and s.kv_bytes > 1:
        advice.append("kv_cache_dtype='fp8' halves the KV cache")
    if s.quantization is None and model.inventory.checkpoint_quantization is None:
        advice.append("quantization='fp8' halves the linear weights")
    if margin_used < card * (1 - s.utilization) and s.utilization < 0.95:
        ceiling = math.floor((1 - margin_used / card) * 100) / 100
        if ceiling > s.utilization:
            advice.append(f"gpu_memory_utilization up to {ceiling:.2f} leaves the margin intact")
    elif margin_used > card * (1 - s.utilization):
        ceiling = math.floor((1 - margin_used / card) * 100) / 100
        advice.append(f"gpu_memory_utilization={ceiling:.2f} leaves room outside the pool")
    if s.backend == "vllm-static":
        advice.append("declare fewer static points, or a smaller max_num_batched_tokens")
    advice.append("more GPUs (num_gpus) split weights and KV")
    return advice
