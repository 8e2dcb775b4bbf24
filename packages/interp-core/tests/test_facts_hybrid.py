"""Do the facts of the hybrid recurrent trunks of issue 19 read their configs' own spellings?

Each test states a config the way the family's published files (or its transformers config
class) spell it and checks the facts, and the registry's per-layer answers, against what the
modelling code builds.
"""

from __future__ import annotations

from typing import Any

import pytest
from _core_data import data_config

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason


def _granite(**overrides: Any) -> dict[str, Any]:
    # Granite-4.0-H-1B's shape, shortened to 4 layers: Mamba-2 layers with one attention layer.
    return data_config("granite-4.0-h-1b-4-layers", **overrides)


def test_granite_hybrid_reads_both_spellings_of_its_layer_kinds() -> None:
    published = ModelFacts.from_config(_granite())
    # transformers 5 saves the Mamba-2 layers as `linear_attention`; they are still Mamba.
    linear, full = "linear_attention", "full_attention"
    saved = ModelFacts.from_config(_granite(layer_types=[linear, linear, full, linear]))
    assert published.layer_kinds == saved.layer_kinds == ("mamba", "mamba", "full", "mamba")
    assert [published.attends(i) for i in range(4)] == [False, False, True, False]
    assert published.residual_multiplier == 0.22
    assert published.embedding_multiplier == 12.0
    assert published.logit_multiplier == pytest.approx(1 / 6)
    assert not published.tied_embeddings  # GraniteMoeHybridConfig's default


def test_granite_hybrid_dense_mlp_is_the_shared_mlp_width() -> None:
    # The dense members build only shared_mlp; intermediate_size is the (absent) experts' width.
    facts = ModelFacts.from_config(_granite(intermediate_size=11008, shared_intermediate_size=256))
    assert facts.moe is None
    assert facts.d_mlp == 256
    with pytest.raises(ConfigError, match="shared_intermediate_size"):
        config = _granite()
        del config["shared_intermediate_size"]
        ModelFacts.from_config(config)


def test_granite_hybrid_mamba_layers_have_mixer_points_only() -> None:
    facts = ModelFacts.from_config(_granite())
    for point in ("attn_scores", "attn_probs", "z", "value"):
        reason = absence_reason(point, facts, 0)
        assert reason is not None and "mamba layer" in reason and "layers: 2" in reason
        assert absence_reason(point, facts, 2) is None
    for point in ("attn_in", "attn_out", "resid_mid", "mlp_act", "mlp_out"):
        assert absence_reason(point, facts, 0) is None


def test_granite_hybrid_moe_members_refuse_the_inline_mlp_sum() -> None:
    # Granite-4.0-H-Tiny's routing: 64 experts of 512, top-6, beside a shared MLP of 1024,
    # summed inside the decoder block, so no module returns mlp_out.
    facts = ModelFacts.from_config(
        _granite(
            num_local_experts=64,
            num_experts_per_tok=6,
            intermediate_size=512,
            shared_intermediate_size=1024,
        )
    )
    assert facts.moe is not None
    assert facts.moe.sparse_layers == (0, 1, 2, 3)
    assert (facts.moe.d_expert, facts.moe.d_shared_expert) == (512, 1024)
    assert facts.d_mlp == 0
    for point in ("mlp_out", "mlp_out_post"):
        reason = absence_reason(point, facts, 1)
        assert reason is not None and "shared_mlp" in reason and "resid_mid" in reason
    for point in ("mlp_in", "router_logits", "expert_indices", "resid_post"):
        assert absence_reason(point, facts, 1) is None


def test_falcon_h1_attends_everywhere_with_a_mamba_mixer_beside_it() -> None:
    facts = ModelFacts.from_config(data_config("falcon-h1-4-layers"))
    assert facts.layer_kinds == ("full",) * 4
    assert facts.ssm_beside_attention and not facts.parallel_attn_mlp
    assert facts.embedding_multiplier == 5.66 and facts.logit_multiplier == 0.039
    assert not facts.tied_embeddings
    reason = absence_reason("attn_out_post", facts, 1)
    assert reason is not None and "ssm_out_multiplier" in reason and "resid_mid" in reason
    for point in ("attn_in", "attn_out", "attn_scores", "resid_mid", "mlp_out_post"):
        assert absence_reason(point, facts, 1) is None


def test_deepseek_v32_attends_to_its_indexers_top_k() -> None:
    config = data_config("deepseek-v3.2-4-layers")
    # The published config leaves index_topk to the class (2048) and states no layer_types.
    facts = ModelFacts.from_config(config)
    assert facts.index_topk == 2048 and facts.layer_kinds == ("full",) * 4
    saved = ModelFacts.from_config(
        {**config, "index_topk": 4, "layer_types": ["indexed_attention"] * 4}
    )
    assert saved.index_topk == 4 and saved.layer_kinds == ("full",) * 4
    assert ModelFacts.from_config({**config, "model_type": "deepseek_v3"}).index_topk is None
    for point in ("attn_scores", "attn_probs", "z"):
        assert absence_reason(point, facts, 0) is None
    assert absence_reason("value", facts, 0) is not None  # MLA: no per-head value projection


def test_kimi_linear_reads_its_published_layer_lists() -> None:
    # linear_attn_config counts its layers from 1, as the published file counts them.
    config = data_config("kimi-linear-8-layers")
    facts = ModelFacts.from_config(config)
    assert facts.layer_kinds == ("linear_attention",) * 3 + ("full",) + (
        "linear_attention",
    ) * 3 + ("full",)
    assert facts.moe is not None and facts.moe.sparse_layers == tuple(range(1, 8))
    assert facts.max_position_embeddings == 1048576
    assert not facts.tied_embeddings
    assert absence_reason("attn_scores", facts, 0) is not None
    assert absence_reason("attn_scores", facts, 3) is None
    with pytest.raises(ConfigError, match="full_attn_layers"):
        ModelFacts.from_config({**config, "linear_attn_config": {"full_attn_layers": [0, 4]}})
