"""Does `ModelFacts.from_config` read real configs right, and refuse broken ones clearly?

Every config bundled in `interp_core/model_configs/` is checked against numbers written down by
hand from the model's card and config; a bundled file without a row here fails, so the
catalogue cannot grow unchecked. Synthetic mappings cover the layouts no bundled model has.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from importlib import resources
from typing import Any

import pytest
from _core_data import load
from _raises import raises_saying
from _small_configs import small_decoder

from interp_core.errors import ConfigError, PointUnsupported
from interp_core.facts import ModelFacts, MoEFacts
from interp_core.known_models import facts_for, known_model_ids, load_known_config


@dataclass(frozen=True)
class Expected:
    """What a model's config must read as. Omitted traits default to a plain Llama-like model."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_mlp: int
    vocab_size: int
    tied: bool
    kinds: dict[str, int]  # layer-kind counts
    window: int | None = None
    # MoE: (experts, per token, expert width, shared experts, shared width, sparse layers)
    moe: tuple[int, int, int, int, int | None, tuple[int, ...]] | None = None
    # MLA: (kv_lora_rank, q_lora_rank, qk_nope, qk_rope, v_head_dim)
    mla: tuple[int, int | None, int, int, int] | None = None
    qk_norm: bool = False
    sandwich: bool = False
    parallel: bool = False
    gated_mlp: bool = True
    biases: bool = False
    learned_positions: bool = False
    gated_attn_output: bool = False
    softcaps: tuple[float | None, float | None] = (None, None)  # (attention, final)
    logit_multiplier: float | None = None
    residual_multiplier: float | None = None
    embedding_multiplier: float | None = None
    max_positions: int | None = None
    dtype: str | None = "bfloat16"
    architecture: str | None = None
    streams: int = 1  # residual streams (Gemma-3n's AltUp carries 4)
    extra: dict[str, Any] = field(default_factory=dict)


# The order of Expected's `moe` and `mla` tuples, in the names data/expected_facts.json gives.
_MOE_KEYS = ("experts", "per_token", "d_expert", "shared", "d_shared", "sparse_layers")
_MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# The ModelFacts.moe attributes the `moe` tuple holds: MoEFacts' fields, in their order.
_MOE_ATTRIBUTES = tuple(part.name for part in dataclass_fields(MoEFacts))


def _expected(row: dict[str, Any]) -> Expected:
    """One row of data/expected_facts.json; its lists are the tuples the facts hold."""
    fields = {key: value for key, value in row.items() if key != "note"}
    for name, keys in (("moe", _MOE_KEYS), ("mla", _MLA_KEYS)):
        if name in fields:
            parts = (fields[name][key] for key in keys)
            fields[name] = tuple(tuple(part) if isinstance(part, list) else part for part in parts)
    if "softcaps" in fields:
        fields["softcaps"] = tuple(fields["softcaps"])
    return Expected(**fields)


# Numbers written down by hand from each model's card and config (data/expected_facts.json).
EXPECTED: dict[str, Expected] = {
    model_id: _expected(row) for model_id, row in load("expected_facts.json")["models"].items()
}

REQUIRED = (
    "meta-llama/Llama-3.1-8B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-30B-A3B",
    "google/gemma-2-2b",
    "google/gemma-3-1b-it",
    "mistralai/Mistral-7B-v0.1",
    "mistralai/Mixtral-8x7B-v0.1",
    "deepseek-ai/DeepSeek-V3",
    "openai/gpt-oss-20b",
    "microsoft/Phi-3-mini-4k-instruct",
    "allenai/OLMo-2-1124-7B",
    "openai-community/gpt2",
    "EleutherAI/pythia-70m",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
    "ibm-granite/granite-3.3-8b-instruct",
)


# --- the bundled catalogue -------------------------------------------------------------------


def test_every_bundled_model_has_expectations_and_every_expectation_a_file() -> None:
    assert set(known_model_ids()) == set(EXPECTED)


def test_the_catalogue_holds_the_required_models() -> None:
    missing = [model_id for model_id in REQUIRED if model_id not in known_model_ids()]
    assert missing == []


