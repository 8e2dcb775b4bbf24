"""Do DeepSeek-V4's compressed layer kinds (CSA, HCA) read from every spelling of its config?

The published checkpoints list one compression ratio per layer (`compress_ratios`, with the
multi-token-prediction layers' entries after the trunk's); transformers 5 writes `layer_types`
and `compress_rates`; a config with neither gets the config class's default pattern. Each form
must give one kind per layer and the rates, and the registry must refuse the token-by-token
attention matrices on the compressed layers while serving z and attn_out there.
"""

from __future__ import annotations

import pytest

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason
from interp_core.testing.published_shapes import deepseek_v4

CSA, HCA = "compressed_sparse", "heavily_compressed"


def test_published_compress_ratios_name_each_layer() -> None:
    # Six entries for five layers: the last is the multi-token-prediction layer's.
    facts = ModelFacts.from_config(deepseek_v4(compress_ratios=[0, 4, 128, 4, 128, 0]))
    assert facts.layer_kinds == ("sliding", CSA, HCA, CSA, HCA)
    assert facts.compress_rates == ((CSA, 4), (HCA, 128))
    assert [facts.compress_rate(layer) for layer in range(5)] == [None, 4, 128, 4, 128]
    assert facts.sliding_window == 128
    assert all(facts.attends(layer) for layer in range(5))
    assert [facts.attends_tokens_only(layer) for layer in range(5)] == [True] + [False] * 4


def test_layer_types_and_compress_rates_as_transformers_writes_them() -> None:
    config = deepseek_v4(
        num_hidden_layers=3,
        layer_types=[
            "sliding_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
        ],
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
    )
    facts = ModelFacts.from_config(config)
    assert facts.layer_kinds == ("sliding", CSA, HCA)
    assert facts.compress_rates == ((CSA, 2), (HCA, 4))


def test_no_pattern_stated_is_the_config_class_default() -> None:
    # transformers: two HCA layers, then CSA and HCA alternating (CSA on odd layers).
    facts = ModelFacts.from_config(deepseek_v4(num_hidden_layers=6))
    assert facts.layer_kinds == (HCA, HCA, HCA, CSA, HCA, CSA)
    assert facts.compress_rates == ((CSA, 4), (HCA, 128))


def test_sliding_only_configs_have_no_rates() -> None:
    facts = ModelFacts.from_config(deepseek_v4(num_hidden_layers=2, compress_ratios=[0, 0]))
    assert facts.layer_kinds == ("sliding", "sliding")
    assert facts.compress_rates == ()


@pytest.mark.parametrize(
    ("ratios", "needle"),
    [([0, 4, 64, 4, 128], "compress_ratios[2]"), ([0, 4], "one entry per layer")],
)
def test_unknown_or_short_ratio_lists_are_refused(ratios: list[int], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        ModelFacts.from_config(deepseek_v4(compress_ratios=ratios))


def test_a_bad_rate_is_refused() -> None:
    config = deepseek_v4(
        num_hidden_layers=2,
        layer_types=["sliding_attention", "heavily_compressed_attention"],
        compress_rates={"heavily_compressed_attention": 0},
    )
    with pytest.raises(ConfigError, match="heavily_compressed_attention"):
        ModelFacts.from_config(config)


def test_attention_matrices_are_refused_on_compressed_layers_only() -> None:
    facts = ModelFacts.from_config(deepseek_v4(compress_ratios=[0, 4, 128, 4, 128]))
    for name in ("attn_scores", "attn_probs"):
        assert absence_reason(name, facts, 0) is None
        csa = absence_reason(name, facts, 1)
        hca = absence_reason(name, facts, 2)
        assert csa is not None and "compressed sparse attention (CSA)" in csa
        assert "one per 4 tokens" in csa and "lightning indexer" in csa
        assert hca is not None and "heavily compressed attention (HCA)" in hca
        assert "one per 128 tokens" in hca and "indexer" not in hca
        for reason in (csa, hca):
            assert "read z" in reason and f"{name} exists at layers: 0" in reason
    for name in ("z", "attn_out", "attn_in"):
        assert all(absence_reason(name, facts, layer) is None for layer in range(5))
    # Keys and values are one tensor on every layer kind: still no value point.
    assert absence_reason("value", facts, 1) is not None


def test_every_layer_compressed_refuses_the_matrices_everywhere() -> None:
    facts = ModelFacts.from_config(deepseek_v4(num_hidden_layers=2, compress_ratios=[4, 128]))
    reason = absence_reason("attn_probs", facts)
    assert reason is not None and "every attending layer" in reason
    assert absence_reason("z", facts) is None
