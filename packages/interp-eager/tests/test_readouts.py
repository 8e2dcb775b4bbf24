"""The protocol's read-out conveniences on eager: attention, residuals, text, decoding, sync."""

from __future__ import annotations

import asyncio

import pytest
import torch
from eager_helpers import model, prompt_ids

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import (
    CapabilityUnsupported,
    GradientsUnsupported,
    HubKernelUnsupported,
    InvalidArgument,
    NestedEventLoop,
)
from interp_eager.loading import check_hub_kernels


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_probs_at_value_is_z(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    layers = [0, m.n_layers - 1]
    read = sync.capture_attention(m, ids, layers)
    cache = m.run_with_cache(
        ids, [Address(n, layer) for layer in layers for n in ("attn_probs", "z")]
    )
    heads, kv_heads, head_dim = m.facts.n_heads, m.facts.n_kv_heads, m.facts.head_dim
    if family == "llama":
        assert kv_heads < heads  # the grouped-query case: one value per kv head
    group = heads // kv_heads
    seq = ids.shape[1]
    for layer in layers:
        scores, probs, value = (read[layer][key] for key in ("scores", "probs", "value"))
        assert set(read[layer]) == {"scores", "probs", "value"}
        assert scores.shape == probs.shape == (heads, seq, seq)  # one prompt: no batch
        assert torch.equal(probs, cache[Address("attn_probs", layer)][0])
        assert value.shape == (seq, kv_heads, head_dim)
        z = cache[Address("z", layer)][0].reshape(seq, heads, head_dim)
        for h in range(heads):  # z[q, h] == probs[h, q, :] @ value[:, h // g]
            assert (probs[h] @ value[:, h // group] - z[:, h]).abs().max().item() <= 1e-6


def test_capture_attention_takes_one_prompt_flat_or_batched_by_one() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    flat = sync.capture_attention(m, ids[0], [0])[0]
    one = sync.capture_attention(m, ids[:1], [0])[0]
    for key in ("scores", "probs", "value"):
        assert torch.equal(flat[key], one[key])
    two = torch.cat([ids, ids])
    with pytest.raises(InvalidArgument, match=r"batch of 2 rows.*once per row"):
        sync.capture_attention(m, two, [0])
    with pytest.raises(InvalidArgument, match=r"capture_residuals reads one prompt"):
        sync.capture_residuals(m, two, [0])


def test_capture_residuals_is_resid_post_per_layer() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    residuals = sync.capture_residuals(m, ids, [1, 0])
    cache = m.run_with_cache(ids, ["resid_post.0", "resid_post.1"])
    assert list(residuals) == [1, 0]
    for layer in (0, 1):
        assert residuals[layer].shape == (ids.shape[1], m.d_model)
        assert torch.equal(residuals[layer], cache[f"resid_post.{layer}"][0])
    assert list(sync.capture_residuals(m, ids)) == list(range(m.n_layers))


def test_generate_text_is_the_generation_text() -> None:
    m = model("llama")
    text = sync.generate_text(m, "The cat sat", max_tokens=5, temperature=0.0)
    generation = sync.generate(m, m.to_tokens("The cat sat"), max_new_tokens=5, temperature=0.0)
    assert len(generation.token_ids) == 5
    assert text == generation.text == m.to_string(list(generation.token_ids))


def test_decode_residuals_normalized_and_raw() -> None:
    m = model("gemma2")  # a final-logit softcap: normalized and raw differ
    ids = prompt_ids(m)
    cache = m.run_with_cache(ids, ["lm_head"])
    last = m.n_layers - 1
    resid = m.run_with_cache(ids, [f"resid_post.{last}"])[f"resid_post.{last}"]
    normalized = sync.decode_residuals(m, resid)
    raw = sync.decode_residuals(m, resid, raw=True)
    cap = m.facts.final_logit_softcap
    assert cap
    torch.testing.assert_close(normalized, torch.tanh(raw / cap) * cap)
    assert not torch.allclose(normalized, raw)
    # lm_head is the logits before the softcap: what raw decoding of the last residual gives.
    torch.testing.assert_close(raw, cache["lm_head"])


def test_sync_model_facade_on_eager() -> None:
    m = model("llama")
    facade = sync.sync_model(m)
    assert sync.sync_model(m) is facade
    ids = prompt_ids(m)
    assert torch.equal(
        facade.capture_residuals(ids, [0])[0],
        m.run_with_cache(ids, ["resid_post.0"])["resid_post.0"][0],
    )

    async def inside() -> None:
        facade.capture_attention(ids, [0])

    with pytest.raises(NestedEventLoop):
        asyncio.run(inside())


def test_detach_false_without_gradients_is_gradients_unsupported() -> None:
    m = model("llama")
    with pytest.raises(GradientsUnsupported, match="requires_grad=True"):
        m.run_with_cache(prompt_ids(m), ["resid_post.0"], detach=False)
    assert issubclass(GradientsUnsupported, CapabilityUnsupported)


def test_gated_attention_is_refused_not_handed_a_wrong_value() -> None:
    m = model("qwen3_next")  # an output gate multiplies z after the mixing
    layer = next(layer for layer in range(m.n_layers) if m.facts.attends(layer))
    with pytest.raises(CapabilityUnsupported, match=r"probs @ value differs from z"):
        sync.capture_attention(m, prompt_ids(m), [layer])


# --- DeepSeek-V4's DeepGEMM hub kernel off Hopper -----------------------------------------------
_DSV4 = {"model_type": "deepseek_v4", "quantization_config": {"quant_method": "fp8"}}
_FLAGS = {"TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR": "1"}


def test_deepgemm_off_hopper_is_hub_kernel_unsupported_naming_both_flags() -> None:
    with pytest.raises(HubKernelUnsupported) as caught:
        check_hub_kernels(_DSV4, {}, capability=(10, 0), kernels_version="0.16.1", environ={})
    text = str(caught.value)
    assert "TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR=1" in text
    assert "experts_implementation='grouped_mm'" in text
    assert "compute capability 10.0" in text and "kernels 0.16.1" in text
    assert issubclass(HubKernelUnsupported, CapabilityUnsupported)
    # One flag alone is not enough, and the message names the one still missing.
    with pytest.raises(HubKernelUnsupported, match=r"missing: experts_implementation"):
        check_hub_kernels(_DSV4, {}, capability=(8, 0), kernels_version="0.16.2", environ=_FLAGS)


@pytest.mark.parametrize(
    ("config", "kwargs", "capability", "version", "environ"),
    [
        (_DSV4, {"experts_implementation": "grouped_mm"}, (10, 0), "0.16.1", _FLAGS),  # both set
        (_DSV4, {}, (9, 0), "0.16.1", {}),  # Hopper: the kernel's own target
        (_DSV4, {}, None, "0.16.1", {}),  # off CUDA
        (_DSV4, {}, (10, 0), "0.16.0", {}),  # older kernels fall back to Triton
        (_DSV4, {}, (10, 0), None, {}),  # kernels not installed
        ({"model_type": "deepseek_v4"}, {}, (10, 0), "0.16.1", {}),  # not an FP8 checkpoint
        ({**_DSV4, "model_type": "deepseek_v3"}, {}, (10, 0), "0.16.1", {}),
    ],
)
def test_deepgemm_check_lets_safe_loads_through(
    config: dict,
    kwargs: dict,
    capability: tuple[int, int] | None,
    version: str | None,
    environ: dict,
) -> None:
    check_hub_kernels(
        config, kwargs, capability=capability, kernels_version=version, environ=environ
    )
