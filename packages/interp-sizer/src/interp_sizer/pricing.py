"""What the vLLM and the eager pricing share: default step size, weights, KV layout, speed.

Both backends price the same weights term, lay the KV cache out with `interp_sizer.kv`, flag the
same GPU incompatibilities and estimate speed with the same roofline workload; each backend's own
sum is in `vllm_pricing` and `eager_pricing`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from interp_core.readouts import lens_set_bytes
from interp_sizer import calibration as cal
from interp_sizer.gpus import GpuSpec
from interp_sizer.kv import KVLayout, kv_layout
from interp_sizer.report import Stage, Term
from interp_sizer.roofline import Throughput, WorkloadShape, roofline
from interp_sizer.settings import Settings
from interp_sizer.source import ResolvedModel
from interp_sizer.weights import parameter_count

__all__ = [
    "GIB",
    "default_batched_tokens",
    "fragmentation_term",
    "gib",
    "gpu_problems",
    "kv_layout_for",
    "largest",
    "overhead_term",
    "speed",
    "weights_term",
    "workload_shape",
]

GIB = cal.GIB


def default_batched_tokens(gpu: GpuSpec) -> int:
    large = gpu.memory_gib >= 70 and not gpu.name.startswith("A100")
    source = cal.VLLM_MAX_BATCHED_TOKENS_LARGE if large else cal.VLLM_MAX_BATCHED_TOKENS_SMALL
    return int(source.value)


def gib(value: float) -> int:
    return int(value * GIB)


def gpu_problems(model: ResolvedModel, s: Settings, gpu: GpuSpec) -> list[str]:
    problems = []
    if s.dtype == "bfloat16" and not gpu.has_bf16:
        problems.append(
            f"{gpu.name} has no bfloat16 support (compute capability < 8.0): load with "
            "dtype='float16'"
        )
    if s.quantization is not None and s.quantization.name == "fp8" and gpu.name == "T4":
        problems.append("fp8 weights need compute capability 8.0 or newer; T4 is 7.5")
    if (
        s.backend != "eager"
        and gpu.name == "MI300X"
        and s.quantization is not None
        and (s.quantization.name.startswith("bnb"))
    ):
        problems.append("bitsandbytes on vLLM is CUDA-only; MI300X runs ROCm")
    return problems


def weights_term(
    model: ResolvedModel, s: Settings, shards: int, stage: Stage | None = None
) -> Term:
    """The weights one GPU holds: all of them over `shards`, or one pipeline stage's."""
    total = model.inventory.load_bytes(s.dtype, s.quantization)
    if stage is not None:
        total = stage.weights_bytes
    exact = model.inventory.source == "safetensors" and s.quantization is None
    how = "safetensors headers" if model.inventory.source == "safetensors" else "config dims"
    note = f"{total / GIB:.2f} GiB at {s.dtype}"
    if stage is not None:
        note = f"{stage.label}: " + note
    if s.quantization is not None:
        note += f", linear layers {s.quantization.name}"
    if shards > 1:
        note += f", split over {shards} GPUs"
    return Term(
        "weights",
        "weights",
        math.ceil(total / shards),
        "weights",
        "pool" if s.backend != "eager" else "card",
        "exact" if exact else "computed",
        f"{note} (from {how})",
    )


def overhead_term(key: str, label: str, size: int, side: str, note: str = "") -> Term:
    """A calibrated overhead (context, workspace, graphs...) on `side` of the budget."""
    return Term(key, label, size, "overhead", side, "calibrated", note)


def lens_term(model: ResolvedModel, s: Settings, side: str) -> Term | None:
    """The resident fitted-lens sets: a full `[d_model, d_model]` J_bar per layer per set on
    every GPU that decodes (J_bar is not sharded under tensor parallelism), None without one."""
    if not s.lens_sets:
        return None
    facts = model.facts
    per_set = lens_set_bytes(facts.n_layers, facts.d_model, s.lens_value_bytes)
    return Term(
        "lens",
        "fitted lens (J_bar)",
        s.lens_sets * per_set,
        "capture",
        side,
        "exact",
        f"{s.lens_sets} set(s) × {facts.n_layers} layers × {facts.d_model}² × "
        f"{s.lens_value_bytes} B",
    )


def fragmentation_term(card: int, side: str) -> Term:
    """The allocator's fragmentation: a calibrated share of the whole card, either backend."""
    return overhead_term(
        "fragmentation", "fragmentation", int(card * cal.FRAGMENTATION.value), side
    )


def kv_layout_for(model: ResolvedModel, s: Settings, tp: int) -> KVLayout:
    return kv_layout(model.facts, s.kv_bytes, s.backend, tp)


def workload_shape(
    model: ResolvedModel,
    s: Settings,
    gpu_count: int,
    layout: KVLayout,
    context: int,
    capture_per_token: int,
) -> WorkloadShape:
    facts = model.facts
    count = parameter_count(facts)
    weights = model.inventory.load_bytes(s.dtype, s.quantization)
    routed_share = count.routed_experts / count.total if count.total else 0.0
    routed = int(weights * routed_share)
    graphs = s.backend in ("vllm-static", "vllm-generate")
    return WorkloadShape(
        weight_bytes_dense=(weights - routed) // gpu_count,
        weight_bytes_routed=routed // gpu_count,
        n_experts=facts.moe.n_experts if facts.moe else 0,
        experts_per_token=facts.moe.experts_per_token if facts.moe else 0,
        n_moe_layers=facts.n_sparse_layers,
        active_params=count.active,
        attention_layers=sum(1 for layer in range(facts.n_layers) if facts.attends(layer)),
        n_heads=facts.n_heads,
        head_dim=facts.head_dim,
        d_model=facts.d_model,
        value_bytes=s.value_bytes,
        kv_bytes_per_sequence=layout.sequence_bytes(context)
        // (gpu_count if s.backend == "eager" else 1),
        capture_bytes_per_token=capture_per_token,
        tensor_parallel=gpu_count if s.backend != "eager" else 1,
        graphs=graphs,
    )


def speed(
    model: ResolvedModel,
    s: Settings,
    gpu: GpuSpec,
    gpu_count: int,
    layout: KVLayout,
    sequences: int,
    capture_per_token: int,
) -> Throughput:
    """The roofline speed of `sequences` streams over `gpu_count` GPUs, each at the priced prompt
    length (capped at max_model_len)."""
    context = min(s.prompt_tokens, s.max_model_len)
    return roofline(
        workload_shape(model, s, gpu_count, layout, context, capture_per_token),
        gpu,
        sequences=sequences,
        context=context,
        prompt_tokens=s.prompt_tokens,
    )


def largest(low: int, high: int, ok: Callable[[int], bool]) -> int:
    """The largest value in [low, high] for which `ok` holds (monotone), or 0."""
    if high < low or not ok(low):
        return 0
    while low < high:
        middle = (low + high + 1) // 2
        if ok(middle):
            low = middle
        else:
            high = middle - 1
    return low
