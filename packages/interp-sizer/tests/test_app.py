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
        ({"num_gpus": "0"}, "num_gpus must be a positive integer"),
        ({"model": "meta-llama/Llama-3.1-8B", "num_gpus": "3"}, "divides the heads"),
    ],
)
def test_bad_input_shows_a_message_not_a_traceback(params: dict, message: str) -> None:
    app = _app(**params)
    assert not app.exception
    assert app.error and message in app.error[0].value


def test_a_malformed_pasted_config_shows_a_message() -> None:
    app = _app()
    app.text_area(key="config_text").input("{ not json").run()
    assert not app.exception and "not valid JSON" in app.error[0].value
    app.text_area(key="config_text").input('{"model_type": "llama"}').run()
    assert not app.exception and "num_hidden_layers" in app.error[0].value
