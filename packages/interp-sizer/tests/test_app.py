"""The Streamlit app, driven through Streamlit's AppTest: widgets in, numbers and messages out."""

from __future__ import annotations

import pytest
from sizer_helpers import REPO, require

APP = REPO / "apps" / "sizer" / "app.py"


def _app(**params: str):
    require("streamlit", module="streamlit")
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(APP), default_timeout=60)
    for key, value in params.items():
        app.query_params[key] = value
    return app.run()


def _metrics(app) -> dict[str, str]:
    return {metric.label: metric.value for metric in app.metric}


def test_llama_on_one_h100_shows_15_gib_of_weights_and_128_kib_of_kv_per_token() -> None:
    app = _app(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-80GB",
        backend="vllm",
        dtype="bfloat16",
        max_model_len="8192",
    )
    assert not app.exception and not app.error
    metrics = _metrics(app)
    assert metrics["Weights"] == "14.96 GiB"
    assert metrics["KV per token"] == "128.0 KiB"
    assert int(metrics["KV tokens"].replace(",", "")) > 400_000
    assert "Fits on 1 × H100-80GB" in app.success[0].value
    snippet = app.code[0].value
    assert '"meta-llama/Llama-3.1-8B"' in snippet and 'backend="vllm"' in snippet
    table = app.dataframe[0].value
    assert len(table) == 14 and set(table["GPU"]) >= {"T4", "H100-80GB", "MI300X"}


def test_deepseek_v3_shows_the_mla_latent() -> None:
    app = _app(model="deepseek-ai/DeepSeek-V3", max_model_len="16384")
    assert not app.error
    kv = app.metric[1]
    assert kv.value == f"{61 * 576 * 2 / 1024:,.1f} KiB"
    assert "576 values per layer" in kv.help


def test_the_url_reopens_a_static_sizing_and_widgets_write_it_back() -> None:
    app = _app(model="Qwen/Qwen3-8B", backend="vllm-static", gpu="A100-80GB")
    assert app.selectbox(key="model_pick").value == "Qwen/Qwen3-8B"
    assert app.selectbox(key="backend").value == "vllm-static"
    assert 'static_points="auto"' in app.code[0].value
    assert any("static tap buffers" in str(row) for row in app.dataframe[1].value["term"])
    # Change widgets: the numbers and the query string follow.
    app.selectbox(key="kv_cache_dtype").set_value("fp8")
    app.multiselect(key="capture").set_value(["resid_post", "mlp_out"]).run()
    assert app.query_params["kv_cache_dtype"] == "fp8"
    assert app.query_params["capture"] == "resid_post,mlp_out"
    assert 'kv_cache_dtype="fp8"' in app.code[0].value
    assert '*(f"mlp_out.{layer}" for layer in range(36))' in app.code[0].value


def test_changing_the_gpu_count_reprices() -> None:
    app = _app(model="meta-llama/Llama-3.1-70B", gpu="A100-80GB", max_model_len="8192")
    assert app.error and "Does not fit on 1 × A100-80GB" in app.error[0].value
    assert app.info and "quantization='fp8'" in app.info[0].value
    app.number_input(key="num_gpus").set_value(2).run()
    assert not app.error and "Fits on 2 × A100-80GB" in app.success[0].value


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"model": "nobody/nothing-here"}, "unknown model 'nobody/nothing-here'"),
        ({"model": "Qwen/Qwen3-8b"}, "Did you mean 'Qwen/Qwen3-8B'"),
        ({"model": "meta-llama/Llama-3.1-8B", "num_gpus": "3"}, "divides the heads"),
    ],
)
def test_bad_input_shows_a_message_not_a_traceback(params: dict, message: str) -> None:
    app = _app(**params)
    assert not app.exception
    assert app.error and message in app.error[0].value
    # A library's exception class means nothing to a user of the page.
    assert "Error" not in app.error[0].value and "Exception" not in app.error[0].value


def test_a_malformed_pasted_config_shows_a_message() -> None:
    app = _app()
    app.text_area(key="config_text").input("{ not json").run()
    assert not app.exception and "not valid JSON" in app.error[0].value
    app.text_area(key="config_text").input('{"model_type": "llama"}').run()
    assert not app.exception and "num_hidden_layers" in app.error[0].value


def test_a_requested_gpu_count_is_kept_when_no_gpu_is_chosen() -> None:
    # 70B in fp8 fits on one H200; asked for two GPUs, the page must answer for two.
    app = _app(
        model="meta-llama/Llama-3.1-70B",
        quantization="fp8",
        num_gpus="2",
        max_model_len="8192",
    )
    assert not app.error
    assert app.success[0].value.startswith("Fits on 2 × ")
    assert "num_gpus=2," in app.code[0].value
    assert any("Fit across GPUs (2 each)" in m.value for m in app.markdown)
    # GPUs = 0 (the default) keeps the old answer: the fewest GPUs that fit.
    app.number_input(key="num_gpus").set_value(0).run()
    assert app.success[0].value.startswith("Fits on 1 × ")
    assert "num_gpus=1," in app.code[0].value


