"""The seed's "Loading models" page, snippet by snippet, as a user would paste it.

Offline: every hub id the page names has a config bundled with interp-core, and construction is
lazy on both backends, so building each model object needs no weights, no network and no GPU.
Steps that need weights are run on a tiny local model from interp_testmodels in place of the hub
id: warmup (lifecycle, on eager) and a capture on vllm-static (one vLLM engine start, `slow`).
The "auto" decision on a CUDA machine is tested with CUDA (and vLLM) injected.

Where vLLM is not installed, each vLLM snippet is asserted to be refused by `load_model` with
`BackendUnavailable` naming the install instead.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import interp_core.backends as backends
from interp_core.errors import (
    BackendUnavailable,
    CapabilityUnsupported,
    GradientsUnsupported,
    InvalidArgument,
    PointUnsupported,
)

VLLM = backends.vllm_installed()


def _vllm(model: str, **kwargs: Any) -> Any:
    """`load_model(model, **kwargs)` on a vLLM backend; without vLLM, None once refused."""
    from interpoint import load_model

    if not VLLM:
        with pytest.raises(BackendUnavailable, match="needs vLLM"):
            load_model(model, **kwargs)
        return None
    return load_model(model, **kwargs)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Hub: a config comes from disk or the bundled configs, never from the network."""
    monkeypatch.setattr(backends, "_hub_config", lambda model: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("INTERP_BACKEND", raising=False)
    yield


pytestmark = pytest.mark.usefixtures("offline")


# --- vLLM (default), static, generate-only ------------------------------------------------------
def test_vllm_default() -> None:
    model = _vllm("Qwen/Qwen3-8B", backend="vllm")
    if model is not None:
        assert model.backend_name == "vllm"
        assert (model.n_layers, model.d_model) == (36, 4096)
        assert model.engine is None  # lazy: nothing started


def test_vllm_static_with_declared_points() -> None:
    from interpoint import Address

    point = Address("resid_post", 10)
    model = _vllm("Qwen/Qwen3-8B", backend="vllm-static", static_points=[point])
    if model is not None:
        assert model.backend_name == "vllm-static"
        assert model.static_points == ("resid_post.10",)


def test_vllm_static_auto_points_and_writes() -> None:
    model = _vllm(
        "Qwen/Qwen3-8B",
        backend="vllm-static",
        static_points="auto",
        static_writes=["resid_post.10"],
    )
    if model is not None:
        assert model.static_points == tuple(sorted(f"resid_post.{i}" for i in range(36)))
        assert model.static_writes == ("resid_post.10",)


def test_vllm_generate_only() -> None:
    model = _vllm("Qwen/Qwen3-8B", backend="vllm-generate")
    if model is not None:
        assert model.backend_name == "vllm-generate"
        assert model.hooks_available is False


@pytest.mark.slow
@pytest.mark.skipif(not VLLM, reason="needs vLLM: the refusal is covered by the tests above")
def test_vllm_static_capture_on_a_tiny_model() -> None:
    # The snippet's capture, with a tiny local qwen3 in place of Qwen/Qwen3-8B (no weights here).
    from interp_core.sync import shutdown
    from interp_testmodels.families import build_family
    from interpoint import Address, capture, load_model

    point = Address("resid_post", 1)
    model = load_model(str(build_family("qwen3")), backend="vllm-static", static_points=[point])
    try:
        tokens = model.to_tokens("Hello, world")
        cache = capture(model, tokens, [point])
        assert tuple(cache[point].shape) == (*tuple(tokens.shape), model.d_model)
        with pytest.raises(PointUnsupported, match=r"resid_post\.0"):  # outside the declared set
            capture(model, tokens, [Address("resid_post", 0)])
    finally:
        shutdown(model)


# --- eager ----------------------------------------------------------------------------------------
def test_eager_with_device_dtype_and_attn_implementation() -> None:
    import torch

    from interpoint import load_model

    model = load_model(
        "google/gemma-2-2b-it",
        backend="eager",
        device="cuda",
        dtype="bfloat16",
        attn_implementation="eager",
    )
    assert model.backend_name == "eager"
    assert model.dtype == torch.bfloat16
    assert model.attn_implementation == "eager"
    assert (model.n_layers, model.d_model) == (26, 2304)


def test_eager_requires_grad_and_auto_dtype() -> None:
    import torch

    from interpoint import load_model

    model = load_model("google/gemma-2-2b-it", backend="eager", requires_grad=True)
    assert model.requires_grad is True
    # dtype="auto" is the checkpoint's own dtype: gemma-2-2b-it is published in float32.
    assert load_model("google/gemma-2-2b-it", backend="eager", dtype="auto").dtype == torch.float32
    assert load_model("Qwen/Qwen3-8B", backend="eager", dtype="auto").dtype == torch.bfloat16


# --- quantize on load -----------------------------------------------------------------------------
def test_quantize_on_load_fp8_with_fp8_kv_cache_on_two_gpus() -> None:
    model = _vllm(
        "meta-llama/Llama-3.3-70B-Instruct",
        backend="vllm",
        quantization="fp8",
        kv_cache_dtype="fp8",
        num_gpus=2,
    )
    if model is not None:
        engine = model._settings.engine_kwargs()
        assert engine["quantization"] == "fp8"
        assert engine["kv_cache_dtype"] == "fp8"
        assert engine["tensor_parallel_size"] == 2


def test_fp8_on_eager_names_the_alternative() -> None:
    from interpoint import load_model

    with pytest.raises(CapabilityUnsupported) as caught:
        load_model("meta-llama/Llama-3.3-70B-Instruct", backend="eager", quantization="fp8")
    assert "use a vLLM backend" in str(caught.value)
    assert "shipped in FP8" in str(caught.value)


# --- auto -----------------------------------------------------------------------------------------
def test_auto_here_and_vllm_installed() -> None:
    from interpoint import load_model, vllm_installed

    assert vllm_installed() is VLLM
    if backends.cuda_available():
        pytest.skip("this machine has CUDA; the CPU branch is tested with CUDA injected below")
    with warnings.catch_warnings():
        warnings.simplefilter("error", backends.BackendFallbackWarning)  # no GPU: no fallback
        model = load_model("Qwen/Qwen3-8B")
    assert model.backend_name == "eager"


@pytest.mark.skipif(not VLLM, reason="needs vLLM installed to construct a vLLM model")
def test_auto_on_a_cuda_machine_with_vllm_lands_on_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    from interpoint import load_model

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", backends.BackendFallbackWarning)
        model = load_model("Qwen/Qwen3-8B")  # not in the HF cache: the bundled config decides
    assert model.backend_name == "vllm"


def test_auto_warns_with_the_reason_when_it_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from interpoint import load_model

    monkeypatch.setattr(backends, "cuda_available", lambda: True)
    monkeypatch.setattr(backends, "vllm_installed", lambda: False)
    with pytest.warns(backends.BackendFallbackWarning, match="vLLM is not installed"):
        model = load_model("Qwen/Qwen3-8B")
    assert model.backend_name == "eager"


def test_auto_resolves_a_hub_id_through_the_hub_before_deciding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An id neither on disk nor bundled: auto asks the Hub (here a stand-in) for its config.
    asked: list[str] = []

    def hub(model: str) -> dict[str, Any]:
        asked.append(model)
        return {"architectures": ["Qwen3ForCausalLM"]}

    monkeypatch.setattr(backends, "_hub_config", hub)
    monkeypatch.setattr(backends, "_probe", lambda backend: None)

    class Judge:
        def supports_architecture(self, architecture: str) -> bool:
            return architecture == "Qwen3ForCausalLM"

    monkeypatch.setattr(backends, "_load", lambda registration: Judge)
    monkeypatch.setattr(backends, "_registration", lambda name: object())
    chosen = backends.select_backend("org/qwen3-finetune", vllm_available=True, cuda=True)
    assert asked == ["org/qwen3-finetune"]
    assert (chosen.name, chosen.use_vllm) == ("vllm", True)
    monkeypatch.setattr(backends, "_hub_config", lambda model: None)
    unknown = backends.select_backend("org/not-anywhere", vllm_available=True, cuda=True)
    assert (unknown.name, unknown.fell_back) == ("eager", True)
    assert "the Hub could not provide it" in unknown.reason


def test_select_backend_as_the_seed_calls_it() -> None:
    from interpoint import select_backend, vllm_installed

    selection = select_backend(
        "Qwen/Qwen3-8B",
        requested_device=None,
        requested_dtype="auto",
        force_backend=None,
        vllm_available=vllm_installed(),
    )
    cuda = backends.cuda_available()
    assert selection.use_vllm is (cuda and VLLM)
    assert selection.device == ("cuda" if cuda else "cpu")
    assert selection.dtype == "bfloat16"  # Qwen3-8B's config states bfloat16
    assert isinstance(selection.reason, str) and selection.reason


@pytest.mark.skipif(not VLLM, reason="the vllm backend must be importable to judge Qwen3")
def test_select_backend_with_cuda_and_vllm_injected() -> None:
    from interpoint import select_backend

    on_gpu = select_backend("Qwen/Qwen3-8B", vllm_available=True, cuda=True)
    assert (on_gpu.use_vllm, on_gpu.device, on_gpu.dtype) == (True, "cuda", "bfloat16")
    assert on_gpu.reason == "CUDA and vLLM are available and vLLM supports Qwen3ForCausalLM."
    eager_only = select_backend("Qwen/Qwen3-8B", vllm_available=False, cuda=True)
    assert (eager_only.use_vllm, eager_only.device, eager_only.fell_back) == (False, "cuda", True)
    forced = select_backend(
        "google/gemma-2-2b-it", requested_device="cpu", requested_dtype="bf16",
        force_backend="eager",
    )  # fmt: skip
    assert (forced.name, forced.device, forced.dtype) == ("eager", "cpu", "bfloat16")
    assert select_backend("google/gemma-2-2b-it", cuda=False).dtype == "float32"
    with pytest.raises(InvalidArgument, match="requested_dtype='int3'"):
        select_backend("Qwen/Qwen3-8B", requested_dtype="int3")


# --- backend keywords -----------------------------------------------------------------------------
def test_backend_keywords_reach_the_engine() -> None:
    served = _vllm(
        "meta-llama/Llama-3.1-8B",
        backend="vllm",
        gpu_memory_utilization=0.85,
        max_model_len=4096,
        extra_vllm_kwargs={"enable_prefix_caching": False},
    )
    if served is not None:
        engine = served._settings.engine_kwargs()
        assert engine["gpu_memory_utilization"] == 0.85
        assert engine["max_model_len"] == 4096
        assert engine["enable_prefix_caching"] is False


def test_num_gpus_becomes_tensor_parallel_size() -> None:
    tp = _vllm("Qwen/Qwen3-32B", backend="vllm", num_gpus=4)
    if tp is not None:
        assert tp._settings.engine_kwargs()["tensor_parallel_size"] == 4
        assert (tp.n_layers, tp.d_model) == (64, 5120)


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("requires_grad", True), ("attn_implementation", "eager"), ("trust_remote_code", True)],
)
@pytest.mark.parametrize("backend", ["vllm", "vllm-static", "vllm-generate"])
def test_eager_keywords_on_vllm_name_eager(backend: str, keyword: str, value: Any) -> None:
    from interpoint import load_model

    with pytest.raises(CapabilityUnsupported) as caught:
        load_model("Qwen/Qwen3-8B", backend=backend, **{keyword: value})
    text = str(caught.value)
    assert f"{keyword}= is not a keyword of backend={backend!r}" in text
    assert "use backend='eager'" in text.lower()
    # The anchor raises its gradients error here; ours subclasses CapabilityUnsupported.
    assert isinstance(caught.value, GradientsUnsupported) == (keyword == "requires_grad")


