"""SAEs on a running model (the eager backend, through the registry): feature activations from
the forward equal `encode` of the captured activations, steering by a feature equals adding the
decoder row by hand, and clamping equals its formula by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from interp_sae import SAE, features_sync, load_sae
from sae_files import write_saelens

from interp_core import load_model, sync
from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_core.steering import SteeringSpec, apply_reference_rows
from interp_testmodels import TEST_PROMPT, build_family
from interp_torch.steering import steering_delta, steering_encoder, steering_vector

LAYER, D_SAE = 1, 96


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model(str(build_family("llama")), backend="eager")


@pytest.fixture(scope="module")
def tokens(model: Any) -> torch.Tensor:
    return model.to_tokens([TEST_PROMPT, TEST_PROMPT.upper()])


def _sae(
    root: Path, model: Any, arch: str, hook: str, seed: int, **options: Any
) -> tuple[SAE, dict]:
    folder = root / f"{arch}-{seed}"
    weights = write_saelens(
        folder, arch, d_in=model.d_model, d_sae=D_SAE, hook_name=hook, seed=seed, **options
    )
    return load_sae(folder), weights


@pytest.fixture(scope="module")
def saes(tmp_path_factory: pytest.TempPathFactory, model: Any) -> dict[str, tuple[SAE, dict]]:
    root = tmp_path_factory.mktemp("saes")
    resid = f"blocks.{LAYER}.hook_resid_post"
    return {
        "relu": _sae(root, model, "standard", resid, 1),
        "jumprelu": _sae(root, model, "jumprelu", resid, 2),
        "topk": _sae(root, model, "topk", f"blocks.{LAYER}.hook_mlp_out", 3, k=8),
        "gated": _sae(root, model, "gated", "blocks.0.hook_resid_pre", 4),
    }


def _max(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max())


def test_feature_activations_equal_encode_of_the_captured_activations(
    model: Any, tokens: torch.Tensor, saes: dict
) -> None:
    loaded = [sae for sae, _ in saes.values()]
    dense = features_sync(model, tokens, loaded)
    top = features_sync(model, tokens, loaded, top_k=5)
    cache = sync.capture(model, tokens, [sae.address for sae in loaded])
    for sae, d, t in zip(loaded, dense, top, strict=True):
        expected = sae.encode(cache[sae.address])
        assert d.dense is not None and d.dense.shape == (*tokens.shape, D_SAE)
        assert _max(d.dense, expected) <= 1e-5
        assert int((expected > 0).sum()) > tokens.numel()  # features fire on the real model
        assert t.top is not None
        assert torch.equal(t.top.indices, expected.topk(5, dim=-1).indices)
        assert _max(t.top.values, expected.topk(5, dim=-1).values) <= 1e-5


def test_the_features_call_checks_memory_first(
    model: Any, tokens: torch.Tensor, saes: dict
) -> None:
    sae = saes["relu"][0]
    with pytest.raises(CapabilityUnsupported, match=r"needs .* on cpu"):
        features_sync(model, tokens, sae, memory_budget_bytes=1024)


def test_steering_by_a_feature_adds_the_decoder_row(
    model: Any, tokens: torch.Tensor, saes: dict
) -> None:
    sae, weights = saes["relu"]
    feature, strength = 17, 3.5
    spec = sae.steering(feature, strength)
    assert spec.address == Address("resid_post", LAYER) and spec.op == "add"
    plain = sync.capture(model, tokens, [spec.address])[spec.address]
    steered = sync.capture(model, tokens, [spec.address], steering=spec)[spec.address]
    by_hand = plain + strength * weights["W_dec"][feature]
    assert _max(steered, by_hand) <= 1e-5
    # Downstream the model sees the same thing as a hand-built add of that row.
    hand = SteeringSpec(spec.address, weights["W_dec"][feature].tolist(), "add", strength)
    assert (
        _max(
            model.forward_logits(tokens, steering=spec), model.forward_logits(tokens, steering=hand)
        )
        <= 1e-5
    )


@pytest.mark.parametrize("kind", ["relu", "jumprelu"])
def test_clamping_a_feature_equals_the_formula_by_hand(
    model: Any, tokens: torch.Tensor, saes: dict, kind: str
) -> None:
    sae, w = saes[kind]
    address = sae.address
    plain = sync.capture(model, tokens, [address])[address]
    f = sae.encode(plain)
    feature = int((f > 0).float().sum(dim=(0, 1)).argmax())  # one that fires somewhere
    value = 2.0
    steered = sync.capture(model, tokens, [address], steering=sae.clamp(feature, value))[address]
    # By hand: the feature's current value, then h + (value − f)·W_dec[feature].
    pre = (plain - w["b_dec"]) @ w["W_enc"][:, feature] + w["b_enc"][feature]
    current = torch.relu(pre)
    if kind == "jumprelu":
        current = current * (pre > w["threshold"][feature])
    by_hand = plain + (value - current).unsqueeze(-1) * w["W_dec"][feature]
    assert _max(steered, by_hand) <= 1e-5
    assert bool((current > 0).any()) and bool((current == 0).any())  # both branches met
    # The SAE's reconstruction with the feature set to value, plus the error term it left.
    swapped = f.clone()
    swapped[..., feature] = value
    assert _max(steered, sae.decode(swapped) + (plain - sae.decode(f))) <= 1e-4


def test_clamp_arithmetic_equals_the_core_reference(saes: dict) -> None:
    sae = saes["jumprelu"][0]
    rows = torch.randn(6, sae.d_in, generator=torch.Generator().manual_seed(3)) * 2
    spec = sae.clamp(5, -1.5)
    delta = steering_delta(
        rows,
        steering_vector(spec),
        "clamp",
        scale=spec.scale,
        encoder=steering_encoder(spec),
        bias=spec.bias,
        threshold=spec.threshold,
    )
    reference = torch.tensor(apply_reference_rows(spec, rows.tolist()), dtype=torch.float64)
    assert _max(rows + delta, reference) <= 1e-5


@pytest.mark.parametrize("kind", ["topk", "gated"])
def test_clamp_is_refused_where_one_encoder_row_cannot_read_the_feature(
    saes: dict, kind: str
) -> None:
    with pytest.raises(CapabilityUnsupported, match="steer by the feature instead"):
        saes[kind][0].clamp(0, 1.0)
