"""Do Gemma-3n's facts, and the registry's answers on it, follow what its text model builds?

The config is shaped like Gemma-3n E2B's nested `text_config` (30 layers, 4 sliding to 1 full,
the last 10 sharing K/V, activation sparsity on the first 10), wrapped the way the multimodal
checkpoint is. Each refusal must name why and what to read instead; each served point must stay
served.
"""

from __future__ import annotations

from typing import Any

import pytest

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason
from interp_core.testing.published_shapes import GEMMA3N_KINDS, gemma3n_text


def _gemma3n(**overrides: Any) -> dict[str, Any]:
    text = gemma3n_text(
        activation_sparsity_pattern=[0.95] * 10 + [0.0] * 20,
        altup_num_inputs=4,
        laurel_rank=64,
        hidden_size_per_layer_input=256,
    )
    text.update(overrides)
    return {
        "model_type": "gemma3n",
        "architectures": ["Gemma3nForConditionalGeneration"],
        "text_config": text,
    }


def test_gemma3n_reads_altup_kv_sharing_and_sparsity() -> None:
    facts = ModelFacts.from_config(_gemma3n())
    assert facts.model_type == "gemma3n_text"
    assert (facts.n_streams, facts.altup_active_stream, facts.laurel_rank) == (4, 0, 64)
    assert facts.d_mlp == 8192
    assert facts.qk_norm and facts.sandwich_norms
    assert facts.final_logit_softcap == 30.0  # the class default, unstated
    assert facts.embedding_multiplier == pytest.approx(2048**0.5)
    # Layers 20-29 reuse the last earlier layer of their own kind: sliding 18, full 19.
    sources = tuple(facts.kv_source(layer) for layer in range(30))
    assert sources[:20] == tuple(range(20))
    assert sources[20:] == tuple(19 if k == "full_attention" else 18 for k in GEMMA3N_KINDS[20:])
    assert [facts.shares_kv(layer) for layer in range(30)] == [False] * 20 + [True] * 10
    assert facts.activation_sparsity == (0.95,) * 10 + (0.0,) * 20


def test_gemma3n_defaults_follow_the_config_class() -> None:
    config = _gemma3n()
    for key in ("activation_sparsity_pattern", "altup_num_inputs", "laurel_rank"):
        del config["text_config"][key]
    facts = ModelFacts.from_config(config)
    assert (facts.n_streams, facts.laurel_rank) == (4, 64)
    # More than 10 layers: the class sparsifies the first 10 at 0.95.
    assert facts.activation_sparsity == (0.95,) * 10 + (0.0,) * 20


def test_gemma3n_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ConfigError, match="per-layer MLP widths"):
        ModelFacts.from_config(_gemma3n(intermediate_size=[8192] * 29 + [4096]))
    with pytest.raises(ConfigError, match="no earlier layer is a full layer"):
        kinds = ["sliding_attention"] * 29 + ["full_attention"]
        ModelFacts.from_config(_gemma3n(layer_types=kinds))
    with pytest.raises(ConfigError, match="altup_active_idx"):
        ModelFacts.from_config(_gemma3n(altup_active_idx=4))


def test_gemma3n_serves_the_points_whose_meaning_holds() -> None:
    facts = ModelFacts.from_config(_gemma3n())
    for name in ("attn_in", "q_norm_in", "q_norm_out", "attn_scores", "attn_probs", "z"):
        for layer in (0, 25):  # a layer with its own K/V and one that shares
            assert absence_reason(name, facts, layer) is None, (name, layer)
    for name in ("attn_out", "mlp_in", "mlp_pre_linear", "mlp_act", "mlp_out", "resid_streams"):
        assert absence_reason(name, facts, 0) is None, name
    assert absence_reason("mlp_pre", facts, 10) is None
    for name in ("resid_pre", "resid_post"):
        assert absence_reason(name, facts, 3, 2) is None
        assert "AltUp" in (absence_reason(name, facts, 3) or "")


def test_gemma3n_refusals_say_why_and_what_instead() -> None:
    facts = ModelFacts.from_config(_gemma3n())
    shared = absence_reason("k_norm_out", facts, 25) or ""
    assert "reads those layer 18 computed" in shared and "read k_norm_out at layer 18" in shared
    assert absence_reason("k_norm_out", facts, 18) is None
    # value is v_norm's output (what attention mixes), on the layers that compute their own
    assert absence_reason("value", facts, 0) is None
    assert "read value at layer 18" in (absence_reason("value", facts, 25) or "")
    sparse = absence_reason("mlp_pre", facts, 3) or ""
    assert "gaussian top-k at 0.95" in sparse and "mlp_pre exists at layers: 10-29" in sparse
    for name in ("resid_mid", "attn_out_post", "mlp_out_post"):
        why = absence_reason(name, facts, 0) or ""
        assert "AltUp trunk" in why and "read " in why, name
    # resid_mid is refused for the same reason with a stream, not sent to look for one.
    assert absence_reason("resid_mid", facts, 0, 1) == absence_reason("resid_mid", facts, 0)
    collapse = absence_reason("attn_stream_collapse", facts, 0) or ""
    assert "not hyper-connections" in collapse