def test_known_model_ids_are_sorted_repo_ids() -> None:
    ids = known_model_ids()
    assert list(ids) == sorted(ids)
    assert all(model_id.count("/") == 1 for model_id in ids)


def test_bundled_files_are_plain_json_objects() -> None:
    folder = resources.files("interp_core").joinpath("model_configs")
    names = [entry.name for entry in folder.iterdir() if entry.name != "PROVENANCE.json"]
    assert names and all(name.endswith(".json") and "--" in name for name in names)
    for name in names:
        config = json.loads(folder.joinpath(name).read_text(encoding="utf-8"))
        assert isinstance(config, dict) and "model_type" in config, name


def test_load_known_config_returns_a_fresh_copy() -> None:
    first = load_known_config("openai-community/gpt2")
    first["n_layer"] = 99
    assert load_known_config("openai-community/gpt2")["n_layer"] == 12


def test_an_unknown_model_id_names_the_nearest_known_ones() -> None:
    with raises_saying(
        ConfigError,
        "'meta-llama/llama-3.1-8b' is not one of the",
        "'meta-llama/Llama-3.1-8B'",
        "ModelFacts.from_config",
    ):
        load_known_config("meta-llama/llama-3.1-8b")


def test_an_unrelated_model_id_is_refused_without_suggestions() -> None:
    with raises_saying(ConfigError, "known_model_ids()") as caught:
        facts_for("zzzz/qqqq")
    assert "nearest" not in str(caught.value)


def test_a_non_string_model_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="not int"):
        load_known_config(7)  # type: ignore[arg-type]


# --- every bundled model, field by field ------------------------------------------------------


@pytest.mark.parametrize("model_id", sorted(EXPECTED))
def test_bundled_model_reads_as_expected(model_id: str) -> None:
    want = EXPECTED[model_id]
    config = load_known_config(model_id)
    facts = facts_for(model_id)

    assert facts.architecture == (want.architecture or config["architectures"][0])
    assert (
        facts.n_layers,
        facts.d_model,
        facts.n_heads,
        facts.n_kv_heads,
        facts.head_dim,
        facts.d_mlp,
        facts.vocab_size,
    ) == (
        want.n_layers,
        want.d_model,
        want.n_heads,
        want.n_kv_heads,
        want.head_dim,
        want.d_mlp,
        want.vocab_size,
    )
    assert facts.tied_embeddings is want.tied
    assert len(facts.layer_kinds) == facts.n_layers
    assert dict(Counter(facts.layer_kinds)) == want.kinds
    assert facts.sliding_window == want.window
    assert facts.qk_norm is want.qk_norm
    assert facts.sandwich_norms is want.sandwich
    assert facts.parallel_attn_mlp is want.parallel
    assert facts.gated_mlp is want.gated_mlp
    assert (facts.biases, facts.learned_positions) == (want.biases, want.learned_positions)
    assert facts.gated_attn_output is want.gated_attn_output
    assert (facts.attn_logit_softcap, facts.final_logit_softcap) == want.softcaps
    assert facts.logit_multiplier == want.logit_multiplier
    assert facts.residual_multiplier == want.residual_multiplier
    assert facts.embedding_multiplier == pytest.approx(want.embedding_multiplier)
    assert facts.n_streams == want.streams
    assert facts.max_position_embeddings == want.max_positions
    assert facts.torch_dtype == want.dtype
    assert facts.extras == config

    # The MoE and MLA facts, attribute by attribute in the order of Expected's tuples.
    for part, attributes in (("moe", _MOE_ATTRIBUTES), ("mla", _MLA_KEYS)):
        read, wanted = getattr(facts, part), getattr(want, part)
        if wanted is None:
            assert read is None, part
        else:
            assert read is not None, part
            assert tuple(getattr(read, name) for name in attributes) == wanted, part
    if want.moe is None:
        assert facts.n_sparse_layers == 0
    else:
        sparse_layers = want.moe[-1]
        assert facts.has_dense_layers is (len(sparse_layers) < facts.n_layers)


# --- specific layouts, spelled out ------------------------------------------------------------


