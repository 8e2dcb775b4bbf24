"""Which GPU and settings fit this model? The interp-engine sizer as a Streamlit page.

Pick or type a model, a backend, dtype and quantization, GPUs, context and concurrency, and the
points to capture or steer; the page shows the fit across the GPU catalogue, a stacked memory
chart, KV tokens, estimated speeds and the `load_model(...)` call to copy. Every choice is
mirrored into the URL's query parameters, so `?model=Qwen/Qwen3-8B&backend=vllm-static` reopens
the same sizing. Bad input shows a message, never a traceback.

Defaults differ from `interp-size` on purpose, and the sidebar says so: the app starts at a
context of 8,192 tokens (the CLI prices the model's maximum unless `--max-model-len` is given),
and GPUs = 0 means "the fewest that fit" (the CLI's default when `--num-gpus` is not given).
Pipeline stages and GPUs per node price a multi-node vLLM layout (`--pipeline-parallel`,
`--gpus-per-node` on the CLI).

Run it with `make sizer` (or `streamlit run apps/sizer/app.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import streamlit as st

from interp_core.errors import InterpError
from interp_core.known_models import known_model_ids
from interp_core.points import points_for
from interp_sizer import CALIBRATIONS, GPUS, SizingReport, resolve_config, resolve_model, size
from interp_sizer.calibration import GIB
from interp_sizer.formats import BACKENDS, KV_CACHE_DTYPES, QUANTIZATIONS

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B"
OTHER = "other (type a repo id, folder or config path)"
SMALLEST = "smallest that fits"
DTYPES = ("auto", "bfloat16", "float16", "float32")
NO_QUANT = "none"
CATEGORIES = ("weights", "kv", "activations", "capture", "overhead")


def _param(name: str, default: str = "") -> str:
    value = st.query_params.get(name)
    return str(value) if value not in (None, "") else default


def _int_param(name: str, default: int) -> int:
    try:
        return int(_param(name, str(default)))
    except ValueError:
        return default


def _float_param(name: str, default: float) -> float:
    try:
        return float(_param(name, str(default)))
    except ValueError:
        return default


def _list_param(name: str) -> list[str]:
    return [part for part in _param(name).split(",") if part]


def _choice(options: tuple[str, ...] | list[str], value: str, default: str) -> int:
    return list(options).index(value) if value in options else list(options).index(default)


def _inputs() -> dict[str, Any]:
    """The sidebar: every knob, its initial value taken from the URL."""
    side = st.sidebar
    side.header("Model")
    bundled = list(known_model_ids())
    model_param = _param("model", DEFAULT_MODEL)
    picks = [*bundled, OTHER]
    pick = side.selectbox(
        "Model",
        picks,
        index=picks.index(model_param) if model_param in bundled else len(bundled),
        key="model_pick",
    )
    typed = ""
    if pick == OTHER:
        typed = side.text_input(
            "Repo id, model folder or config.json path",
            value="" if model_param in bundled else model_param,
            key="model_text",
        )
    pasted = side.text_area("…or paste a config.json", value="", key="config_text", height=80)

    side.header("Backend and precision")
    backend = side.selectbox(
        "Backend", BACKENDS, index=_choice(BACKENDS, _param("backend"), "vllm"), key="backend"
    )
    dtype = side.selectbox(
        "dtype", DTYPES, index=_choice(DTYPES, _param("dtype"), "auto"), key="dtype"
    )
    quant_options = (NO_QUANT, *QUANTIZATIONS)
    quantization = side.selectbox(
        "Quantize on load",
        quant_options,
        index=_choice(quant_options, _param("quantization"), NO_QUANT),
        key="quantization",
    )
    kv_options = tuple(KV_CACHE_DTYPES)
    kv_cache_dtype = side.selectbox(
        "KV cache dtype",
        kv_options,
        index=_choice(kv_options, _param("kv_cache_dtype"), "auto"),
        key="kv_cache_dtype",
        disabled=backend == "eager",
    )

    side.header("Hardware")
    gpu_options = (SMALLEST, *(gpu.name for gpu in GPUS))
    gpu = side.selectbox(
        "GPU", gpu_options, index=_choice(gpu_options, _param("gpu"), SMALLEST), key="gpu"
    )
    num_gpus = side.number_input(
        "GPUs (0 = the fewest that fit)",
        min_value=0,
        max_value=64,
        value=max(0, _int_param("num_gpus", 0)),
        key="num_gpus",
        help="A count other than 0 is kept: the table, the verdict and the snippet use it.",
    )
    pipeline_parallel = side.number_input(
        "Pipeline stages (pipeline_parallel)",
        min_value=1,
        max_value=64,
        value=max(1, _int_param("pipeline_parallel", 1)),
        key="pipeline_parallel",
        disabled=backend == "eager",
        help="vLLM: the layers split into this many stages, each on GPUs / stages GPUs (tensor "
        "parallel). Kept when the GPU count is 0 (the fewest that fit).",
    )
    gpus_per_node = side.number_input(
        "GPUs per node (0 = all on one node)",
        min_value=0,
        max_value=64,
        value=max(0, _int_param("gpus_per_node", 0)),
        key="gpus_per_node",
        help='More GPUs than this span several machines: the snippet adds distributed="ray".',
    )
    utilization = side.slider(
        "gpu_memory_utilization",
        min_value=0.10,
        max_value=1.0,
        step=0.01,
        value=min(1.0, max(0.1, _float_param("util", 0.9))),
        key="util",
        disabled=backend == "eager",
    )

    side.header("Workload")
    max_model_len = side.number_input(
        "Context (max_model_len, 0 = the model's)",
        min_value=0,
        value=_int_param("max_model_len", 8192),
        key="max_model_len",
        help="Starts at 8,192 tokens here; `interp-size` prices the model's maximum unless "
        "--max-model-len is given.",
    )
    concurrency = side.number_input(
        "Concurrent sequences",
        min_value=1,
        value=max(1, _int_param("concurrency", 1)),
        key="concurrency",
    )
    return {
        "model": pick if pick != OTHER else typed.strip(),
        "pasted": pasted.strip(),
        "backend": backend,
        "dtype": dtype,
        "quantization": None if quantization == NO_QUANT else quantization,
        "kv_cache_dtype": "auto" if backend == "eager" else kv_cache_dtype,
        "gpu": None if gpu == SMALLEST else gpu,
        "num_gpus": int(num_gpus) or None,
        "pipeline_parallel": 1 if backend == "eager" else int(pipeline_parallel),
        "gpus_per_node": int(gpus_per_node) or None,
        "gpu_memory_utilization": None if backend == "eager" else float(utilization),
        "max_model_len": int(max_model_len) or None,
        "concurrency": int(concurrency),
    }


def _point_inputs(facts_points: list[str], backend: str) -> tuple[list[str], list[str]]:
    if backend == "vllm-generate":
        st.sidebar.caption("vllm-generate installs no taps: nothing can be captured or steered.")
        return [], []
    label = "Static taps to read" if backend == "vllm-static" else "Points to capture"
    capture = st.sidebar.multiselect(
        label,
        facts_points,
        default=[p for p in _list_param("capture") if p in facts_points],
        key="capture",
    )
    steer = st.sidebar.multiselect(
        "Points to steer",
        facts_points,
        default=[p for p in _list_param("steer") if p in facts_points],
        key="steer",
    )
    return capture, steer


def _sync_url(inputs: Mapping[str, Any], capture: list[str], steer: list[str]) -> None:
    """Mirror the choices into the query string, so the URL reopens this sizing."""
    wanted = {
        "model": inputs["model"] if not inputs["pasted"] else "",
        "backend": inputs["backend"],
        "dtype": inputs["dtype"],
        "quantization": inputs["quantization"] or "",
        "kv_cache_dtype": inputs["kv_cache_dtype"],
        "gpu": inputs["gpu"] or "",
        "num_gpus": str(inputs["num_gpus"] or ""),
        "pipeline_parallel": ""
        if inputs["pipeline_parallel"] == 1
        else str(inputs["pipeline_parallel"]),
        "gpus_per_node": str(inputs["gpus_per_node"] or ""),
        "util": ""
        if inputs["gpu_memory_utilization"] is None
        else f"{inputs['gpu_memory_utilization']:g}",
        "max_model_len": str(inputs["max_model_len"] or 0),
        "concurrency": str(inputs["concurrency"]),
        "capture": ",".join(capture),
        "steer": ",".join(steer),
    }
    for key, value in wanted.items():
        if value:
            if st.query_params.get(key) != value:
                st.query_params[key] = value
        elif key in st.query_params:
            del st.query_params[key]


def _resolve(inputs: Mapping[str, Any]):
    if inputs["pasted"]:
        try:
            config = json.loads(inputs["pasted"])
        except ValueError as exc:
            message = f"The pasted config is not valid JSON: {exc}"
            raise ValueError(message) from exc
        return resolve_config(config, "my-model")
    return resolve_model(inputs["model"])


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f} GiB"


def _show(report: SizingReport) -> None:
    fit = report.selected
    model = report.model
    st.subheader(f"{model.model_id} · {report.request.backend} · {report.precision}")
    st.caption(
        f"{model.facts.architecture}, {model.facts.n_layers} layers, read from {model.origin}; "
        f"weights from {'safetensors headers (exact)' if model.weights_exact else 'the config'}"
    )
    cols = st.columns(5)
    cols[0].metric("Weights", _gib(report.weights_bytes))
    cols[1].metric(
        "KV per token",
        f"{report.kv_bytes_per_token / 1024:,.1f} KiB",
        help=f"{report.kv_values_per_token_layer} values per layer per token, per GPU",
    )
    cols[2].metric("KV tokens", f"{fit.kv_tokens:,}")
    cols[3].metric(
        "Longest context",
        f"{fit.max_context:,}",
        help=f"at {report.request.concurrency} concurrent sequence(s)",
    )
    speed = fit.throughput
    cols[4].metric(
        "Decode tok/s",
        "-" if speed is None or not fit.fits else f"{speed.decode_tokens_per_s:,.0f}",
        help=None if speed is None else f"limited by {speed.limiter}",
    )
    if speed is not None and fit.fits:
        low, high = speed.range(speed.decode_tokens_per_s)
        st.caption(
            f"Speeds are roofline estimates, not measurements: decode {low:,.0f}–{high:,.0f} "
            f"tok/s over {speed.sequences} sequence(s) at {speed.context:,} tokens of context, "
            f"limited by {speed.limiter}. Real runs vary with kernels, drivers and batching."
        )

    where = f"{fit.num_gpus} × {fit.gpu.name}"
    if fit.fits:
        st.success(
            f"Fits on {where}: {fit.kv_tokens:,} KV tokens, "
            f"{fit.max_concurrency:,.1f} sequences of {report.max_model_len:,} tokens."
        )
    else:
        st.error(f"Does not fit on {where}: " + "; ".join(fit.problems))
        if fit.advice:
            st.info("Try: " + "; ".join(fit.advice))
    if report.smallest is not None:
        st.write(
            f"Smallest fitting configuration: **{report.smallest.num_gpus} × "
            f"{report.smallest.gpu.name}**"
        )
    else:
        st.warning("Nothing in the catalogue fits with up to 8 GPUs at these settings.")

    if fit.pipeline_parallel > 1 or report.nodes > 1:
        _show_stages(report)

    st.markdown("#### `load_model(...)` for what was priced")
    st.code(report.snippet, language="python")

    st.markdown(f"#### Fit across GPUs ({report.fits[0].num_gpus} each)")
    rows = []
    for row in report.fits:
        t = row.throughput
        rows.append(
            {
                "GPU": row.gpu.name,
                "fits": "yes" if row.fits else "no",
                "usable GiB": row.gpu.memory_gib,
                "KV tokens": row.kv_tokens,
                "longest context": row.max_context,
                "decode tok/s": None if t is None or not row.fits else round(t.decode_tokens_per_s),
                "prefill tok/s": None
                if t is None or not row.fits
                else round(t.prefill_tokens_per_s),
                "limit / why not": row.limit,
            }
        )
    st.dataframe(
        rows,
        hide_index=True,
        width="stretch",
        column_config={"limit / why not": st.column_config.TextColumn(width="large")},
    )
    misfits = [row for row in report.fits if not row.fits]
    if misfits:
        # The table cell truncates long reasons; each is written out in full here.
        st.markdown(
            "**Why not:**\n"
            + "\n".join(f"- **{row.gpu.name}**: {'; '.join(row.problems)}" for row in misfits)
        )

    st.markdown("#### Memory per GPU (GiB)")
    needed = report.max_model_len * report.request.concurrency
    st.caption(
        f"KV is what this workload holds ({report.request.concurrency} × "
        f"{report.max_model_len:,} tokens), not the whole pool vLLM reserves for it; the "
        '"KV tokens" column gives the pool\'s capacity.'
    )
    chart = {
        row.gpu.name: {c: round(v / GIB, 3) for c, v in row.category_bytes(needed).items()}
        for row in report.fits
    }
    import pandas as pd  # streamlit's own dependency; only the chart needs a frame

    frame = pd.DataFrame.from_dict(chart, orient="index")[list(CATEGORIES)]
    frame.index.name = "GPU"
    st.bar_chart(frame, stack=True, sort=False, y_label="GiB", x_label="GPU")  # catalogue order

    st.markdown(f"#### Terms on {where}")
    st.dataframe(
        [
            {
                "term": t.label,
                "GiB": round(t.bytes / GIB, 3),
                "where": t.side,
                "how": t.provenance,
                "note": t.note,
            }
            for t in fit.terms
        ],
        hide_index=True,
        width="stretch",
    )
    for note in report.notes:
        st.caption(f"Note: {note}")
    with st.expander("Assumptions (every calibrated constant and its source)"):
        st.dataframe(
            [
                {
                    "constant": c.name,
                    "value": c.value,
                    "unit": c.unit,
                    "why": c.why,
                    "source": c.source,
                }
                for c in CALIBRATIONS
            ],
            hide_index=True,
            width="stretch",
        )


def _show_stages(report: SizingReport) -> None:
    """Pipeline stages and nodes: what each stage holds and costs per GPU."""
    fit = report.selected
    priced = fit.stages[fit.priced_stage] if fit.stages else None
    st.markdown("#### Pipeline stages and nodes")
    st.caption(
        f"{fit.pipeline_parallel} stage(s) × {fit.tensor_parallel} GPU(s) each (tensor "
        f"parallel) on {report.nodes} node(s) of {report.gpus_per_node or fit.num_gpus} GPUs. "
        + (f"The terms below are one GPU of {priced.label}. " if priced is not None else "")
        + "Stages run one after another for a sequence: they add memory, not single-stream "
        "speed."
    )
    st.dataframe(
        [
            {
                "stage": stage.index,
                "layers": f"{stage.first_layer}-{stage.stop_layer - 1}",
                "holds": ", ".join(stage.holds) or "-",
                "weights GiB": round(stage.weights_bytes / GIB, 3),
                "weights per GPU GiB": round(stage.weights_per_gpu / GIB, 3),
                "KV KiB/token/GPU": round(stage.kv_bytes_per_token / 1024, 1),
            }
            for stage in fit.stages
        ],
        hide_index=True,
        width="stretch",
        key="stages_table",
    )


def main() -> None:
    st.set_page_config(page_title="interp-engine GPU sizer", layout="wide")
    st.title("interp-engine GPU sizer")
    st.caption("Which GPUs and settings run a model on each backend, before anything loads.")
    inputs = _inputs()
    try:
        model = _resolve(inputs)
        names = [spec.name for spec in points_for(model.facts)]
        capture, steer = _point_inputs(names, inputs["backend"])
        _sync_url(inputs, capture, steer)
        report = size(
            model,
            gpu=inputs["gpu"],
            backend=inputs["backend"],
            dtype=inputs["dtype"],
            quantization=inputs["quantization"],
            kv_cache_dtype=inputs["kv_cache_dtype"],
            num_gpus=inputs["num_gpus"],
            gpu_memory_utilization=inputs["gpu_memory_utilization"],
            max_model_len=inputs["max_model_len"],
            concurrency=inputs["concurrency"],
            capture=capture,
            steer=steer,
            pipeline_parallel=inputs["pipeline_parallel"],
            gpus_per_node=inputs["gpus_per_node"],
        )
    except (InterpError, ValueError) as error:
        st.error(str(error))
        return
    _show(report)


main()
