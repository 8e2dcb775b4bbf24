"""Do Nemotron-H's facts read its block list, and does the registry answer per sublayer kind?

Each Nemotron-H layer is ONE sublayer (Mamba-2, attention, a dense MLP or a mixture of experts)
behind one norm and one residual add. The configs below are stated the way the published files
spell them (`hybrid_override_pattern` plus `num_hidden_layers`) and the way transformers 5 saves
them (`layers_block_type`, no layer count).
"""

from __future__ import annotations

from typing import Any

import pytest
from _core_data import data_config

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason


def _nemotron_h(**overrides: Any) -> dict[str, Any]:
    # Nemotron-H-8B's shape, shortened to 6 layers: Mamba-2 and MLP layers, one attention layer.
    return data_config("nemotron-h-8b-6-layers", **overrides)


def test_reads_the_pattern_and_the_saved_block_list_alike() -> None:
    published = ModelFacts.from_config(_nemotron_h())
    saved_config = _nemotron_h(
        layers_block_type=[
            "linear_attention",
            "mlp",
            "linear_attention",
            "full_attention",
            "mlp",
            "moe",
        ]
    )
    # transformers 5 saves no layer count and no pattern: the list's length is the count.
    del saved_config["num_hidden_layers"], saved_config["hybrid_override_pattern"]
    saved = ModelFacts.from_config(saved_config)
    assert (
        published.layer_kinds
        == saved.layer_kinds
        == ("mamba", "mlp", "mamba", "full", "mlp", "mlp")
    )
    assert published.n_layers == saved.n_layers == 6
    assert published.single_sublayer
    assert [published.has_mixer(i) for i in range(6)] == [True, False, True, True, False, False]
    assert [published.has_mlp(i) for i in range(6)] == [False, True, False, False, True, True]
    assert published.moe is not None and published.moe.sparse_layers == (5,)
    assert published.moe.d_shared_expert == 3712 and published.moe.d_expert == 1856
    assert published.d_mlp == 21504 and published.has_dense_layers
    assert not published.gated_mlp and not published.tied_embeddings


def test_dense_members_have_no_experts_and_all_moe_members_no_dense_width() -> None:
    # A dense member saved by transformers 5 still carries the class's expert count.
    dense = ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="M-M*--"))
    assert dense.moe is None
    # Nemotron-3-Nano: every MLP layer is a mixture of experts.
    nano = ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="MEM*EE"))
    assert nano.d_mlp == 0 and not nano.has_dense_layers
    assert nano.moe is not None and nano.moe.sparse_layers == (1, 4, 5)
    reason = absence_reason("mlp_pre", nano)
    assert reason is not None and "every MLP layer" in reason


def test_a_wrong_pattern_is_refused() -> None:
    with pytest.raises(ConfigError, match="6 layers"):
        ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="M-M*"))
    with pytest.raises(ConfigError, match="hybrid_override_pattern"):
        ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="M-X*-E"))
    config = _nemotron_h()
    del config["hybrid_override_pattern"]
    with pytest.raises(ConfigError, match="layers_block_type"):
        ModelFacts.from_config(config)


def test_each_layer_has_only_its_own_sublayers_points() -> None:
    facts = ModelFacts.from_config(_nemotron_h())
    # Mamba-2 (0, 2): the mixer's boundary points, no attention pattern, no MLP.
    for point in ("attn_in", "attn_out", "attn_out_post"):
        assert absence_reason(point, facts, 0) is None
    reason = absence_reason("attn_probs", facts, 0)
    assert reason is not None and "mamba layer" in reason and "layers: 3" in reason
    reason = absence_reason("mlp_out", facts, 0)
    assert reason is not None and "no MLP" in reason and "attn_out" in reason
    assert "exists at layers: 1, 4-5" in reason
    # Attention (3): every attention point, no MLP point.
    for point in ("attn_in", "value", "attn_scores", "attn_probs", "z", "attn_out"):
        assert absence_reason(point, facts, 3) is None
    assert absence_reason("mlp_in", facts, 3) is not None
    # Dense MLP (1, 4): the MLP points, no mixer point.
    for point in ("mlp_in", "mlp_pre", "mlp_act", "mlp_out", "mlp_out_post"):
        assert absence_reason(point, facts, 1) is None
    reason = absence_reason("attn_in", facts, 1)
    assert reason is not None and "dense MLP layer" in reason and "no token mixer" in reason
    assert "exists at layers: 0, 2-3" in reason
    reason = absence_reason("value", facts, 4)
    assert reason is not None and "no token mixer" in reason and "exists at layers: 3" in reason
    # Mixture of experts (5): the router's points and the MoE's boundary, no dense neurons.
    for point in ("mlp_in", "router_logits", "expert_weights", "expert_indices", "mlp_out"):
        assert absence_reason(point, facts, 5) is None
    reason = absence_reason("attn_out", facts, 5)
    assert reason is not None and "mixture-of-experts layer" in reason
    assert absence_reason("mlp_pre", facts, 5) is not None
    assert absence_reason("router_logits", facts, 1) is not None
    # No second residual add anywhere: resid_mid is refused, naming what to read instead.
    for layer in (None, 0, 1, 3, 5):
        reason = absence_reason("resid_mid", facts, layer)
        assert reason is not None and "single sublayer" in reason and "resid_post" in reason
    assert absence_reason("mlp_pre_linear", facts) is not None  # squared-ReLU, ungated


def test_a_model_without_a_kind_refuses_its_points_everywhere() -> None:
    # Only mixers (Mamba-2 and attention): no layer has an MLP point.
    facts = ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="MM*MM*"))
    reason = absence_reason("mlp_in", facts)
    assert reason is not None and "no layer" in reason and "has an MLP" in reason
    # Only MLPs: no layer has a mixer point.
    facts = ModelFacts.from_config(_nemotron_h(hybrid_override_pattern="--E--E"))
    reason = absence_reason("attn_in", facts)
    assert reason is not None and "token mixer" in reason
