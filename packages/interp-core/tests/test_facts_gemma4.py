"""Do Gemma-4's facts hold its per-layer widths, its KV sharing and its per-layer inputs?

Gemma-4's text model is the first family whose layers differ in head width and K/V head count
(full layers: `global_head_dim`, and `num_global_key_value_heads` where keys double as values),
whose late layers reuse an earlier layer's keys and values (`num_kv_shared_layers`, with MLPs of
twice the width under `use_double_wide_mlp`), and whose routed experts run beside a dense MLP.
The configs below are spelled two ways: as a published wrapper states them (`global_head_dim`
in `text_config`) and as transformers 5.19 saves a text model (`per_layer_config`).
"""

from __future__ import annotations

from typing import Any

import pytest
from _small_configs import small_decoder

from interp_core.errors import ConfigError, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason
from interp_core.shapes import point_shape
from interp_core.testing.published_shapes import gemma4_text


def _text(**overrides: Any) -> dict[str, Any]:
    # Widths shaped like a small member, shortened to 4 layers alternating sliding and full,
    # the last 2 reusing the K/V of the first 2. The keys are the published text_config's.
    shortened: dict[str, Any] = {
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "num_kv_shared_layers": 2,
        "use_double_wide_mlp": True,
        "hidden_size_per_layer_input": 256,
        "final_logit_softcapping": 30.0,
    }
    return gemma4_text(**{**shortened, **overrides})


def _wrapped(**overrides: Any) -> dict[str, Any]:
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": _text(**overrides),
    }


def _saved(**overrides: Any) -> dict[str, Any]:
    # What Gemma4TextConfig.to_dict() writes: the full layers' overrides in per_layer_config.
    config = _text(**overrides)
    del config["global_head_dim"], config["num_global_key_value_heads"]
    config["per_layer_config"] = {
        "1": {"head_dim": 512, "num_key_value_heads": 1},
        "3": {"head_dim": 512, "num_key_value_heads": 1},
    }
    return config


@pytest.mark.parametrize("config", [_wrapped(), _saved()], ids=["published", "saved"])
def test_full_layers_have_their_own_head_width_and_kv_heads(config: dict[str, Any]) -> None:
    facts = ModelFacts.from_config(config)
    assert facts.head_dim == 256 and facts.n_kv_heads == 2  # the config's own: sliding layers'
    assert [facts.head_dim_at(i) for i in range(4)] == [256, 512, 256, 512]
    assert [facts.kv_heads_at(i) for i in range(4)] == [2, 1, 2, 1]
    assert [facts.q_width_at(i) for i in range(4)] == [2048, 4096, 2048, 4096]
    assert [facts.kv_width_at(i) for i in range(4)] == [512, 512, 512, 512]
    assert facts.widths_vary
    # Layers 2 and 3 reuse the last earlier layer of their kind; their MLPs are doubled.
    assert facts.kv_source_layers == (0, 1, 0, 1)
    assert [facts.shares_kv(i) for i in range(4)] == [False, False, True, True]
    assert [facts.d_mlp_at(i) for i in range(4)] == [6144, 6144, 12288, 12288]
    assert facts.per_layer_input_width == 256
    assert facts.qk_norm and facts.sandwich_norms and facts.final_logit_softcap == 30.0
    assert facts.embedding_multiplier == pytest.approx(1536**0.5)
    assert facts.moe is None  # enable_moe_block defaults to off


def test_global_kv_heads_apply_only_where_keys_double_as_values() -> None:
    # Gemma4TextConfig overrides the K/V head count of the full layers only under k_eq_v.
    facts = ModelFacts.from_config(_wrapped(attention_k_eq_v=False))
    assert [facts.kv_heads_at(i) for i in range(4)] == [2, 2, 2, 2]
    assert [facts.head_dim_at(i) for i in range(4)] == [256, 512, 256, 512]


def test_shapes_take_the_layer() -> None:
    facts = ModelFacts.from_config(_saved())
    assert point_shape("z", facts, 1, 5, layer=1) == (1, 5, 4096)
    assert point_shape("q_norm_in", facts, 1, 5, layer=0) == (1, 5, 2048)
    assert point_shape("value", facts, 1, 5, layer=1) == (1, 5, 512)
    assert point_shape("mlp_act", facts, 1, 5, layer=3) == (1, 5, 12288)
    assert point_shape("resid_post", facts, 1, 5) == (1, 5, 1536)  # uniform widths need none
    with pytest.raises(PointUnsupported, match="differ by layer"):
        point_shape("z", facts, 1, 5)


