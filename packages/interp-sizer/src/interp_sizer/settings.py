"""Is the request valid for this model and backend, and what exactly will be priced?

`check_request` turns a `SizingRequest` into `Settings`: names normalised (dtype, KV dtype,
quantization), defaults filled from the model (context length, attention implementation), the
captured and steered points expanded to sites, and every combination a backend would refuse
refused here first, with the reason and what to pass instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.parallel import check_pipeline_split
from interp_core.points import POINTS, Width
from interp_sizer import calibration as cal
from interp_sizer.activations import Site, expand_points
from interp_sizer.errors import UnsupportedSetting
from interp_sizer.formats import (
    BACKENDS,
    Quantization,
    check_quantization,
    dtype_bytes,
    kv_dtype_bytes,
    normalize_dtype,
)
from interp_sizer.report import SizingRequest
from interp_sizer.source import ResolvedModel

__all__ = ["ATTENTION_MATRIX_POINTS", "Settings", "check_request", "check_split", "positive_int"]

# Points that exist only where HF materialises the attention matrix ([batch, heads, q, k]).
ATTENTION_MATRIX_POINTS = frozenset(
    name for name, spec in POINTS.items() if spec.width is Width.SCORES
)


@dataclass(frozen=True)
class Settings:
    """A request checked against the model: canonical names, defaults filled, points expanded."""

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
    pipeline_parallel: int = 1
    gpus_per_node: int | None = None  # None: every GPU on one node
    lens_sets: int = 0  # resident fitted-lens sets
    lens_value_bytes: int = 0  # bytes per lens matrix element

    @property
    def tensor_parallel(self) -> int:
        return self.num_gpus // self.pipeline_parallel


def positive_int(value: Any, what: str, instead: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        error = InvalidArgument.build(
            f"{what} must be a positive integer, not {value!r}", None, instead
        )
        raise error
    return value


def check_request(model: ResolvedModel, request: SizingRequest) -> Settings:
    """The request as it will be priced; every combination a backend would refuse raises here."""
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
    requested_gpus = 1 if request.num_gpus is None else request.num_gpus
    num_gpus = positive_int(requested_gpus, "num_gpus", "Pass num_gpus=1 or more")
    concurrency = positive_int(request.concurrency, "concurrency", "Pass 1 or more sequences")
    prompt_tokens = positive_int(request.prompt_tokens, "prompt_tokens", "Pass 1 or more")
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
    max_model_len = positive_int(max_model_len, "max_model_len", "Pass e.g. 8192")
    if limit is not None and max_model_len > limit:
        error = UnsupportedSetting.build(
            f"max_model_len={max_model_len} exceeds the model's {limit} positions",
            "vLLM refuses a context longer than max_position_embeddings, and the model was not "
            "trained past it",
            f"Pass max_model_len={limit} or less",
        )
        raise error

    pipeline = request.pipeline_parallel
    if backend != "eager":
        # The stage count's type and the layers it needs; the GPU count is checked once known.
        stages = pipeline if isinstance(pipeline, int) else 1
        pipeline = check_pipeline_split(stages, pipeline, facts.n_layers)
    else:
        pipeline = positive_int(pipeline, "pipeline_parallel", "Pass 1 or more")
    per_node = request.gpus_per_node
    if per_node is not None:
        per_node = positive_int(per_node, "gpus_per_node", "Pass e.g. 8 (leave it unset: one node)")
    if request.num_gpus is None:
        num_gpus = pipeline  # the fewest: one GPU per stage
    check_split(facts, backend, num_gpus, pipeline, per_node)

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
        wants_matrix = any(site.name in ATTENTION_MATRIX_POINTS for site in (*capture, *steer))
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
        mnbt = positive_int(mnbt, "max_num_batched_tokens", "Pass e.g. 8192")

    lens_sets = request.lens_sets
    if isinstance(lens_sets, bool) or not isinstance(lens_sets, int) or lens_sets < 0:
        error = InvalidArgument.build(
            f"lens_sets must be a non-negative integer, not {lens_sets!r}",
            None,
            "Pass the number of fitted-lens sets held at once (0 for none)",
        )
        raise error
    lens_dtype = dtype if request.lens_dtype is None else normalize_dtype(request.lens_dtype, dtype)

    return Settings(
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
        pipeline_parallel=pipeline,
        gpus_per_node=per_node,
        lens_sets=lens_sets,
        lens_value_bytes=dtype_bytes(lens_dtype),
    )


def check_split(
    facts: ModelFacts, backend: str, num_gpus: int, pipeline: int, per_node: int | None
) -> None:
    """Refuse a split of GPUs into stages that the backend cannot run, before pricing it.

    The pipeline rule is interp_core.parallel's, the one the vLLM backend applies.
    """
    if backend == "eager":
        if pipeline > 1:
            error = UnsupportedSetting.build(
                f"pipeline_parallel={pipeline} on eager",
                "it is a vLLM option; eager already places whole layers on "
                "successive GPUs (num_gpus alone)",
                "Drop pipeline_parallel, or use a vLLM backend",
            )
            raise error
        if per_node is not None and num_gpus > per_node:
            error = UnsupportedSetting.build(
                f"num_gpus={num_gpus} over nodes of gpus_per_node={per_node} on eager",
                "the eager backend runs in one process on one machine",
                "Use a vLLM backend (distributed='ray') to span nodes",
            )
            raise error
        return
    check_pipeline_split(num_gpus, pipeline, facts.n_layers)  # the backend's rule and words
    tp = num_gpus // pipeline
    if facts.n_heads % tp:
        if pipeline == 1:
            error = UnsupportedSetting.build(
                f"num_gpus={num_gpus} on {backend}",
                f"tensor parallelism splits the {facts.n_heads} attention heads evenly over "
                "the GPUs",
                "Use a GPU count that divides the heads (1, 2, 4, 8 usually do)",
            )
        else:
            error = UnsupportedSetting.build(
                f"num_gpus={num_gpus} in pipeline_parallel={pipeline} stages on {backend}",
                f"each stage's {tp} GPUs split the {facts.n_heads} attention heads evenly "
                "(tensor parallelism)",
                "Use num_gpus = pipeline_parallel × a count that divides the heads",
            )
        raise error
    if per_node is not None and tp > per_node:
        # vLLM would run it, but a tensor-parallel group all-reduces inside every layer: across
        # nodes that traffic crosses the network on every token.
        fix = next(
            p
            for p in range(pipeline, num_gpus + 1)
            if num_gpus % p == 0 and num_gpus // p <= per_node
        )
        error = UnsupportedSetting.build(
            f"tensor parallel size {tp} (num_gpus={num_gpus} / pipeline_parallel={pipeline}) "
            f"spans nodes of gpus_per_node={per_node}",
            "tensor parallelism all-reduces inside every layer, and across nodes that traffic "
            "goes over the network for every token",
            f"Use pipeline_parallel={fix} (stages of {num_gpus // fix} GPUs, each inside a node)",
        )
        raise error
