"""What the sizer is asked and what it answers: the request, one verdict per GPU, the report.

`SizingRequest` holds every knob of `load_model` the sizer prices; `Term` is one memory term on
one GPU; `GpuFit` is the verdict for one GPU type at one GPU count; `SizingReport` gathers them
for the whole catalogue. The report's JSON form (`interp-size --json`) is written here too: its
keys are a contract for scripts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from interp_sizer import calibration as cal
from interp_sizer.gpus import GpuSpec
from interp_sizer.roofline import Throughput
from interp_sizer.source import ResolvedModel

__all__ = ["GpuFit", "SizingReport", "SizingRequest", "Stage", "Term", "report_json"]


@dataclass(frozen=True)
class SizingRequest:
    """What the user will run: every knob of `load_model` the sizer prices."""

    backend: str = "vllm"
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    num_gpus: int | None = None  # None: 1 per card in the table, fewest that fit when choosing
    gpu_memory_utilization: float | None = None  # vLLM only; None prices the calibrated 0.9
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    concurrency: int = 1  # sequences running at once, each up to max_model_len
    capture: tuple[str, ...] = ()  # points or addresses read
    steer: tuple[str, ...] = ()  # points or addresses written
    max_num_batched_tokens: int | None = None  # vLLM; None: its default for the card
    attn_implementation: str | None = None  # eager only: 'sdpa' or 'eager'
    prompt_tokens: int = 2048  # prompt length for prefill speed and in-flight captures
    pipeline_parallel: int = 1  # vLLM: stages of layers; num_gpus / pipeline_parallel is the TP
    gpus_per_node: int | None = None  # None: every GPU on one node
    lens_sets: int = 0  # fitted-lens sets held resident (set_lens_jacobians), each n_layers × d²
    lens_dtype: str | None = None  # the lens matrices' dtype; None: the model's


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
class Stage:
    """One pipeline stage: a contiguous run of decoder layers on `tensor_parallel` GPUs."""

    index: int
    first_layer: int
    stop_layer: int  # one past the last layer, as in range()
    holds: tuple[str, ...]  # what sits beside the layers: 'embeddings', 'final norm', 'lm_head'
    weights_bytes: int  # the stage's weights, all its GPUs together
    tensor_parallel: int
    kv_bytes_per_token: int  # per GPU: the stage's attending layers on one TP rank

    @property
    def weights_per_gpu(self) -> int:
        return -(-self.weights_bytes // self.tensor_parallel)

    @property
    def label(self) -> str:
        layers = f"layers {self.first_layer}-{self.stop_layer - 1}"
        return f"stage {self.index} ({layers}" + "".join(f", {h}" for h in self.holds) + ")"


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
    # Pipeline parallelism: every stage, and the one whose GPUs the terms above price (the
    # stage that leaves the fewest KV blocks, which vLLM then uses on every stage).
    stages: tuple[Stage, ...] = ()
    priced_stage: int = 0

    @property
    def pipeline_parallel(self) -> int:
        return max(1, len(self.stages))

    @property
    def tensor_parallel(self) -> int:
        return self.num_gpus // self.pipeline_parallel

    @property
    def limiting_term(self) -> Term:
        """The largest term that is not the KV cache (what to shrink first)."""
        others = [t for t in self.terms if t.category != "kv"]
        return max(others, key=lambda t: t.bytes)

    @property
    def limit(self) -> str:
        """What bounds this configuration: why it does not fit, else what caps decode speed."""
        if not self.fits:
            return "; ".join(self.problems) or "does not fit"
        if self.throughput is not None:
            return f"decode: {self.throughput.limiter}"
        return f"largest term: {self.limiting_term.label}"

    def category_bytes(self, kv_tokens_needed: int | None = None) -> dict[str, int]:
        """Bytes per chart category; with `kv_tokens_needed`, the KV the workload fills.

        The KV term is the whole pool left after everything else (vLLM hands it all to the
        cache), so a chart of it makes a small model look as large as the card. Given the
        tokens the request holds at once (context x concurrency), the KV category is scaled
        down to them, never up past the pool.
        """
        totals = {"weights": 0, "kv": 0, "activations": 0, "capture": 0, "overhead": 0}
        for term in self.terms:
            value = term.bytes
            if term.category == "kv" and kv_tokens_needed is not None:
                share = min(1.0, kv_tokens_needed / self.kv_tokens) if self.kv_tokens else 1.0
                value = round(term.bytes * share)
            totals[term.category] += value
        return totals


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
    kv_bytes_per_token: int  # per GPU, every layer of its stage, nothing windowed away
    kv_values_per_token_layer: int  # cached values per token in one attending layer
    capture_bytes_per_token: int
    fits: tuple[GpuFit, ...]  # the catalogue at the requested GPU count
    selected: GpuFit  # the requested GPU, else the smallest fit, else the largest card
    smallest: GpuFit | None  # fewest GPUs, then least memory, over the catalogue
    snippet: str
    notes: tuple[str, ...] = field(default=())
    gpus_per_node: int | None = None  # as requested; None: one node

    @property
    def nodes(self) -> int:
        """Machines the selected layout spans: ceil(num_gpus / gpus_per_node)."""
        per_node = self.gpus_per_node or self.selected.num_gpus
        return -(-self.selected.num_gpus // per_node)

    @property
    def kv_tokens(self) -> int:
        return self.selected.kv_tokens

    @property
    def precision(self) -> str:
        """The number formats priced, for a heading: weights (if quantized), compute, KV."""
        quant = self.request.quantization or self.model.inventory.checkpoint_quantization
        text = f"{quant} weights, {self.dtype} activations" if quant else self.dtype
        if self.kv_cache_dtype not in ("auto", self.dtype):
            text += f", {self.kv_cache_dtype} KV cache"
        return text

    def to_json(self) -> dict[str, Any]:
        """One JSON-ready object; the keys are a contract for scripts (`interp-size --json`)."""
        return report_json(self)


# --- JSON ---------------------------------------------------------------------------------------
def _layout_json(fit: GpuFit) -> dict[str, Any]:
    """Which GPUs, how many, and how the model is split over them (report and per-GPU rows)."""
    return {
        "gpu": fit.gpu.name,
        "num_gpus": fit.num_gpus,
        "pipeline_parallel": fit.pipeline_parallel,
        "tensor_parallel": fit.tensor_parallel if fit.stages else None,
    }


def _stage_json(stage: Stage) -> dict[str, Any]:
    return {
        "stage": stage.index,
        "layers": [stage.first_layer, stage.stop_layer],
        "holds": list(stage.holds),
        "weights_bytes": stage.weights_bytes,
        "weights_bytes_per_gpu": stage.weights_per_gpu,
        "kv_bytes_per_token_per_gpu": stage.kv_bytes_per_token,
    }


def _fit_json(fit: GpuFit) -> dict[str, Any]:
    t = fit.throughput
    return {
        **_layout_json(fit),
        "stages": [_stage_json(stage) for stage in fit.stages],
        "priced_stage": fit.priced_stage if fit.stages else None,
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
        # A term's JSON is its fields, in their order.
        "terms": [asdict(term) for term in fit.terms],
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


def report_json(report: SizingReport) -> dict[str, Any]:
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
        **_layout_json(report.selected),
        "gpus_per_node": report.gpus_per_node or report.selected.num_gpus,
        "nodes": report.nodes,
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
