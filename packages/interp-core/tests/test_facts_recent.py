"""Do the facts of the families added since the first 32 read their configs' own spellings?

Each test states a config the way the family's published files (or its transformers config
class) spell it and checks the facts against what the modelling code builds: EXAONE-4's lettered
window pattern, the hybrid trunks' attention indices (Bamba, Jamba, LFM2), LFM2's derived MLP
width and the registry's reason for Hunyuan's post-rotary QK-norm. ERNIE-4.5's sparse-layer range
and Hunyuan-MoE's shared MLP are rows of data/moe_layouts.json (test_facts.py).
"""

from __future__ import annotations

from _small_configs import small_decoder

from interp_core.facts import ModelFacts
from interp_core.points import absence_reason


def test_exaone4_spells_its_window_pattern_in_letters() -> None:
    facts = ModelFacts.from_config(
        small_decoder(
            "exaone4", num_hidden_layers=8, sliding_window=4096, sliding_window_pattern="LLLG"
        )
    )
    assert facts.layer_kinds == ("sliding", "sliding", "sliding", "full") * 2
    assert facts.sliding_window == 4096
    assert facts.sandwich_norms and facts.post_norms_only and facts.qk_norm


def test_bamba_attends_at_its_listed_layers_and_runs_mamba_elsewhere() -> None:
    facts = ModelFacts.from_config(small_decoder("bamba", attn_layer_indices=[1, 3]))
    assert facts.layer_kinds == ("mamba", "full", "mamba", "full")
    assert [facts.attends(i) for i in range(4)] == [False, True, False, True]


def test_jamba_attends_every_period_from_its_offset() -> None:
    facts = ModelFacts.from_config(
        small_decoder(
            "jamba",
            num_hidden_layers=8,
            attn_layer_period=4,
            attn_layer_offset=2,
            num_experts=4,
            num_experts_per_tok=2,
            expert_layer_period=2,
            expert_layer_offset=1,
        )
    )
    assert [i for i, kind in enumerate(facts.layer_kinds) if kind == "full"] == [2, 6]
    assert set(facts.layer_kinds) == {"full", "mamba"}
    assert facts.moe is not None and facts.moe.sparse_layers == (1, 3, 5, 7)


def test_lfm2_layer_kinds_and_derived_mlp_width() -> None:
    # LFM2-1.2B's dimensions: 12288 stated, 2/3 of it times 1.0 rounded up to 256 is 8192.
    facts = ModelFacts.from_config(
        small_decoder(
            "lfm2",
            hidden_size=2048,
            num_attention_heads=32,
            num_key_value_heads=8,
            intermediate_size=12288,
            block_auto_adjust_ff_dim=True,
            block_ffn_dim_multiplier=1.0,
            block_multiple_of=256,
            full_attn_idxs=[1, 3],
        )
    )
    assert facts.d_mlp == 8192
    assert facts.layer_kinds == ("conv", "full", "conv", "full")
    assert facts.qk_norm
    # Without the adjustment the stated width is built as is.
    plain = ModelFacts.from_config(small_decoder("lfm2", block_auto_adjust_ff_dim=False))
    assert plain.d_mlp == 128


def test_hunyuan_qk_norm_points_are_refused_because_the_norm_follows_rotary() -> None:
    facts = ModelFacts.from_config(small_decoder("hunyuan_v1_dense"))
    reason = absence_reason("q_norm_in", facts, 0)
    assert reason is not None and "after rotary" in reason
    # A family with no QK-norm at all says so instead.
    plain = absence_reason("q_norm_in", ModelFacts.from_config(small_decoder("llama")), 0)
    assert plain is not None and "has no QK-norm" in plain


def test_glm4_is_a_sandwich_with_pre_norms_and_apertus_an_ungated_mlp() -> None:
    glm4 = ModelFacts.from_config(small_decoder("glm4"))
    assert glm4.sandwich_norms and not glm4.post_norms_only
    apertus = ModelFacts.from_config(small_decoder("apertus"))
    assert not apertus.gated_mlp and apertus.qk_norm