def test_the_heading_names_fp8_weights_and_the_speed_caveat_is_on_the_page() -> None:
    app = _app(
        model="meta-llama/Llama-3.1-8B",
        gpu="H100-80GB",
        quantization="fp8",
        kv_cache_dtype="fp8",
        max_model_len="8192",
    )
    heading = app.subheader[0].value
    assert "fp8 weights, bfloat16 activations, fp8 KV cache" in heading
    captions = " ".join(c.value for c in app.caption)
    assert "roofline estimates, not measurements" in captions


def test_gpus_that_do_not_fit_show_why_in_full_and_no_speed() -> None:
    app = _app(model="meta-llama/Llama-3.1-70B", gpu="H100-80GB", max_model_len="8192")
    table = app.dataframe[0].value
    t4 = table[table["GPU"] == "T4"].iloc[0]
    assert t4["fits"] == "no"
    assert t4["decode tok/s"] is None or t4["decode tok/s"] != t4["decode tok/s"]  # None/NaN
    assert "short of weights" in t4["limit / why not"]
    why = next(m.value for m in app.markdown if m.value.startswith("**Why not:**"))
    assert "- **T4**: T4 has no bfloat16 support" in why
    assert "short of weights + overheads" in why
    fitting = table[table["fits"] == "yes"].iloc[0]
    assert fitting["limit / why not"].startswith("decode: ")


def _chart_gib(app) -> dict[tuple[str, str], float]:
    """The stacked memory chart's data as the browser receives it: (GPU, category) -> GiB."""
    import pyarrow as pa  # streamlit's own dependency; the chart travels as Arrow

    chart = app.get("vega_lite_chart")[0].proto
    frame = pa.ipc.open_stream(chart.datasets[0].data.data).read_all().to_pandas()
    gpu, category, value = frame.columns
    return {(row[gpu], row[category]): row[value] for _, row in frame.iterrows()}


def test_the_memory_chart_holds_the_workloads_kv_not_the_free_pool() -> None:
    app = _app(model="meta-llama/Llama-3.1-8B", gpu="H200", max_model_len="8192")
    captions = " ".join(c.value for c in app.caption)
    assert "KV is what this workload holds (1 × 8,192 tokens)" in captions
    gib = _chart_gib(app)
    # One sequence of 8,192 tokens at 128 KiB each is 1 GiB, on every card that fits it; the
    # H200's pool would hold ~850,000 tokens (over 100 GiB), which the chart used to draw.
    assert gib[("H200", "kv")] == pytest.approx(1.0, abs=0.01)
    assert gib[("B200", "kv")] == pytest.approx(1.0, abs=0.01)
    total = sum(v for (card, _), v in gib.items() if card == "H200")
    assert 15 < total < 25


def test_pipeline_stages_and_nodes_are_inputs_and_reach_the_snippet() -> None:
    app = _app(
        model="meta-llama/Llama-3.1-70B",
        gpu="H100-80GB",
        dtype="bfloat16",
        num_gpus="8",
        pipeline_parallel="2",
        max_model_len="8192",
    )
    assert not app.exception and not app.error
    assert app.number_input(key="pipeline_parallel").value == 2
    assert app.number_input(key="gpus_per_node").value == 0
    snippet = app.code[0].value
    assert "    num_gpus=8,\n    pipeline_parallel=2,\n" in snippet
    assert "distributed" not in snippet
    stages = next(frame.value for frame in app.dataframe if "holds" in frame.value.columns)
    assert list(stages["layers"]) == ["0-39", "40-79"]
    # One GPU of the last stage: 40 layers, the final norm and lm_head over 4 GPUs.
    assert stages["weights per GPU GiB"].iloc[1] == round(17_638_428_672 / 2**30, 3)
    captions = " ".join(c.value for c in app.caption)
    assert "2 stage(s) × 4 GPU(s) each (tensor parallel) on 1 node(s)" in captions
    # Four GPUs per node: two nodes, and the snippet asks for Ray; the URL follows.
    app.number_input(key="gpus_per_node").set_value(4).run()
    assert not app.error
    assert app.query_params["gpus_per_node"] == "4"
    assert app.query_params["pipeline_parallel"] == "2"
    assert '    pipeline_parallel=2,\n    distributed="ray",\n' in app.code[0].value
    assert "on 2 node(s) of 4 GPUs" in " ".join(c.value for c in app.caption)
    # Two per node would split a tensor-parallel group across machines: refused, with the fix.
    app.number_input(key="gpus_per_node").set_value(2).run()
    assert not app.exception
    assert app.error and "Use pipeline_parallel=4" in app.error[0].value
