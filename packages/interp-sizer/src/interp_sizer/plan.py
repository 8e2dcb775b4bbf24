"""Does this model fit, on which GPUs and with which settings, and what is left for the KV cache?

`size(model, ...)` prices one request (backend, dtype, quantization, KV dtype, GPU count,
`gpu_memory_utilization`, context, concurrency, captured and steered points) on every GPU of the
catalogue and returns a `SizingReport`: per GPU a `GpuFit` with its memory terms, whether it
fits and why not, KV tokens, the longest context at the requested concurrency, a roofline speed
and the cheapest fixes; the smallest fitting configuration; and the `load_model(...)` call that
was priced.

vLLM is priced as its memory profiler sees it, per rank, on both sides of the utilization line
(interp-engine's two-sided budget): inside `gpu_memory_utilization × card` go the weights, the
profile run's activation peak, non-torch memory, CUDA graphs, static tap buffers and at least one
request's KV (the rest of the pool becomes KV cache); outside it go warm-up overshoot,
fragmentation and buffers allocated after start-up (captures in flight). HF eager is one sum
that must stay under the card.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from interp_core.errors import InvalidArgument
from interp_sizer import calibration as cal
from interp_sizer.activations import (
    Site,
    eager_activation_bytes,
    expand_points,
    site_bytes_per_token,
    vllm_activation_peak_bytes,
)
from interp_sizer.errors import UnsupportedSetting
from interp_sizer.formats import (
    BACKENDS,
    Quantization,
    check_quantization,
    dtype_bytes,
    kv_dtype_bytes,
    normalize_dtype,
)
from interp_sizer.gpus import GPUS, GpuSpec, get_gpu
from interp_sizer.kv import KVLayout, kv_layout, vllm_kv_capacity
from interp_sizer.roofline import Throughput, WorkloadShape, roofline
from interp_sizer.source import ResolvedModel, resolve_model
from interp_sizer.weights import parameter_count

__all__ = [
    "GPU_COUNTS",
    "GpuFit",
    "SizingReport",
    "SizingRequest",
    "Term",
    "size",
]

GIB = cal.GIB
GPU_COUNTS = (1, 2, 4, 8)
_STATIC_LADDER = (16384, 8192, 4096, 2048, 1024)
_ATTENTION_POINTS = frozenset({"attn_scores", "attn_probs"})


@dataclass(frozen=True)
class SizingRequest:
    """What the user will run: every knob of `load_model` the sizer prices."""

    backend: str = "vllm"
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    num_gpus: int = 1
    gpu_memory_utilization: float | None = None  # vLLM only; None prices the calibrated 0.9
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    concurrency: int = 1  # sequences running at once, each up to max_model_len
    capture: tuple[str, ...] = ()  # points or addresses read
    steer: tuple[str, ...] = ()  # points or addresses written
    max_num_batched_tokens: int | None = None  # vLLM; None: its default for the card
    attn_implementation: str | None = None  # eager only: 'sdpa' or 'eager'
    prompt_tokens: int = 2048  # prompt length for prefill speed and in-flight captures


@dataclass(frozen=True)
class Term:
    """One memory term on one GPU."""

    key: str
    label: str
    bytes: int
    category: str  # 'weights', 'kv', 'activations', 'capture' or 'overhead' (the chart's stack)
    side: str  # 'pool' (inside gpu_memory_utilization), 'margin' (outside) or 'card' (eager)
    provenance: str  # 'exact', 'computed' or 'calibrated'
    note: str = ""


@dataclass(frozen=True)
class GpuFit:
    """The verdict for one GPU type at one GPU count."""

    gpu: GpuSpec
    num_gpus: int
    fits: bool
    problems: tuple[str, ...]
    terms: tuple[Term, ...]
    budget_bytes: int  # vLLM: utilization × card; eager: the card
    margin_bytes: int  # vLLM: (1 - utilization) × card; eager: 0
    kv_tokens: int
    kv_block_tokens: int
    max_concurrency: float
    max_context: int  # longest max_model_len at the requested concurrency (0: none fits)
    max_num_batched_tokens: int | None
    throughput: Throughput | None
    advice: tuple[str, ...]

    @property
    def limiting_term(self) -> Term:
        """The largest term that is not the KV cache (what to shrink first)."""
        others = [t for t in self.terms if t.category != "kv"]
        return max(others, key=lambda t: t.bytes)

    def category_bytes(self) -> dict[str, int]:
        totals = {"weights": 0, "kv": 0, "activations": 0, "capture": 0, "overhead": 0}
        for term in self.terms:
            totals[term.category] += term.bytes
        return totals


@dataclass(frozen=True)
class _Settings:
    backend: str
    dtype: str
    value_bytes: int
    quantization: Quantization | None
    kv_cache_dtype: str
    kv_bytes: int
    num_gpus: int
    utilization: float
    max_model_len: int
    concurrency: int
    capture: tuple[Site, ...]
    steer: tuple[Site, ...]
    static_reads: tuple[Site, ...]
    static_writes: tuple[Site, ...]
    static_auto: bool
    max_num_batched_tokens: int | None
    attn_implementation: str | None
    prompt_tokens: int


@dataclass(frozen=True)
class SizingReport:
    """A request priced on every GPU of the catalogue."""

    model: ResolvedModel
    request: SizingRequest
    dtype: str
    kv_cache_dtype: str
    max_model_len: int
    gpu_memory_utilization: float | None
    weights_bytes: int  # all ranks together, as loaded
    kv_bytes_per_token: int  # per GPU, every layer, nothing windowed away
    kv_values_per_token_layer: int  # cached values per token in one attending layer
    capture_bytes_per_token: int
    fits: tuple[GpuFit, ...]  # the catalogue at the requested GPU count
    selected: GpuFit  # the requested GPU, else the smallest fit, else the largest card
    smallest: GpuFit | None  # fewest GPUs, then least memory, over the catalogue
    snippet: str
    notes: tuple[str, ...] = field(default=())

    @property
    def kv_tokens(self) -> int:
        return self.selected.kv_tokens

    def to_json(self) -> dict[str, Any]:
        """One JSON-ready object; the keys are a contract for scripts (`interp-size --json`)."""
        return _report_json(self)


# --- validation ----------------------------------------------------------------------------------
def _positive_int(value: Any, what: str, instead: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        error = InvalidArgument.build(
            f"{what} must be a positive integer, not {value!r}", None, instead
        )
        raise error
    return value


def _settings(model: ResolvedModel, request: SizingRequest) -> _Settings:
    facts = model.facts
    backend = request.backend
    if backend not in BACKENDS:
        error = UnsupportedSetting.build(
            f"unknown backend {backend!r}",
            "the sizer prices the backends interp-engine ships",
            f"Pass one of {', '.join(BACKENDS)}",
        )
        raise error
    vllm = backend != "eager"
    num_gpus = _positive_int(request.num_gpus, "num_gpus", "Pass num_gpus=1 or more")
    concurrency = _positive_int(request.concurrency, "concurrency", "Pass 1 or more sequences")
    prompt_tokens = _positive_int(request.prompt_tokens, "prompt_tokens", "Pass 1 or more")
    dtype = normalize_dtype(request.dtype, facts.torch_dtype)
    quantization = check_quantization(request.quantization, backend)
    if quantization is not None and model.inventory.checkpoint_quantization is not None:
        error = UnsupportedSetting.build(
            f"quantization={quantization.name!r} on a checkpoint that is already quantized "
            f"({model.inventory.checkpoint_quantization})",
            "its weights load in their packed format; a second scheme does not apply",
            "Leave quantization unset for a pre-quantized repo",
        )
        raise error
    kv_bytes = kv_dtype_bytes(request.kv_cache_dtype, dtype, backend)
    kv_name = "auto" if request.kv_cache_dtype in (None, "") else str(request.kv_cache_dtype)

    utilization = request.gpu_memory_utilization
    if not vllm and utilization is not None:
        error = UnsupportedSetting.build(
            "gpu_memory_utilization on the eager backend",
            "it is vLLM's pool size; HF transformers allocates as it goes",
            "Drop it, or use a vLLM backend",
        )
        raise error
    if utilization is None:
        utilization = cal.VLLM_DEFAULT_UTILIZATION.value
    if (
        isinstance(utilization, bool)
        or not isinstance(utilization, int | float)
        or not (0 < utilization <= 1)
    ):
        error = InvalidArgument.build(
            f"gpu_memory_utilization must be in (0, 1], not {utilization!r}",
            "it is the fraction of the whole card vLLM may use",
            "Pass e.g. 0.9",
        )
        raise error

    limit = facts.max_position_embeddings
    max_model_len = request.max_model_len if request.max_model_len is not None else limit
    if max_model_len is None:
        error = InvalidArgument.build(
            "max_model_len is needed",
            "the config states no max_position_embeddings to default to",
            "Pass max_model_len=",
        )
        raise error
    max_model_len = _positive_int(max_model_len, "max_model_len", "Pass e.g. 8192")
    if limit is not None and max_model_len > limit:
        error = UnsupportedSetting.build(
            f"max_model_len={max_model_len} exceeds the model's {limit} positions",
            "vLLM refuses a context longer than max_position_embeddings, and the model was not "
            "trained past it",
            f"Pass max_model_len={limit} or less",
        )
        raise error

    if vllm and facts.n_heads % num_gpus:
        error = UnsupportedSetting.build(
            f"num_gpus={num_gpus} on {backend}",
            f"tensor parallelism splits the {facts.n_heads} attention heads evenly over the GPUs",
            "Use a GPU count that divides the heads (1, 2, 4, 8 usually do)",
        )
        raise error

    capture = expand_points(facts, request.capture, max_model_len)
    steer = expand_points(facts, request.steer, max_model_len)
    if backend == "vllm-generate" and (capture or steer):
        error = UnsupportedSetting.build(
            "capture or steering points on vllm-generate",
            "the generate-only backend installs no taps: it cannot read or write activations",
            "Use backend='vllm' (any point, per request) or 'vllm-static' (declared points, "
            "graph speed)",
        )
        raise error
    static_auto = False
    static_reads: tuple[Site, ...] = ()
    static_writes: tuple[Site, ...] = ()
    if backend == "vllm-static":
        if not capture and not steer:
            # 'auto': resid_post at every layer, read and written (resid_streams on mHC trunks).
            static_auto = True
            auto = "resid_streams" if facts.n_streams > 1 else "resid_post"
            static_reads = static_writes = expand_points(facts, [auto], max_model_len)
        else:
            static_reads, static_writes = capture, steer

    attn = request.attn_implementation
    if attn is not None and attn not in ("sdpa", "eager"):
        error = UnsupportedSetting.build(
            f"attn_implementation={attn!r}",
            "the sizer prices HF's 'sdpa' (no attention matrix) and 'eager' (materialised)",
            "Pass 'sdpa' or 'eager'",
        )
        raise error
    if vllm and attn is not None:
        error = UnsupportedSetting.build(
            f"attn_implementation on {backend}",
            "it selects HF transformers' attention; vLLM picks its own kernels",
            "Drop it, or use backend='eager'",
        )
        raise error
    if not vllm and attn is None:
        # Attention probabilities exist only where the matrix is materialised.
        wants_matrix = any(site.name in _ATTENTION_POINTS for site in (*capture, *steer))
        attn = "eager" if wants_matrix else "sdpa"

    mnbt = request.max_num_batched_tokens
    if mnbt is not None:
        if not vllm:
            error = UnsupportedSetting.build(
                "max_num_batched_tokens on the eager backend",
                "it is vLLM's scheduler budget",
                "Drop it, or use a vLLM backend",
            )
            raise error
        mnbt = _positive_int(mnbt, "max_num_batched_tokens", "Pass e.g. 8192")

    return _Settings(
        backend=backend,
        dtype=dtype,
        value_bytes=dtype_bytes(dtype),
        quantization=quantization,
        kv_cache_dtype=kv_name,
        kv_bytes=kv_bytes,
        num_gpus=num_gpus,
        utilization=float(utilization),
        max_model_len=max_model_len,
        concurrency=concurrency,
        capture=capture,
        steer=steer,
        static_reads=static_reads,
        static_writes=static_writes,
        static_auto=static_auto,
        max_num_batched_tokens=mnbt,
        attn_implementation=attn,
        prompt_tokens=min(prompt_tokens, max_model_len),
    )


# --- pricing -------------------------------------------------------------------------------------
def _default_batched_tokens(gpu: GpuSpec) -> int:
    large = gpu.memory_gib >= 70 and not gpu.name.startswith("A100")
    source = cal.VLLM_MAX_BATCHED_TOKENS_LARGE if large else cal.VLLM_MAX_BATCHED_TOKENS_SMALL
    return int(source.value)


def _gib(value: float) -> int:
    return int(value * GIB)


def _gpu_problems(model: ResolvedModel, s: _Settings, gpu: GpuSpec) -> list[str]:
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


def _weights_term(model: ResolvedModel, s: _Settings, shards: int) -> Term:
    total = model.inventory.load_bytes(s.dtype, s.quantization)
    exact = model.inventory.source == "safetensors" and s.quantization is None
    how = "safetensors headers" if model.inventory.source == "safetensors" else "config dims"
    note = f"{total / GIB:.2f} GiB at {s.dtype}"
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


def _layout(model: ResolvedModel, s: _Settings, tp: int) -> KVLayout:
    return kv_layout(model.facts, s.kv_bytes, s.backend, tp)


def _shape(
    model: ResolvedModel,
    s: _Settings,
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


def _largest(low: int, high: int, ok: Callable[[int], bool]) -> int:
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


def _vllm_fit(model: ResolvedModel, s: _Settings, gpu: GpuSpec, tp: int) -> GpuFit:
    mnbt_default = _default_batched_tokens(gpu)
    if s.backend == "vllm-static" and s.max_num_batched_tokens is None:
        # Static tap buffers scale with the step size: take the largest rung that fits.
        ladder = [t for t in _STATIC_LADDER if t <= mnbt_default] or [_STATIC_LADDER[-1]]
        fit = None
        for rung in ladder:
            fit = _vllm_fit_at(model, s, gpu, tp, rung, mnbt_default)
            if fit.fits:
                return fit
        assert fit is not None
        return fit
    return _vllm_fit_at(model, s, gpu, tp, s.max_num_batched_tokens or mnbt_default, mnbt_default)


def _vllm_fit_at(
    model: ResolvedModel, s: _Settings, gpu: GpuSpec, tp: int, mnbt: int, mnbt_default: int
) -> GpuFit:
    facts = model.facts
    card = gpu.memory_bytes
    pool = int(card * s.utilization)
    margin = card - pool
    block = int(cal.VLLM_BLOCK_SIZE_CUDA.value)
    in_flight = int(cal.VLLM_CONCURRENT_BATCHES.value) * mnbt
    layout = _layout(model, s, tp)
    max_num_seqs = int(cal.VLLM_MAX_NUM_SEQS.value)

    terms = [_weights_term(model, s, tp)]
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
    non_torch = cal.NON_TORCH_MEMORY.value + (cal.NCCL_PER_EXTRA_RANK.value if tp > 1 else 0)
    terms.append(
        Term(
            "non_torch",
            "CUDA context and non-torch memory",
            _gib(non_torch),
            "overhead",
            "pool",
            "calibrated",
            "NCCL buffers included" if tp > 1 else "",
        )
    )
    if s.backend == "vllm-generate":
        terms.append(
            Term(
                "cuda_graphs",
                "CUDA graphs",
                _gib(cal.CUDA_GRAPH_POOL.value),
                "overhead",
                "pool",
                "calibrated",
                "estimated and subtracted by vLLM",
            )
        )
    elif s.backend == "vllm-static":
        terms.append(
            Term(
                "cuda_graphs",
                "graph pool (static taps)",
                _gib(cal.STATIC_GRAPH_POOL.value),
                "overhead",
                "pool",
                "calibrated",
            )
        )
        static_sites = (*s.static_reads, *s.static_writes)
        static_bytes = mnbt * site_bytes_per_token(static_sites, s.value_bytes, tp)
        terms.append(
            Term(
                "static_buffers",
                "static tap buffers",
                static_bytes,
                "capture",
                "pool",
                "computed",
                f"{len(s.static_reads)} read + {len(s.static_writes)} write sites × {mnbt} rows",
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
        Term(
            "overshoot",
            "warm-up overshoot",
            _gib(cal.WARMUP_OVERSHOOT.value),
            "overhead",
            "margin",
            "calibrated",
        ),
        Term(
            "fragmentation",
            "fragmentation",
            int(card * cal.FRAGMENTATION.value),
            "overhead",
            "margin",
            "calibrated",
        ),
    ]
    capture_per_token = 0
    if s.backend == "vllm":
        capture_per_token = site_bytes_per_token(s.capture, s.value_bytes, tp)
        rows = s.concurrency * s.prompt_tokens
        live = rows * capture_per_token + site_bytes_per_token(s.steer, s.value_bytes, tp)
        if live:
            margin_terms.append(
                Term(
                    "captures",
                    "captures in flight",
                    live,
                    "capture",
                    "margin",
                    "computed",
                    f"{len(s.capture)} capture sites × {rows:,} rows until collected; "
                    f"{len(s.steer)} steering vectors",
                )
            )
    elif s.backend == "vllm-static":
        capture_per_token = site_bytes_per_token(s.static_reads, s.value_bytes, tp)
    terms.extend(margin_terms)
    margin_used = sum(t.bytes for t in margin_terms)

    problems = _gpu_problems(model, s, gpu)
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

    max_context = _largest(1, model.facts.max_position_embeddings or s.max_model_len, context_fits)
    sequences = max(1, min(s.concurrency, int(capacity.max_concurrency)))
    context = min(s.prompt_tokens, s.max_model_len)
    throughput = roofline(
        _shape(model, s, tp, layout, context, capture_per_token),
        gpu,
        sequences=sequences,
        context=context,
        prompt_tokens=s.prompt_tokens,
    )
    fits = not problems
    advice = _vllm_advice(model, s, gpu, fits, max_context, margin_used, card, mnbt, mnbt_default)
    return GpuFit(
        gpu=gpu,
        num_gpus=tp,
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
    s: _Settings,
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


def _eager_fit(model: ResolvedModel, s: _Settings, gpu: GpuSpec, n: int) -> GpuFit:
    facts = model.facts
    card = gpu.memory_bytes
    layout = _layout(model, s, 1)
    terms = [_weights_term(model, s, n)]

    def kv_bytes(length: int, sequences: int) -> int:
        return sequences * layout.sequence_bytes(length) // n

    def activation_terms(length: int, sequences: int) -> list[Term]:
        found = eager_activation_bytes(
            facts, s.value_bytes, sequences, length, s.attn_implementation or "sdpa"
        )
        return [
            Term(
                f"act_{k}",
                k.replace("_", " "),
                v,
                "activations",
                "card",
                "computed",
                f"batch {sequences} × {length:,} tokens",
            )
            for k, v in found.items()
        ]

    def capture_bytes(length: int, sequences: int) -> int:
        rows = sequences * length
        return rows * site_bytes_per_token(s.capture, s.value_bytes) + site_bytes_per_token(
            s.steer, s.value_bytes
        )

    fixed = [
        Term(
            "workspace",
            "workspace",
            _gib(cal.EAGER_WORKSPACE.value),
            "overhead",
            "card",
            "calibrated",
        ),
        Term(
            "cuda_context",
            "CUDA context",
            _gib(cal.EAGER_CUDA_CONTEXT.value),
            "overhead",
            "card",
            "calibrated",
        ),
        Term(
            "fragmentation",
            "fragmentation",
            int(card * cal.FRAGMENTATION.value),
            "overhead",
            "card",
            "calibrated",
        ),
    ]

    def needed(length: int, sequences: int) -> int:
        return (
            terms[0].bytes
            + kv_bytes(length, sequences)
            + sum(t.bytes for t in activation_terms(length, sequences))
            + capture_bytes(length, sequences)
            + sum(t.bytes for t in fixed)
        )

    length, sequences = s.max_model_len, s.concurrency
    terms.append(
        Term(
            "kv_cache",
            "KV cache (generation)",
            kv_bytes(length, sequences),
            "kv",
            "card",
            "computed",
            f"{sequences} × {length:,} tokens, {layout.bytes_per_token / 1024:.1f} KiB/token",
        )
    )
    terms.extend(activation_terms(length, sequences))
    captured = capture_bytes(length, sequences)
    if captured:
        terms.append(
            Term(
                "captures",
                "captured activations",
                captured,
                "capture",
                "card",
                "computed",
                f"{len(s.capture)} sites kept for the whole forward",
            )
        )
    terms.extend(fixed)
    used = sum(t.bytes for t in terms)
    problems = _gpu_problems(model, s, gpu)
    if used > card:
        problems.append(
            f"needs {used / GIB:.1f} GiB per GPU; {gpu.name} has {gpu.memory_gib:g} GiB"
        )
    room = card - (used - terms[1].bytes)
    per_token = layout.bytes_per_token // n if layout.bytes_per_token else 0
    kv_tokens = max(0, room) // per_token if per_token else 0
    per_sequence = layout.sequence_bytes(length) // n
    max_concurrency = max(0, room) / per_sequence if per_sequence else 0.0
    max_context = _largest(
        1, facts.max_position_embeddings or length, lambda L: needed(L, sequences) <= card
    )
    context = min(s.prompt_tokens, length)
    capture_per_token = site_bytes_per_token(s.capture, s.value_bytes)
    throughput = roofline(
        _shape(model, s, n, layout, context, capture_per_token),
        gpu,
        sequences=sequences,
        context=context,
        prompt_tokens=s.prompt_tokens,
    )
    advice = []
    if problems:
        if 0 < max_context < length:
            advice.append(f"max_model_len={max_context} fits batch {sequences}")
        if s.attn_implementation == "eager" and not any(
            site.name in _ATTENTION_POINTS for site in s.capture
        ):
            advice.append("attn_implementation='sdpa' drops the attention matrices")
        if s.quantization is None and model.inventory.checkpoint_quantization is None:
            advice.append("quantization='bnb-4bit' quarters the linear weights")
        advice.append("a vLLM backend pages the KV cache and keeps activations small")
        advice.append("more GPUs (num_gpus) split the layers")
    return GpuFit(
        gpu=gpu,
        num_gpus=n,
        fits=not problems,
        problems=tuple(problems),
        terms=tuple(terms),
        budget_bytes=card,
        margin_bytes=0,
        kv_tokens=int(kv_tokens),
        kv_block_tokens=0,
        max_concurrency=max_concurrency,
        max_context=max_context,
        max_num_batched_tokens=None,
        throughput=throughput,
        advice=tuple(advice),
    )


def _fit(model: ResolvedModel, s: _Settings, gpu: GpuSpec, n: int) -> GpuFit:
    if s.backend == "eager":
        return _eager_fit(model, s, gpu, n)
    return _vllm_fit(model, s, gpu, n)


def _gpu_counts(model: ResolvedModel, s: _Settings) -> list[int]:
    if s.backend == "eager":
        return list(GPU_COUNTS)
    return [n for n in GPU_COUNTS if model.facts.n_heads % n == 0]


def _smallest(model: ResolvedModel, s: _Settings, gpus: Sequence[GpuSpec]) -> GpuFit | None:
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


# --- the snippet ---------------------------------------------------------------------------------
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


def _snippet(model: ResolvedModel, request: SizingRequest, s: _Settings, fit: GpuFit) -> str:
    args: list[str] = [_q(model.model_id), f"backend={_q(s.backend)}", f"dtype={_q(s.dtype)}"]
    if s.quantization is not None:
        args.append(f"quantization={_q(s.quantization.name)}")
    if s.kv_cache_dtype != "auto":
        args.append(f"kv_cache_dtype={_q(s.kv_cache_dtype)}")
    args.append(f"num_gpus={fit.num_gpus}")
    if s.backend != "eager":
        args.append(f"gpu_memory_utilization={s.utilization:g}")
        args.append(f"max_model_len={s.max_model_len}")
        if fit.max_num_batched_tokens is not None and (
            request.max_num_batched_tokens is not None
            or fit.max_num_batched_tokens != _default_batched_tokens(fit.gpu)
        ):
            args.append(f"max_num_batched_tokens={fit.max_num_batched_tokens}")
    else:
        args.append(f"attn_implementation={_q(s.attn_implementation or 'sdpa')}")
    if s.backend == "vllm-static":
        if s.static_auto:
            args.append('static_points="auto"')
        else:
            args.append(f"static_points={_points_literal(s.static_reads)}")
            args.append(f"static_writes={_points_literal(s.static_writes)}")
    body = "".join(f"    {arg},\n" for arg in args)
    return f"from interp_engine import load_model\n\nmodel = load_model(\n{body})\n"


# --- the entry point -----------------------------------------------------------------------------
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
    smallest fitting configuration is selected. `gpus` narrows the catalogue.
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
    s = _settings(resolved, request)
    catalogue = tuple(get_gpu(g) for g in gpus) if gpus is not None else GPUS
    chosen = get_gpu(gpu) if gpu is not None else None
    if chosen is not None and chosen not in catalogue:
        catalogue = (*catalogue, chosen)
    fits = tuple(_fit(resolved, s, card, s.num_gpus) for card in catalogue)
    smallest = _smallest(resolved, s, catalogue)
    if chosen is not None:
        selected = next(f for f in fits if f.gpu == chosen)
    elif smallest is not None:
        selected = smallest
    else:
        selected = max(fits, key=lambda f: f.gpu.memory_gib)
    layout = _layout(resolved, s, selected.num_gpus if s.backend != "eager" else 1)
    notes = _notes(resolved, s)
    return SizingReport(
        model=resolved,
        request=request,
        dtype=s.dtype,
        kv_cache_dtype=s.kv_cache_dtype,
        max_model_len=s.max_model_len,
        gpu_memory_utilization=s.utilization if s.backend != "eager" else None,
        weights_bytes=resolved.inventory.load_bytes(s.dtype, s.quantization),
        kv_bytes_per_token=layout.bytes_per_token,
        kv_values_per_token_layer=layout.values_per_token_layer(),
        capture_bytes_per_token=site_bytes_per_token(s.capture, s.value_bytes),
        fits=fits,
        selected=selected,
        smallest=smallest,
        snippet=_snippet(resolved, request, s, selected),
        notes=notes,
    )


def _notes(model: ResolvedModel, s: _Settings) -> tuple[str, ...]:
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
    return tuple(notes)


def _term_json(term: Term) -> dict[str, Any]:
    return {
        "key": term.key,
        "label": term.label,
        "bytes": term.bytes,
        "category": term.category,
        "side": term.side,
        "provenance": term.provenance,
        "note": term.note,
    }


def _fit_json(fit: GpuFit) -> dict[str, Any]:
    t = fit.throughput
    return {
        "gpu": fit.gpu.name,
        "num_gpus": fit.num_gpus,
        "fits": fit.fits,
        "problems": list(fit.problems),
        "advice": list(fit.advice),
        "budget_bytes": fit.budget_bytes,
        "margin_bytes": fit.margin_bytes,
        "kv_tokens": fit.kv_tokens,
        "max_concurrency": round(fit.max_concurrency, 3),
        "max_context": fit.max_context,
        "max_num_batched_tokens": fit.max_num_batched_tokens,
        "limiting_term": fit.limiting_term.key,
        "terms": [_term_json(term) for term in fit.terms],
        "throughput": None
        if t is None
        else {
            "decode_tokens_per_s": round(t.decode_tokens_per_s, 1),
            "decode_tokens_per_s_per_sequence": round(t.decode_tokens_per_s_per_sequence, 1),
            "prefill_tokens_per_s": round(t.prefill_tokens_per_s, 1),
            "sequences": t.sequences,
            "context": t.context,
            "limiter": t.limiter,
            "spread": t.spread,
        },
    }


def _report_json(report: SizingReport) -> dict[str, Any]:
    model = report.model
    return {
        "model": model.model_id,
        "origin": model.origin,
        "architecture": model.facts.architecture,
        "backend": report.request.backend,
        "dtype": report.dtype,
        "kv_cache_dtype": report.kv_cache_dtype,
        "max_model_len": report.max_model_len,
        "gpu_memory_utilization": report.gpu_memory_utilization,
        "concurrency": report.request.concurrency,
        "weights_bytes": report.weights_bytes,
        "weights_source": model.inventory.source,
        "parameters": model.inventory.parameters,
        "kv_bytes_per_token": report.kv_bytes_per_token,
        "kv_values_per_token_layer": report.kv_values_per_token_layer,
        "capture_bytes_per_token": report.capture_bytes_per_token,
        "gpu": report.selected.gpu.name,
        "num_gpus": report.selected.num_gpus,
        "kv_tokens": report.kv_tokens,
        "fits": {fit.gpu.name: fit.fits for fit in report.fits},
        "smallest_fit": None
        if report.smallest is None
        else {
            "gpu": report.smallest.gpu.name,
            "num_gpus": report.smallest.num_gpus,
        },
        "selected": _fit_json(report.selected),
        "per_gpu": [_fit_json(fit) for fit in report.fits],
        "snippet": report.snippet,
        "notes": list(report.notes),
        "calibrations": {
            c.name: {"value": c.value, "unit": c.unit, "source": c.source} for c in cal.CALIBRATIONS
        },
    }