@pytest.mark.parametrize(
    ("keyword", "value", "taker"),
    [
        ("static_points", "auto", "backend='vllm-static'"),
        ("kv_cache_dtype", "fp8", "one of backend='vllm', 'vllm-static', 'vllm-generate'"),
        ("gpu_memory_utilization", 0.9, "one of backend='vllm', 'vllm-static', 'vllm-generate'"),
        ("extra_vllm_kwargs", {}, "one of backend='vllm', 'vllm-static', 'vllm-generate'"),
        ("max_model_len", 4096, "one of backend='vllm', 'vllm-static', 'vllm-generate'"),
    ],
)
def test_vllm_keywords_on_eager_name_the_vllm_backends(
    keyword: str, value: Any, taker: str
) -> None:
    from interpoint import load_model

    with pytest.raises(CapabilityUnsupported) as caught:
        load_model("Qwen/Qwen3-8B", backend="eager", **{keyword: value})
    text = str(caught.value)
    assert f"{keyword}= is not a keyword of backend='eager'" in text
    assert f"Use {taker}" in text


def test_static_points_on_hooked_vllm_names_vllm_static() -> None:
    from interpoint import load_model

    with pytest.raises(CapabilityUnsupported, match="Use backend='vllm-static'"):
        load_model("Qwen/Qwen3-8B", backend="vllm", static_points="auto")


