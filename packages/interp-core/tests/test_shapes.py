"""Point shapes: concrete numbers per architecture, refusals where a point is absent."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from _point_models import ALL_MODELS, GPT2, HYBRID, HYPER, LLAMA, MLA, MOE_PREFIX, QWEN3

from interp_core.errors import AddressError, PointUnsupported, UnknownPoint
from interp_core.facts import ModelFacts
from interp_core.points import POINTS, Width, point_names
from interp_core.shapes import point_shape, point_width

B, S = 2, 7


@dataclass(frozen=True)
class FakeAddress:
    """Stands in for interp_core.address.Address: shapes only relies on the attributes."""

    name: str
    layer: int | None = None
    stream: int | None = None


@pytest.mark.parametrize(
    ("name", "layer", "shape"),
    [
        ("embeddings", None, (B, S, 64)),
        ("resid_pre", 0, (B, S, 64)),
        ("attn_in", 1, (B, S, 64)),
        ("value", 1, (B, S, 32)),  # 2 kv heads * 16
        ("attn_scores", 2, (B, 4, S, S)),
        ("attn_probs", 3, (B, 4, S, S)),
        ("z", 0, (B, S, 64)),  # 4 heads * 16
        ("attn_out", 0, (B, S, 64)),
        ("attn_out_post", 0, (B, S, 64)),
        ("resid_mid", 0, (B, S, 64)),
        ("mlp_in", 0, (B, S, 64)),
        ("mlp_pre", 0, (B, S, 172)),
        ("mlp_pre_linear", 0, (B, S, 172)),
        ("mlp_act", 3, (B, S, 172)),
        ("mlp_out", 3, (B, S, 64)),
        ("mlp_out_post", 3, (B, S, 64)),
        ("resid_post", 3, (B, S, 64)),
        ("final_norm", None, (B, S, 64)),
        ("lm_head", None, (B, S, 1000)),
    ],
)
def test_llama_shapes(name: str, layer: int | None, shape: tuple[int, ...]) -> None:
    assert point_shape(name, LLAMA, B, S, layer) == shape


@pytest.mark.parametrize(
    ("facts", "name", "layer", "shape"),
    [
        # Qwen3's head_dim 32 with 4 query heads and 2 kv heads: 128 and 64, while d_model is 64.
        (QWEN3, "q_norm_in", 0, (B, S, 128)),
        (QWEN3, "q_norm_out", 2, (B, S, 128)),
        (QWEN3, "k_norm_in", 1, (B, S, 64)),
        (QWEN3, "k_norm_out", 1, (B, S, 64)),
        (QWEN3, "z", 1, (B, S, 128)),
        (QWEN3, "resid_post", 1, (B, S, 64)),
        # MoE shapes follow the layer kind: layer 0 is the dense prefix.
        (MOE_PREFIX, "router_logits", 1, (B, S, 8)),
        (MOE_PREFIX, "expert_weights", 2, (B, S, 2)),
        (MOE_PREFIX, "expert_indices", 3, (B, S, 2)),
        (MOE_PREFIX, "mlp_act", 0, (B, S, 200)),
        (MOE_PREFIX, "mlp_out", 2, (B, S, 64)),
    ],
)
def test_per_head_and_expert_shapes(
    facts: ModelFacts, name: str, layer: int, shape: tuple[int, ...]
) -> None:
    assert point_shape(name, facts, B, S, layer) == shape


def test_qwen3_query_width_differs_from_d_model() -> None:
    assert point_width("q_norm_in", QWEN3) == 128


def test_moe_points_are_refused_on_the_other_layer_kind() -> None:
    with pytest.raises(PointUnsupported, match="mixture-of-experts"):
        point_shape("mlp_act", MOE_PREFIX, B, S, 1)
    with pytest.raises(PointUnsupported, match="dense MLP"):
        point_shape("router_logits", MOE_PREFIX, B, S, 0)
    with pytest.raises(PointUnsupported, match="no mixture-of-experts"):
        point_shape("router_logits", LLAMA, B, S, 0)


def test_mla_z_uses_the_value_head_width() -> None:
    assert point_shape("z", MLA, B, S, 0) == (B, S, 48)  # 4 heads * v_head_dim 12
    assert point_shape("attn_scores", MLA, B, S, 0) == (B, 4, S, S)
    with pytest.raises(PointUnsupported, match="latent"):
        point_shape("value", MLA, B, S, 0)


def test_plain_mlp_has_no_linear_branch_shape() -> None:
    assert point_shape("mlp_pre", GPT2, B, S, 0) == (B, S, 192)
    assert point_shape("attn_scores", GPT2, B, S, 1) == (B, 3, S, S)
    with pytest.raises(PointUnsupported, match="non-gated"):
        point_shape("mlp_pre_linear", GPT2, B, S, 0)


def test_hybrid_attention_shapes_only_on_softmax_layers() -> None:
    assert point_shape("attn_probs", HYBRID, B, S, 3) == (B, 4, S, S)
    assert point_shape("attn_gate", HYBRID, B, S, 3) == (B, S, 128)
    assert point_shape("attn_in", HYBRID, B, S, 0) == (B, S, 64)
    for name in ("attn_probs", "attn_scores", "z", "attn_gate", "value"):
        with pytest.raises(PointUnsupported, match="linear_attention"):
            point_shape(name, HYBRID, B, S, 0)


def test_hyper_connection_shapes() -> None:
    assert point_shape("resid_streams", HYPER, B, S, 0) == (B, S, 4, 64)
    assert point_shape("attn_stream_collapse", HYPER, B, S, 1) == (B, S, 64)
    assert point_shape("mlp_stream_collapse", HYPER, B, S, 1) == (B, S, 64)
    assert point_shape("attn_stream_write", HYPER, B, S, 2) == (B, S, 4)
    assert point_shape("mlp_stream_write", HYPER, B, S, 2) == (B, S, 4)
    assert point_shape("attn_stream_mix", HYPER, B, S, 2) == (B, S, 4, 4)
    assert point_shape("mlp_stream_mix", HYPER, B, S, 0) == (B, S, 4, 4)
    # One stream of the stack is an ordinary residual vector; the bare point is refused.
    assert point_shape(FakeAddress("resid_post", 1, 2), HYPER, B, S) == (B, S, 64)
    assert point_shape(FakeAddress("resid_mid", 1, 0), HYPER, B, S) == (B, S, 64)
    with pytest.raises(PointUnsupported, match="stream"):
        point_shape("resid_post", HYPER, B, S, 1)
    with pytest.raises(PointUnsupported, match="single residual stream"):
        point_shape("resid_streams", LLAMA, B, S, 1)
    assert point_width("resid_streams", HYPER) == 256
    assert point_width("attn_stream_mix", HYPER) == 16
    assert point_width("mlp_stream_write", HYPER) == 4


def test_address_like_objects() -> None:
    assert point_shape(FakeAddress("value", 2), QWEN3, 3, 5) == (3, 5, 64)
    assert point_shape(FakeAddress("lm_head"), LLAMA, 1, 1) == (1, 1, 1000)
    # The layer may come from either place, but not two different ones.
    assert point_shape(FakeAddress("value", 2), QWEN3, 3, 5, layer=2) == (3, 5, 64)
    with pytest.raises(AddressError, match="twice"):
        point_shape(FakeAddress("value", 2), QWEN3, 3, 5, layer=1)
    with pytest.raises(PointUnsupported, match="module"):
        point_shape(FakeAddress("path.model.layers.0.mlp"), LLAMA, B, S)
    with pytest.raises(AddressError):
        point_shape(42, LLAMA, B, S)  # type: ignore[arg-type]
    with pytest.raises(UnknownPoint, match="resid_post"):
        point_shape("resid_pst", LLAMA, B, S, 0)


def test_real_address_objects_when_available() -> None:
    address = pytest.importorskip("interp_core.address")
    assert point_shape(address.Address("z", 1), MLA, B, S) == (B, S, 48)
    assert point_shape(address.Address("resid_post", 0, 3), HYPER, B, S) == (B, S, 64)


def test_refusals_for_bad_coordinates_and_sizes() -> None:
    with pytest.raises(PointUnsupported, match="does not exist"):
        point_shape("resid_post", LLAMA, B, S, 4)
    with pytest.raises(PointUnsupported, match="trunk point"):
        point_shape("embeddings", LLAMA, B, S, 0)
    for batch, seq in ((0, 5), (2, 0), (-1, 3), (True, 3), (2.0, 3)):
        with pytest.raises(ValueError, match="positive int"):
            point_shape("resid_post", LLAMA, batch, seq, 0)  # type: ignore[arg-type]


def test_point_width_for_attention_needs_the_key_length() -> None:
    with pytest.raises(ValueError, match="seq="):
        point_width("attn_probs", LLAMA, 0)
    assert point_width("attn_probs", LLAMA, 0, seq=9) == 4 * 9
    assert point_width("lm_head", LLAMA) == 1000
    assert point_width("resid_post", LLAMA, 2) == 64
    assert point_width("mlp_act", MOE_PREFIX, 0) == 200
    assert point_width("router_logits", MOE_PREFIX) == 8
    with pytest.raises(PointUnsupported):
        point_width("mlp_act", MOE_PREFIX, 2)


def test_every_present_point_has_a_consistent_shape_on_every_model() -> None:
    """Shape and width agree everywhere a point exists, and absent points never get a shape."""
    for facts in ALL_MODELS.values():
        for name in point_names():
            spec = POINTS[name]
            stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
            layers = range(facts.n_layers) if spec.is_layer_point else [None]
            for layer in layers:
                address = FakeAddress(name, layer, stream)
                if not spec.is_present(facts, layer, stream):
                    with pytest.raises(PointUnsupported):
                        point_shape(address, facts, B, S)
                    continue
                shape = point_shape(address, facts, B, S)
                assert shape[0] == B and all(d > 0 for d in shape), (name, shape)
                if spec.width is Width.SCORES:
                    assert shape == (B, facts.n_heads, S, S)
                    assert point_width(address, facts, seq=S) == facts.n_heads * S
                else:
                    assert shape[1] == S, (name, shape)
                    assert math.prod(shape[2:]) == point_width(address, facts), (name, shape)
