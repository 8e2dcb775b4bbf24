"""How many tokens per second should a configuration reach, and what limits it?

A roofline: each decode step streams the weights it touches and every running sequence's KV
from HBM, and does `2 · active params` FLOPs per token plus attention; the step takes the longer
of the two at calibrated efficiencies, plus tensor-parallel all-reduces, plus a fixed host cost
when no CUDA graph replays the step (hooked vLLM, HF eager), plus copying captures to the host.
Prefill is compute-bound: `2 · P_active · T + 2 · L_attn · T² · H · h` FLOPs for a prompt of T.

Numbers are ranges (± the calibrated spread) with the limiting term named, never a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

from interp_sizer import calibration as cal
from interp_sizer.gpus import GpuSpec

__all__ = ["Throughput", "WorkloadShape", "roofline"]


@dataclass(frozen=True)
class WorkloadShape:
    """What one step moves and computes, per rank, as the sizer derived it."""

    weight_bytes_dense: int  # weights every token reads (all but routed experts), per rank
    weight_bytes_routed: int  # routed-expert weights, per rank (MoE; 0 when dense)
    n_experts: int
    experts_per_token: int
    n_moe_layers: int
    active_params: int  # parameters one token uses (whole model, not per rank)
    attention_layers: int
    n_heads: int
    head_dim: int
    d_model: int
    value_bytes: int
    kv_bytes_per_sequence: int  # at the decode context, per rank
    capture_bytes_per_token: int  # copied to the host per token
    tensor_parallel: int
    graphs: bool  # CUDA graphs replay the step


@dataclass(frozen=True)
class Throughput:
    """Estimated speeds at the sized concurrency."""

    decode_tokens_per_s: float  # aggregate over `sequences`
    decode_tokens_per_s_per_sequence: float
    prefill_tokens_per_s: float
    sequences: int
    context: int
    prompt_tokens: int
    limiter: str
    spread: float

    def range(self, value: float) -> tuple[float, float]:
        return value * (1 - self.spread), value * (1 + self.spread)


def _routed_bytes_touched(shape: WorkloadShape, sequences: int) -> float:
    if not shape.weight_bytes_routed or not shape.n_experts:
        return 0.0
    # Uniform routing: the expected distinct experts hit by S tokens per MoE layer.
    fraction = 1 - (1 - shape.experts_per_token / shape.n_experts) ** sequences
    return shape.weight_bytes_routed * fraction


def _decode_parts(
    shape: WorkloadShape, gpu: GpuSpec, sequences: int, context: int
) -> dict[str, float]:
    bandwidth = gpu.bandwidth_tb_s * 1e12 * cal.BANDWIDTH_EFFICIENCY.value
    flops_rate = gpu.bf16_tflops * 1e12 * cal.COMPUTE_EFFICIENCY.value
    weights = shape.weight_bytes_dense + _routed_bytes_touched(shape, sequences)
    kv = sequences * shape.kv_bytes_per_sequence
    tp = shape.tensor_parallel
    flops = (
        2 * shape.active_params * sequences
        + 4 * shape.attention_layers * shape.n_heads * shape.head_dim * context * sequences
    ) / tp
    parts = {
        "weight bandwidth": weights / bandwidth,
        "KV bandwidth": kv / bandwidth,
        "compute": flops / flops_rate,
    }
    if tp > 1:
        # Two all-reduces of the residual per layer, ring algorithm.
        volume = 2 * shape.attention_layers * 2 * (tp - 1) / tp * sequences * shape.d_model
        parts["communication"] = volume * shape.value_bytes / (gpu.interconnect_gb_s * 1e9)
    if shape.capture_bytes_per_token:
        parts["capture transfer"] = (
            sequences * shape.capture_bytes_per_token / (cal.PCIE_HOST_BANDWIDTH.value * 1e9)
        )
    return parts


def _step(parts: dict[str, float]) -> float:
    memory_or_compute = max(parts["weight bandwidth"] + parts["KV bandwidth"], parts["compute"])
    rest = sum(
        v for k, v in parts.items() if k not in ("weight bandwidth", "KV bandwidth", "compute")
    )
    return memory_or_compute + rest


def roofline(
    shape: WorkloadShape, gpu: GpuSpec, *, sequences: int, context: int, prompt_tokens: int
) -> Throughput:
    """Decode (at `sequences` running, `context` tokens each) and prefill (`prompt_tokens`)."""
    sequences = max(1, sequences)
    parts = _decode_parts(shape, gpu, sequences, context)
    step = _step(parts)
    if not shape.graphs:
        # The host launches every kernel: a fixed cost per step, measured as a multiple of the
        # single-sequence step (it does not grow with the batch).
        single = _step(_decode_parts(shape, gpu, 1, context))
        parts["kernel launches (no CUDA graphs)"] = (cal.NO_GRAPH_DECODE_PENALTY.value - 1) * single
        step += parts["kernel launches (no CUDA graphs)"]
    limiter = max(parts, key=lambda k: parts[k])

    flops_rate = gpu.bf16_tflops * 1e12 * cal.COMPUTE_EFFICIENCY.value
    prefill_flops = (
        2 * shape.active_params * prompt_tokens
        + 2 * shape.attention_layers * prompt_tokens**2 * shape.n_heads * shape.head_dim
    ) / shape.tensor_parallel
    prefill_time = prefill_flops / flops_rate
    if shape.capture_bytes_per_token:
        prefill_time += (
            prompt_tokens * shape.capture_bytes_per_token / (cal.PCIE_HOST_BANDWIDTH.value * 1e9)
        )
    return Throughput(
        decode_tokens_per_s=sequences / step,
        decode_tokens_per_s_per_sequence=1 / step,
        prefill_tokens_per_s=prompt_tokens / prefill_time,
        sequences=sequences,
        context=context,
        prompt_tokens=prompt_tokens,
        limiter=limiter,
        spread=cal.THROUGHPUT_SPREAD.value,
    )