def test_gemma2_alternates_starting_with_a_sliding_layer() -> None:
    facts = facts_for("google/gemma-2-2b")
    assert facts.layer_kinds[:4] == ("sliding", "full", "sliding", "full")
    assert facts.layer_kind(25) == "full"


def test_gemma3_makes_every_sixth_layer_global() -> None:
    facts = facts_for("google/gemma-3-1b-it")
    assert [i for i, kind in enumerate(facts.layer_kinds) if kind == "full"] == [5, 11, 17, 23]


def test_gpt_oss_follows_its_layer_types() -> None:
    facts = facts_for("openai/gpt-oss-20b")
    assert facts.layer_kinds[:2] == ("sliding", "full")
    assert facts.attends(0) and facts.attends(1)


def test_qwen3_next_attends_only_on_every_fourth_layer() -> None:
    facts = facts_for("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert facts.layer_kind(3) == "full" and facts.attends(3)
    assert facts.layer_kind(0) == "linear_attention" and not facts.attends(0)


def test_deepseek_v3_widths_follow_mla() -> None:
    facts = facts_for("deepseek-ai/DeepSeek-V3")
    assert facts.q_width == 128 * 192
    assert facts.kv_width == 128 * 192
    assert facts.z_width == 128 * 128
    assert not facts.is_sparse(2) and facts.is_sparse(3) and facts.is_sparse(60)


def test_explicit_head_dim_widens_q_past_d_model() -> None:
    facts = facts_for("Qwen/Qwen3-4B")
    assert facts.d_model // facts.n_heads == 80
    assert facts.q_width == 32 * 128
    assert facts.kv_width == 8 * 128


def test_olmo2_records_post_norms_only() -> None:
    assert facts_for("allenai/OLMo-2-1124-7B").post_norms_only is True
    assert facts_for("google/gemma-2-2b").post_norms_only is False


# --- synthetic configs ------------------------------------------------------------------------


def _llama(**overrides: Any) -> dict[str, Any]:
    return small_decoder(**{"architectures": ["LlamaForCausalLM"], **overrides})


def test_explicit_head_dim_wins_over_the_quotient() -> None:
    facts = ModelFacts.from_config(_llama(head_dim=40))
    assert facts.head_dim == 40
    assert facts.q_width == 160 and facts.kv_width == 80


def test_a_null_head_dim_falls_back_to_the_quotient() -> None:
    assert ModelFacts.from_config(_llama(head_dim=None)).head_dim == 16


@pytest.mark.parametrize(
    ("model_type", "biases", "learned_positions"),
    [
        ("gpt2", True, True),
        ("opt", True, True),
        ("gpt_neo", True, True),
        ("codegen", True, True),
        ("gpt_neox", True, False),  # rotary positions
        ("falcon", True, False),
        ("bloom", True, False),  # ALiBi: no position table
        ("phi", True, False),
        ("llama", False, False),
        ("qwen3", False, False),
        ("gemma2", False, False),
    ],
)
def test_bias_and_position_table_traits_follow_the_family(
    model_type: str, biases: bool, learned_positions: bool
) -> None:
    config = {
        "model_type": model_type,
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    facts = ModelFacts.from_config(config)
    assert (facts.biases, facts.learned_positions) == (biases, learned_positions)


def test_llama_without_tie_key_is_untied_and_gpt2_like_is_tied() -> None:
    assert ModelFacts.from_config(_llama()).tied_embeddings is False
    config = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 10}
    facts = ModelFacts.from_config(config)
    assert facts.tied_embeddings is True
    assert facts.d_mlp == 128  # n_inner absent: 4 * d_model
    assert facts.architecture == "gpt2"


def test_nested_text_config_is_read_and_the_wrapper_names_the_architecture() -> None:
    config = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "mistral",
            "num_hidden_layers": 40,
            "hidden_size": 5120,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "intermediate_size": 32768,
            "vocab_size": 131072,
            "sliding_window": None,
        },
        "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24},
    }
    facts = ModelFacts.from_config(config)
    assert facts.architecture == "Mistral3ForConditionalGeneration"
    assert facts.model_type == "mistral"
    assert (facts.n_layers, facts.d_model, facts.head_dim, facts.vocab_size) == (
        40,
        5120,
        128,
        131072,
    )
    assert facts.layer_kinds == ("full",) * 40
    assert facts.torch_dtype == "bfloat16"
    assert facts.tied_embeddings is False