def test_a_misplaced_keyword_under_auto_is_refused_for_the_backend_auto_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interpoint import load_model

    monkeypatch.setattr(backends, "cuda_available", lambda: False)
    # No GPU: auto chooses eager, which does not take gpu_memory_utilization.
    with pytest.raises(CapabilityUnsupported, match="is not a keyword of backend='eager'"):
        load_model("Qwen/Qwen3-8B", gpu_memory_utilization=0.5)


def test_unknown_keywords_are_refused_at_load_model_naming_the_dict_option() -> None:
    from interpoint import load_model

    with pytest.raises(InvalidArgument) as caught:
        load_model("Qwen/Qwen3-8B", backend="eager", low_cpu_mem_usage=True)
    text = str(caught.value)
    assert "low_cpu_mem_usage= is not a keyword of backend='eager'" in text
    assert "from_pretrained_kwargs={...}" in text
    with pytest.raises(InvalidArgument) as caught:
        load_model("Qwen/Qwen3-8B", backend="vllm", enable_prefix_caching=False)
    assert "extra_vllm_kwargs={...}" in str(caught.value)
    with pytest.raises(InvalidArgument, match="Did you mean requires_grad="):
        load_model("Qwen/Qwen3-8B", backend="eager", require_grad=True)
    with pytest.raises(InvalidArgument, match="mode= is not a keyword of backend='vllm'"):
        load_model("Qwen/Qwen3-8B", backend="vllm", mode="static")


