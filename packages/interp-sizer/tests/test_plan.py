"""The sizer's verdicts: the issue's headline numbers, refusals, advice and the snippet."""

from __future__ import annotations

import json

import pytest
from sizer_helpers import ISSUE_GPUS

from interp_core.errors import ConfigError, InvalidArgument, PointUnsupported
from interp_sizer import (
    GIB,
    SizingRequest,
    UnknownGpu,
    UnknownModel,
    UnsupportedSetting,
    resolve_config,
    size,
)

LLAMA = "meta-llama/Llama-3.1-8B"


def test_llama_31_8b_on_one_h100_with_vllm_bf16() -> None:
    report = size(LLAMA, gpu="H100-80GB", backend="vllm", dtype="bfloat16", max_model_len=8192)
    assert report.weights_bytes == 8_030_261_248 * 2
    assert report.weights_bytes / GIB == pytest.approx(15.0, abs=0.05)  # ≈ 15 GiB
    assert report.kv_bytes_per_token == 128 * 1024
    fit = report.selected
    assert fit.gpu.name == "H100-80GB" and fit.num_gpus == 1 and fit.fits
    # 0.9 × 79.1 GiB, less weights and overheads, leaves roughly 50-56 GiB of KV.
    kv_term = next(t for t in fit.terms if t.key == "kv_cache")
    assert 50 * GIB < kv_term.bytes < 56 * GIB
    assert fit.kv_tokens == kv_term.bytes // (16 * 128 * 1024) * 16
    assert 400_000 < fit.kv_tokens < 460_000
    assert fit.max_context == 131_072  # the model's own limit, not memory, caps one sequence
    assert 'backend="vllm"' in report.snippet and "max_model_len=8192" in report.snippet
    t = fit.throughput
    assert t is not None and t.limiter == "kernel launches (no CUDA graphs)"
    # Single stream, graph replay, ~16 GB of weights at 70% of 3.35 TB/s: ~146 tok/s.
    generate = size(
        LLAMA, gpu="H100-80GB", backend="vllm-generate", dtype="bfloat16", max_model_len=8192
    )
    speed = generate.selected.throughput
    assert speed is not None and speed.limiter == "weight bandwidth"
    assert 120 < speed.decode_tokens_per_s < 160


def test_deepseek_v3_mla_kv_is_576_values_per_layer_per_token() -> None:
    report = size("deepseek-ai/DeepSeek-V3", gpu="H200", num_gpus=8, max_model_len=32_768)
    assert report.kv_values_per_token_layer == 576
    assert report.kv_bytes_per_token == 61 * 576 * 2
    assert report.model.inventory.checkpoint_quantization == "fp8"  # block-wise FP8 checkpoint
    assert 620 * GIB < report.weights_bytes < 640 * GIB
    assert report.selected.fits


def test_a_model_too_large_for_one_card_names_the_fix_and_the_smallest_fit() -> None:
    report = size("meta-llama/Llama-3.1-70B", gpu="A100-80GB", dtype="bfloat16", max_model_len=8192)
    fit = report.selected
    assert not fit.fits
    assert "short of weights" in fit.problems[0]
    assert any("quantization='fp8'" in a for a in fit.advice)
    # One card of 178 GiB beats two A100s: fewest GPUs first, then the least memory.
    assert report.smallest is not None
    assert (report.smallest.gpu.name, report.smallest.num_gpus) == ("B200", 1)
    two = size("meta-llama/Llama-3.1-70B", gpu="A100-80GB", num_gpus=2, max_model_len=8192)
    assert two.selected.fits


def test_context_too_long_for_the_kv_pool_suggests_the_largest_that_fits() -> None:
    report = size(LLAMA, gpu="L4", dtype="bfloat16", max_model_len=131_072)
    fit = report.selected
    assert not fit.fits
    assert 0 < fit.max_context < 131_072
    assert f"max_model_len={fit.max_context}" in fit.advice[0]
    assert size(LLAMA, gpu="L4", max_model_len=fit.max_context).selected.fits
    assert not size(LLAMA, gpu="L4", max_model_len=fit.max_context + 2048).selected.fits


def test_fp8_kv_doubles_the_tokens() -> None:
    auto = size(LLAMA, gpu="H100-80GB", max_model_len=8192).selected.kv_tokens
    fp8 = size(LLAMA, gpu="H100-80GB", max_model_len=8192, kv_cache_dtype="fp8").selected
    assert fp8.kv_tokens == pytest.approx(2 * auto, rel=0.001)


def test_concurrency_beyond_the_pool_does_not_fit() -> None:
    many = size(LLAMA, gpu="H100-80GB", max_model_len=32_768, concurrency=100).selected
    assert not many.fits and "sequences of 32,768 tokens need" in many.problems[0]
    assert many.max_context < 32_768