MOE_LAYOUTS = load("moe_layouts.json")["layouts"]


@pytest.mark.parametrize("layout", MOE_LAYOUTS)
def test_moe_layouts_route_the_layers_their_config_names(layout: str) -> None:
    row = MOE_LAYOUTS[layout]
    facts = ModelFacts.from_config(small_decoder(**row["config"]))
    moe = facts.moe
    assert moe is not None
    read = {
        "sparse_layers": list(moe.sparse_layers),
        "experts": [moe.n_experts, moe.experts_per_token, moe.d_expert],
        "shared": [moe.n_shared_experts, moe.d_shared_expert],
        "d_mlp": facts.d_mlp,
        "has_dense_layers": facts.has_dense_layers,
    }
    assert {key: read[key] for key in row["expected"]} == row["expected"]
    assert facts.n_sparse_layers == len(moe.sparse_layers)
    assert [facts.is_sparse(i) for i in range(facts.n_layers)] == [
        i in moe.sparse_layers for i in range(facts.n_layers)
    ]


def test_qwen_sliding_starts_at_max_window_layers_when_switched_on() -> None:
    config = _llama(
        model_type="qwen2", sliding_window=1024, use_sliding_window=True, max_window_layers=2
    )
    facts = ModelFacts.from_config(config)
    assert facts.layer_kinds == ("full", "full", "sliding", "sliding")
    assert facts.sliding_window == 1024


def test_layer_types_names_map_onto_layer_kinds() -> None:
    config = _llama(
        layer_types=["full_attention", "sliding_attention", "linear_attention", "mamba"],
        sliding_window=256,
    )
    facts = ModelFacts.from_config(config)
    assert facts.layer_kinds == ("full", "sliding", "linear_attention", "mamba")
    assert [facts.attends(i) for i in range(4)] == [True, True, False, False]


def test_multi_query_means_one_kv_head() -> None:
    config = {
        "model_type": "gpt_bigcode",
        "multi_query": True,
        "n_layer": 2,
        "n_embd": 64,
        "n_head": 8,
        "n_inner": None,
        "vocab_size": 10,
    }
    facts = ModelFacts.from_config(config)
    assert facts.n_kv_heads == 1 and facts.kv_width == 8
    assert facts.d_mlp == 256 and facts.gated_mlp is False


def test_falcon_kv_heads_follow_the_decoder_generation() -> None:
    base = {
        "model_type": "falcon",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 8,
        "vocab_size": 10,
    }
    old = ModelFacts.from_config({**base, "multi_query": True, "parallel_attn": True})
    new = ModelFacts.from_config({**base, "new_decoder_architecture": True, "num_kv_heads": 2})
    assert (old.n_kv_heads, new.n_kv_heads) == (1, 2)
    assert old.parallel_attn_mlp and new.parallel_attn_mlp


def test_hyper_connection_streams() -> None:
    assert ModelFacts.from_config(_llama(hc_mult=4)).n_streams == 4
    assert ModelFacts.from_config(_llama(mhc_expansion_rate=4, mhc_enabled=False)).n_streams == 1


def test_cohere_logit_scale_is_a_multiplier_and_cohere_is_parallel() -> None:
    facts = ModelFacts.from_config(_llama(model_type="cohere", logit_scale=0.0625))
    assert facts.logit_multiplier == 0.0625
    assert facts.parallel_attn_mlp is True


def test_extras_is_a_copy_of_the_whole_mapping() -> None:
    config = _llama(custom_key=[1, 2])
    facts = ModelFacts.from_config(config)
    config["custom_key"] = "changed"
    assert facts.extras["custom_key"] == [1, 2]


# --- refusals ---------------------------------------------------------------------------------


def test_a_non_mapping_config_is_refused() -> None:
    with raises_saying(ConfigError, "must be a mapping", "not list"):
        ModelFacts.from_config([("model_type", "llama")])  # type: ignore[arg-type]