def test_from_pretrained_kwargs_carry_what_the_backend_does_not_set() -> None:
    from interpoint import load_model

    model = load_model(
        "Qwen/Qwen3-8B", backend="eager", from_pretrained_kwargs={"low_cpu_mem_usage": True}
    )
    assert model._model_kwargs == {"low_cpu_mem_usage": True}
    with pytest.raises(CapabilityUnsupported, match="pass dtype="):
        load_model("Qwen/Qwen3-8B", backend="eager", from_pretrained_kwargs={"torch_dtype": "x"})


# --- lifecycle ------------------------------------------------------------------------------------
def test_lifecycle_on_a_tiny_model() -> None:
    # The snippet, with a tiny local llama in place of Qwen/Qwen3-8B (no weights here); on this
    # machine without a GPU, auto chooses eager. Construction is lazy: warmup is the load.
    from interp_testmodels.families import build_family
    from interpoint import load_model

    path = str(build_family("llama"))
    seen: dict[str, Any] = {}

    async def main() -> None:
        model = load_model(path, backend="eager")
        assert model._hf_model is None  # nothing loaded yet
        await model.warmup()
        assert model._hf_model is not None
        seen["shape"] = (model.n_layers, model.d_model)
        await model.shutdown()

    asyncio.run(main())
    config = backends.local_config(path)
    assert config is not None
    assert seen["shape"] == (config["num_hidden_layers"], config["hidden_size"])