def test_static_backend_prices_its_tap_buffers_and_graph_pool() -> None:
    report = size("Qwen/Qwen3-8B", gpu="A100-80GB", backend="vllm-static", max_model_len=32_768)
    terms = {t.key: t for t in report.selected.terms}
    # 'auto' taps: resid_post read (bf16) at 36 layers, 4096 wide, 8192 rows, and written there
    # (an op table of 1,024 + 1 entries, two float32 vectors and nine scalars each, and an
    # int64 index per row and level, two levels, plus a finite flag).
    table = (1024 + 1) * (4096 * 2 * 4 + 9 * 4)
    assert terms["static_buffers"].bytes == 36 * (4096 * 2 * 8192 + table + 8192 * (2 * 8 + 1))
    # The taps live in vLLM's own CUDA graphs: the same graph memory as vanilla vLLM.
    plain = size("Qwen/Qwen3-8B", gpu="A100-80GB", backend="vllm-generate", max_model_len=32_768)
    vanilla = {t.key: t for t in plain.selected.terms}["cuda_graphs"].bytes
    assert terms["cuda_graphs"].bytes == vanilla < GIB
    assert 'static_points="auto"' in report.snippet
    chosen = size(
        "Qwen/Qwen3-8B",
        gpu="A100-80GB",
        backend="vllm-static",
        max_model_len=4096,
        capture=["resid_post.10", "mlp_out"],
        steer=["resid_post.10"],
    )
    snippet = chosen.snippet
    assert 'static_points=["resid_post.10", *(f"mlp_out.{layer}" for layer in range(36))]' in (
        snippet
    )
    assert 'static_writes=["resid_post.10"]' in snippet
    compile(snippet, "<snippet>", "exec")


def test_capture_points_cost_width_times_dtype_per_token() -> None:
    report = size(LLAMA, gpu="H100-80GB", max_model_len=8192, capture=["resid_post"])
    assert report.capture_bytes_per_token == 32 * 4096 * 2  # 256 KiB, twice the KV
    eager = size(
        LLAMA,
        gpu="H100-80GB",
        backend="eager",
        dtype="bfloat16",
        max_model_len=2048,
        capture=["mlp_act"],
    )
    assert eager.capture_bytes_per_token == 32 * 14336 * 2
    captured = next(t for t in eager.selected.terms if t.key == "captures")
    assert captured.bytes == 2048 * 32 * 14336 * 2
    assert 'attn_implementation="sdpa"' in eager.snippet


def test_attention_points_switch_eager_to_materialised_attention() -> None:
    report = size(
        "meta-llama/Llama-3.2-1B",
        gpu="A100-80GB",
        backend="eager",
        max_model_len=1024,
        capture=["attn_probs.3"],
    )
    assert 'attn_implementation="eager"' in report.snippet
    assert report.capture_bytes_per_token == 32 * 1024 * 2  # heads × key length
    keys = {t.key for t in report.selected.terms}
    assert "act_attention_matrices" in keys


def test_t4_refuses_bf16_and_names_float16() -> None:
    fit = size("meta-llama/Llama-3.2-1B", gpu="T4", dtype="bfloat16", max_model_len=4096).selected
    assert not fit.fits and "dtype='float16'" in fit.problems[0]
    assert size(
        "meta-llama/Llama-3.2-1B", gpu="T4", dtype="float16", max_model_len=4096
    ).selected.fits