def test_kv_sharing_layers_refuse_keys_and_values_naming_the_source() -> None:
    facts = ModelFacts.from_config(_saved())
    for name in ("k_norm_in", "k_norm_out", "value"):
        assert absence_reason(name, facts, 0) is None
        reason = absence_reason(name, facts, 3)
        assert reason is not None and "layer 1 computed" in reason and "KV sharing" in reason
        assert f"read {name} at layer 1" in reason
    # Queries, scores, probabilities and z are each layer's own.
    for name in ("q_norm_in", "q_norm_out", "attn_scores", "attn_probs", "z"):
        assert absence_reason(name, facts, 3) is None


def test_experts_beside_the_dense_mlp() -> None:
    facts = ModelFacts.from_config(
        _saved(enable_moe_block=True, num_experts=128, top_k_experts=8, moe_intermediate_size=704)
    )
    assert facts.moe is not None and facts.moe.sparse_layers == (0, 1, 2, 3)
    assert (facts.moe.n_experts, facts.moe.experts_per_token, facts.moe.d_expert) == (128, 8, 704)
    assert facts.d_mlp == 6144  # the dense MLP beside the experts keeps its width
    for name in ("mlp_pre", "mlp_pre_linear", "mlp_act", "mlp_out_post", "router_logits"):
        assert absence_reason(name, facts, 0) is None, name
    mlp_out = absence_reason("mlp_out", facts, 0)
    assert mlp_out is not None and "no module returns the MLP's output" in mlp_out
    assert "mlp_out_post" in mlp_out
    mlp_in = absence_reason("mlp_in", facts, 0)
    assert mlp_in is not None and "pre_feedforward_layernorm_2" in mlp_in


def test_without_layer_types_every_sixth_and_the_last_layer_are_global() -> None:
    config = _text(num_hidden_layers=8, num_kv_shared_layers=0)
    del config["layer_types"]
    facts = ModelFacts.from_config(config)
    assert facts.layer_kinds == ("sliding",) * 5 + ("full", "sliding", "full")
    assert [facts.head_dim_at(i) for i in (5, 6, 7)] == [512, 256, 512]


def test_a_stated_last_sliding_layer_is_full_as_the_config_class_makes_it() -> None:
    kinds = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]
    facts = ModelFacts.from_config(_text(layer_types=kinds, num_kv_shared_layers=0))
    assert facts.layer_kinds == ("sliding", "full", "sliding", "full")
    assert facts.head_dim_at(3) == 512


def test_bad_sharing_and_overrides_are_refused() -> None:
    with pytest.raises(ConfigError, match="num_kv_shared_layers"):
        ModelFacts.from_config(_saved(num_kv_shared_layers=4))
    with pytest.raises(ConfigError, match="no earlier layer is a full layer"):
        ModelFacts.from_config(_saved(num_kv_shared_layers=3))
    config = _saved()
    config["per_layer_config"]["1"]["rope_theta"] = 1.0
    with pytest.raises(ConfigError, match="rope_theta"):
        ModelFacts.from_config(config)


def test_uniform_models_keep_their_single_widths() -> None:
    facts = ModelFacts.from_config(small_decoder(num_hidden_layers=2))
    assert (facts.layer_head_dims, facts.layer_kv_heads, facts.layer_d_mlp) == ((), (), ())
    assert facts.kv_source_layers == () and facts.per_layer_input_width == 0
    assert not facts.widths_vary and not facts.shares_kv(1)
    assert point_shape("z", facts, 1, 3) == point_shape("z", facts, 1, 3, layer=1) == (1, 3, 64)


def test_the_points_table_lists_every_width_with_its_layers() -> None:
    from interp_core.cli import point_table

    rows = {row["point"]: row for row in point_table(ModelFacts.from_config(_saved()))}
    assert rows["z"]["width"] == "2048/4096"
    assert rows["z"]["shape"] == "[batch, seq, 2048] at 0, 2 or [batch, seq, 4096] at 1, 3"
    assert rows["value"]["layers"] == [0, 1] and rows["value"]["width"] == 512
    assert rows["resid_post"]["width"] == 1536