def test_missing_layers_names_every_key_looked_for() -> None:
    config = _llama()
    del config["num_hidden_layers"]
    with raises_saying(
        ConfigError, "`num_hidden_layers`, `n_layer`, `num_layers`", "the number of layers"
    ) as caught:
        ModelFacts.from_config(config)
    assert str(caught.value).endswith("Add `num_hidden_layers` with the checkpoint's value")


def test_missing_vocabulary_is_refused() -> None:
    config = _llama()
    del config["vocab_size"]
    with pytest.raises(ConfigError, match=r"vocabulary size under none of `vocab_size`"):
        ModelFacts.from_config(config)


def test_missing_model_type_is_refused() -> None:
    config = _llama()
    del config["model_type"]
    with pytest.raises(ConfigError, match=r"no `model_type`"):
        ModelFacts.from_config(config)


def test_a_non_integer_width_is_refused() -> None:
    with raises_saying(ConfigError, "`hidden_size` is '4096'", "positive integer"):
        ModelFacts.from_config(_llama(hidden_size="4096"))


def test_kv_heads_that_do_not_divide_the_heads_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"`num_key_value_heads` is 3 .* dividing the 4"):
        ModelFacts.from_config(_llama(num_key_value_heads=3))


def test_an_indivisible_width_without_head_dim_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"width 66 does not split into 4 equal heads"):
        ModelFacts.from_config(_llama(hidden_size=66))


def test_an_unknown_layer_type_is_refused() -> None:
    config = _llama(layer_types=["full_attention", "banded", "full_attention", "full_attention"])
    with raises_saying(ConfigError, "`layer_types[1]` is 'banded'", "sliding_attention"):
        ModelFacts.from_config(config)


def test_layer_types_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"`layer_types` has 2 entries but .* 4 layers"):
        ModelFacts.from_config(_llama(layer_types=["full_attention"] * 2))


def test_moe_without_experts_per_token_is_refused() -> None:
    with raises_saying(
        ConfigError, "`num_experts_per_tok`, `num_experts_per_token`, `experts_per_token`"
    ):
        ModelFacts.from_config(_llama(num_local_experts=8))


def test_more_experts_per_token_than_experts_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"routes each token to 9 of 8 experts"):
        ModelFacts.from_config(_llama(num_local_experts=8, num_experts_per_tok=9))


def test_an_unknown_mlp_layer_type_is_refused() -> None:
    config = _llama(num_experts=4, num_experts_per_tok=1, mlp_layer_types=["dense", "x"] * 2)
    with pytest.raises(ConfigError, match=r"`mlp_layer_types\[1\]` is 'x'"):
        ModelFacts.from_config(config)


def test_mlp_only_layers_out_of_range_are_refused() -> None:
    config = _llama(
        num_experts=4, num_experts_per_tok=1, decoder_sparse_step=1, mlp_only_layers=[4]
    )
    with pytest.raises(ConfigError, match=r"`mlp_only_layers` names layer 4, .* 0\.\.3"):
        ModelFacts.from_config(config)


def test_mla_missing_a_width_is_refused() -> None:
    config = _llama(kv_lora_rank=64, qk_nope_head_dim=16, qk_rope_head_dim=8)
    with pytest.raises(ConfigError, match=r"under none of `v_head_dim`"):
        ModelFacts.from_config(config)


def test_zero_logits_scaling_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`logits_scaling` is 0"):
        ModelFacts.from_config(_llama(model_type="granite", logits_scaling=0))


def test_a_non_mapping_text_config_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"`text_config` is a list, not a mapping"):
        ModelFacts.from_config({"model_type": "gemma3", "text_config": []})


def test_a_layer_out_of_range_is_refused_by_every_predicate() -> None:
    facts = facts_for("meta-llama/Llama-3.1-8B")
    for predicate in (facts.layer_kind, facts.attends, facts.is_sparse):
        with pytest.raises(PointUnsupported) as caught:
            predicate(32)
        assert str(caught.value) == (
            "layer 32 does not exist: this LlamaForCausalLM has layers 0..31"
        )
    with pytest.raises(PointUnsupported, match="layer -1 does not exist"):
        facts.layer_kind(-1)
