"""Do the facts of the families added in 2026 read their configs' own spellings?

Each config is written the way the family's published files spell it (Llama-4's text_config
without `layer_types`, DBRX's nested `attn_config` / `ffn_config`) and the facts are checked
against what the modelling code builds from it.
"""

from __future__ import annotations

from typing import Any

from _core_data import data_config

from interp_core.facts import ModelFacts
from interp_core.points import absence_reason


def _llama4(**overrides: Any) -> dict[str, Any]:
    # Llama-4-Scout's text_config keys that matter here, at a tenth of the size.
    return data_config("llama-4-scout-tenth", "text_config", **overrides)


def test_llama4_chunks_its_rotary_layers_and_attends_globally_on_nope_layers() -> None:
    # No layer_types and no no_rope_layers: every 4th layer is NoPE (the class's interval).
    facts = ModelFacts.from_config(_llama4())
    assert facts.layer_kinds == ("chunked", "chunked", "chunked", "full") * 2
    assert facts.sliding_window == 8192
    stated = ModelFacts.from_config(_llama4(no_rope_layers=[1, 0, 1, 1, 1, 1, 1, 0]))
    assert [i for i, kind in enumerate(stated.layer_kinds) if kind == "full"] == [1, 7]
    unchunked = ModelFacts.from_config(_llama4(attention_chunk_size=None))
    assert set(unchunked.layer_kinds) == {"full"} and unchunked.sliding_window is None


def test_llama4_moe_layers_shared_expert_and_dense_width() -> None:
    # Every layer routed (Scout): no dense MLP at all, a shared expert of the expert width.
    scout = ModelFacts.from_config(_llama4())
    assert scout.moe is not None
    assert scout.moe.sparse_layers == tuple(range(8))
    assert (scout.moe.n_experts, scout.moe.experts_per_token, scout.moe.d_expert) == (16, 1, 256)
    assert (scout.moe.n_shared_experts, scout.moe.d_shared_expert) == (1, 256)
    assert scout.d_mlp == 0
    # Maverick interleaves: every 2nd layer routed, the dense ones intermediate_size_mlp wide.
    maverick = ModelFacts.from_config(_llama4(interleave_moe_layer_step=2))
    assert maverick.moe is not None and maverick.moe.sparse_layers == (1, 3, 5, 7)
    assert maverick.d_mlp == 1024
    listed = ModelFacts.from_config(_llama4(moe_layers=[3, 0]))
    assert listed.moe is not None and listed.moe.sparse_layers == (0, 3)
    assert not scout.tied_embeddings and scout.architecture == "Llama4ForConditionalGeneration"


def test_llama4_qk_norm_follows_rotary_so_its_points_are_refused() -> None:
    facts = ModelFacts.from_config(_llama4())
    assert not facts.qk_norm
    reason = absence_reason("k_norm_out", facts, 0)
    assert reason is not None and "after rotary" in reason


def _dbrx(**attn: Any) -> dict[str, Any]:
    # DBRX-instruct's config.json layout, at a tiny size.
    return data_config("dbrx-tiny", "attn_config", **attn)


def test_dbrx_reads_its_nested_attention_and_expert_settings() -> None:
    facts = ModelFacts.from_config(_dbrx())
    assert (facts.n_layers, facts.d_model, facts.n_heads, facts.n_kv_heads) == (4, 256, 8, 2)
    assert facts.head_dim == 32 and facts.max_position_embeddings == 32768
    assert facts.moe is not None
    assert (facts.moe.n_experts, facts.moe.experts_per_token, facts.moe.d_expert) == (16, 4, 96)
    assert facts.moe.sparse_layers == (0, 1, 2, 3) and facts.d_mlp == 0
    assert facts.moe.n_shared_experts == 0
    assert facts.qkv_clip == 8.0 and not facts.tied_embeddings
    assert ModelFacts.from_config(_dbrx(clip_qkv=None)).qkv_clip is None


def test_dbrx_clamped_values_are_refused_with_the_reason() -> None:
    reason = absence_reason("value", ModelFacts.from_config(_dbrx()), 1)
    assert reason is not None and "clip_qkv" in reason and "±8" in reason
    assert absence_reason("z", ModelFacts.from_config(_dbrx()), 1) is None
    # Without the clamp the values are the projection's columns again.
    assert absence_reason("value", ModelFacts.from_config(_dbrx(clip_qkv=None)), 1) is None


def test_jetmoe_derives_its_heads_and_refuses_per_head_attention_points() -> None:
    # JetMoE-8B's config.json spelling: no num_attention_heads, the head width as kv_channels.
    config = data_config("jetmoe-8b-tiny")
    facts = ModelFacts.from_config(config)
    assert (facts.n_heads, facts.n_kv_heads, facts.head_dim) == (8, 4, 32)
    assert facts.routed_attention and facts.tied_embeddings
    assert facts.moe is not None and facts.moe.sparse_layers == (0, 1, 2, 3)
    assert (facts.moe.d_expert, facts.d_mlp) == (96, 0)
    for point in ("attn_scores", "attn_probs", "z"):
        reason = absence_reason(point, facts, 0)
        assert reason is not None and "different expert at each token" in reason
    assert absence_reason("value", facts, 0) is None


def _minimax(**overrides: Any) -> dict[str, Any]:
    # The keys MiniMaxConfig reads, spelled as its config.json spells them, at a small size.
    return data_config("minimax-small", **overrides)


def test_minimax_lightning_layers_and_routed_mlps() -> None:
    facts = ModelFacts.from_config(_minimax())
    assert facts.layer_kinds == ("linear_attention",) * 7 + ("full",)
    assert [facts.attends(layer) for layer in range(8)] == [False] * 7 + [True]
    assert (facts.n_heads, facts.n_kv_heads, facts.head_dim) == (8, 2, 32)
    assert facts.moe is not None and facts.moe.sparse_layers == tuple(range(8))
    assert (facts.moe.n_experts, facts.moe.experts_per_token, facts.moe.d_expert) == (8, 2, 96)
    assert facts.d_mlp == 0 and not facts.tied_embeddings and facts.normed_skip
    # Without layer_types, the config class alternates, starting with softmax attention.
    del_types = {k: v for k, v in _minimax().items() if k != "layer_types"}
    assert ModelFacts.from_config(del_types).layer_kinds == ("full", "linear_attention") * 4


def test_minimax_states_the_points_of_a_lightning_layer() -> None:
    facts = ModelFacts.from_config(_minimax())
    # A lightning layer has its mixer's input and output and the MLP's points, no softmax ones.
    for point in ("attn_in", "attn_out", "mlp_in", "mlp_out", "router_logits", "resid_post"):
        assert absence_reason(point, facts, 0) is None, point
    for point in ("value", "attn_scores", "attn_probs", "z"):
        reason = absence_reason(point, facts, 0)
        assert reason is not None and "linear_attention layer" in reason, point
        assert absence_reason(point, facts, 7) is None, point


def test_minimax_refuses_the_additive_residual_points_with_the_reason() -> None:
    facts = ModelFacts.from_config(_minimax())
    for point in ("resid_mid", "attn_out_post", "mlp_out_post"):
        for layer in (0, 7):
            reason = absence_reason(point, facts, layer)
            assert reason is not None and "normed input" in reason, (point, layer)
            assert "replaces the residual" in reason, (point, layer)
    # A family with an ordinary residual keeps them.
    llama = ModelFacts.from_config({**_minimax(), "model_type": "llama", "layer_types": None})
    assert not llama.normed_skip
    assert absence_reason("resid_mid", llama, 0) is None