def test_pre_quantized_gpt_oss_is_priced_packed() -> None:
    report = size("openai/gpt-oss-20b", gpu="H100-80GB", max_model_len=8192)
    assert report.model.inventory.checkpoint_quantization == "mxfp4"
    assert 12 * GIB < report.weights_bytes < 14 * GIB  # ~12.8 GiB native, not ~39 in bf16


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"backend": "eager", "quantization": "fp8"}, UnsupportedSetting, "vLLM backend"),
        ({"backend": "vllm", "quantization": "bnb-8bit"}, UnsupportedSetting, "backend='eager'"),
        ({"num_gpus": 0}, InvalidArgument, "num_gpus must be a positive integer"),
        ({"num_gpus": 3}, UnsupportedSetting, "divides the heads"),
        (
            {"backend": "vllm-generate", "capture": ["resid_post"]},
            UnsupportedSetting,
            "installs no taps",
        ),
        ({"max_model_len": 10**6}, UnsupportedSetting, "exceeds the model's 131072 positions"),
        ({"backend": "eager", "kv_cache_dtype": "fp8"}, UnsupportedSetting, "model dtype"),
        ({"gpu_memory_utilization": 1.5}, InvalidArgument, r"\(0, 1\]"),
        ({"dtype": "int8"}, UnsupportedSetting, "quantization="),
        ({"capture": ["router_logits"]}, PointUnsupported, "mixture-of-experts"),
        ({"gpu": "H1000"}, UnknownGpu, "did you mean"),
        ({"bogus": 1}, InvalidArgument, "unknown sizing option"),
    ],
)
def test_refusals_say_what_why_and_what_instead(kwargs: dict, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        size(LLAMA, **kwargs)


def test_unknown_and_malformed_models_are_refused_clearly(tmp_path) -> None:
    with pytest.raises(UnknownModel, match=r"Did you mean 'meta-llama/Llama-3\.1-8B'"):
        size("meta-llama/llama-3.1-8b-typo")
    with pytest.raises(UnknownModel, match="HF_HUB_OFFLINE"):
        size("someone/not-a-model")
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    with pytest.raises(ConfigError, match="cannot read"):
        size(bad)
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        resolve_config({"model_type": "llama", "hidden_size": 64})


def test_a_pasted_config_sizes_like_its_bundled_twin() -> None:
    from interp_core.known_models import load_known_config

    pasted = resolve_config(load_known_config(LLAMA), "my-llama")
    a = size(pasted, gpu="A100-80GB", max_model_len=8192).to_json()
    b = size(LLAMA, gpu="A100-80GB", max_model_len=8192).to_json()
    assert a["kv_tokens"] == b["kv_tokens"] and a["weights_bytes"] == b["weights_bytes"]


def test_json_report_carries_the_contract_keys() -> None:
    data = size(LLAMA, gpu="H100-80GB", max_model_len=8192).to_json()
    for key in ("weights_bytes", "kv_bytes_per_token", "kv_tokens", "fits", "snippet"):
        assert key in data
    assert set(data["fits"]) >= set(ISSUE_GPUS)
    json.dumps(data)


def test_default_request_is_the_documented_one() -> None:
    request = SizingRequest()
    # num_gpus None: no count asked for, so the table is at 1 GPU and the fewest that fit win.
    assert request.backend == "vllm" and request.num_gpus is None and request.concurrency == 1


@pytest.mark.parametrize(
    "setting",
    [
        {"backend": "vllm", "max_num_batched_tokens": 4096},
        {"backend": "vllm-static", "capture": ["resid_post.10"], "steer": ["resid_post.10"]},
        {"backend": "vllm-generate"},
        {"backend": "eager"},
    ],
)
def test_every_keyword_of_the_snippet_is_one_load_model_takes(setting: dict) -> None:
    # The snippet once passed max_num_batched_tokens= bare, which load_model refuses (vLLM's
    # engine arguments travel in extra_vllm_kwargs).
    import ast

    from interp_core.backend_keywords import check_backend_keywords

    report = size(LLAMA, gpu="H100-80GB", max_model_len=8192, **setting)
    call = ast.parse(report.snippet).body[-1].value  # model = load_model(...)
    assert isinstance(call, ast.Call) and call.func.id == "load_model"
    keywords = {k.arg for k in call.keywords} - {"backend"}
    check_backend_keywords(setting["backend"], keywords)
    if "max_num_batched_tokens" in setting:
        assert 'extra_vllm_kwargs={"max_num_batched_tokens": 4096}' in report.snippet


def test_a_requested_gpu_count_selects_at_that_count() -> None:
    seventy = "meta-llama/Llama-3.1-70B"
    fewest = size(seventy, quantization="fp8", max_model_len=8192)
    assert (fewest.selected.num_gpus, fewest.selected.gpu.name) == (1, "H200")
    two = size(seventy, quantization="fp8", max_model_len=8192, num_gpus=2)
    assert two.selected.num_gpus == 2 and two.selected.fits
    assert "num_gpus=2," in two.snippet
    # The smallest card that fits at two GPUs; nothing with less memory fits at two.
    smaller = [f for f in two.fits if f.gpu.memory_gib < two.selected.gpu.memory_gib]
    assert smaller and not any(f.fits for f in smaller)
    assert two.smallest is not None and two.smallest.num_gpus == 1


def test_the_charted_kv_is_the_workloads_share_of_the_pool() -> None:
    report = size(LLAMA, gpu="H200", max_model_len=8192, concurrency=2)
    fit = report.selected
    pool = fit.category_bytes()["kv"]
    held = fit.category_bytes(8192 * 2)["kv"]
    assert pool > 100 * GIB  # what vLLM reserves on an H200
    assert held == pytest.approx(2 * 8192 * report.kv_bytes_per_token, rel=0.01)
    # Never more than the pool, however much is asked for.
    assert fit.category_bytes(10**9)["kv"] == pool
