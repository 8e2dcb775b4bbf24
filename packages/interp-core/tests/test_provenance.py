"""Does every bundled config that was not downloaded say where it came from, and is it clean?

`model_configs/PROVENANCE.json` records the configs reconstructed from transformers' documented
defaults. The configs bundled before that record existed are listed here once; any other
bundled file without an entry fails, so a new config cannot arrive without its provenance.
"""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from interp_core.errors import ConfigError
from interp_core.known_models import config_provenance, known_model_ids, load_known_config

# Bundled before PROVENANCE.json existed; their origin is not recorded. Never add to this.
PREDATES_RECORD = frozenset(
    {
        "EleutherAI/pythia-70m",
        "HuggingFaceTB/SmolLM2-135M",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "Qwen/Qwen2.5-7B",
        "Qwen/Qwen3-30B-A3B",
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-4B",
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "allenai/OLMo-2-1124-7B",
        "deepseek-ai/DeepSeek-V3",
        "google/gemma-2-2b",
        "google/gemma-2-2b-it",
        "google/gemma-3-1b-it",
        "google/gemma-3-4b-it",
        "ibm-granite/granite-3.3-8b-instruct",
        "meta-llama/Llama-3.1-70B",
        "meta-llama/Llama-3.1-8B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.2-1B",
        "meta-llama/Llama-3.2-3B",
        "meta-llama/Llama-3.3-70B-Instruct",
        "microsoft/Phi-3-mini-4k-instruct",
        "mistralai/Mistral-7B-v0.1",
        "mistralai/Mixtral-8x7B-v0.1",
        "openai/gpt-oss-20b",
        "openai-community/gpt2",
    }
)

# What transformers adds to every config object and no published config.json holds.
INTERNAL_KEYS = {
    "_name_or_path",
    "chunk_size_feed_forward",
    "id2label",
    "is_encoder_decoder",
    "label2id",
    "output_attentions",
    "output_hidden_states",
    "problem_type",
    "return_dict",
}


# The dimensions a `base` entry must source one by one: the defaults describe another checkpoint,
# so none of these may be taken from them (the keys a family's config holds, by its naming).
HEADLINE_KEYS = frozenset(
    {
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
        "n_routed_experts",
        "n_shared_experts",
        "num_experts",
        "num_local_experts",
        "num_experts_per_tok",
        "vocab_size",
        "max_position_embeddings",
    }
)
REQUIRED = {"source", "checked_against", "checked", "parameters", "note"}
OPTIONAL = {"base", "corrections", "correction_sources", "omitted"}
# A public source for a corrected value: a web page, or a file in a public repository pinned to
# the commit it was read at ("owner/repo/path@<40 hex>").
_PINNED_FILE = re.compile(r"^[\w.-]+/[\w.-]+/\S+@[0-9a-f]{40}$")


def _record() -> dict[str, dict[str, object]]:
    folder = resources.files("interp_core").joinpath("model_configs")
    return json.loads(folder.joinpath("PROVENANCE.json").read_text(encoding="utf-8"))["configs"]


RECORDED = sorted(_record())


def test_every_bundled_config_has_provenance_unless_it_predates_the_record() -> None:
    missing = [m for m in known_model_ids() if m not in PREDATES_RECORD and m not in RECORDED]
    assert missing == []


def test_every_provenance_entry_names_a_bundled_config() -> None:
    assert set(RECORDED) <= set(known_model_ids())
    assert not set(RECORDED) & PREDATES_RECORD
    assert PREDATES_RECORD <= set(known_model_ids())


@pytest.mark.parametrize("model_id", RECORDED)
def test_provenance_entry_states_source_and_public_checks(model_id: str) -> None:
    entry = config_provenance(model_id)
    assert entry is not None
    assert REQUIRED <= set(entry) <= REQUIRED | OPTIONAL
    assert isinstance(entry["parameters"], int) and entry["parameters"] > 0
    source = str(entry["source"])
    named = entry.get("base", model_id) or "no checkpoint"  # base null: generic defaults
    assert source.startswith("transformers ") and f"(docstring names {named})" in source
    urls = entry["checked_against"]
    assert isinstance(urls, list) and urls
    assert all(isinstance(u, str) and u.startswith("https://") for u in urls)
    # A check against the model's own Hub repository would not be independent of the file.
    assert not any(f"huggingface.co/{model_id}" in u for u in urls)
    assert "layers" in str(entry["checked"])


def _correction_problems(model_id: str, entry: dict, config: dict) -> list[str]:
    """What is wrong with an entry's corrections: each needs public sources, must be what the
    file holds, and a `base` entry must source every headline dimension the file has."""
    corrections = entry.get("corrections", {})
    omitted = entry.get("omitted", [])
    sources = entry.get("correction_sources", {})
    changed = set(corrections) | set(omitted)
    problems = [f"{key} has no source" for key in sorted(changed - set(sources))]
    problems += [f"{key} is sourced but not corrected" for key in set(sources) - changed]
    # Leaving a default out says the checkpoint has no such part: only a `base` entry (defaults of
    # another checkpoint) can need it, and the key must then be absent from the file.
    if omitted and "base" not in entry:
        problems.append("omits keys without a base")
    problems += [f"{key} is omitted but in the file" for key in omitted if key in config]
    for key, found_in in sources.items():
        if not isinstance(found_in, list) or not found_in:
            problems.append(f"{key} names no source")
            continue
        for where in found_in:
            if not (where.startswith("https://") or _PINNED_FILE.match(where)):
                problems.append(f"{key}: {where!r} is neither a page nor a pinned file")
            # The checkpoint's own Hub page would not be independent of the file it describes.
            if f"huggingface.co/{model_id}" in where:
                problems.append(f"{key}: {where!r} is the checkpoint's own Hub page")
    problems += [f"{k} differs in the file" for k, v in corrections.items() if config.get(k) != v]
    if "base" in entry:
        if entry["base"] == model_id:
            problems.append("base names the checkpoint itself")
        unsourced = sorted((HEADLINE_KEYS & set(config)) - set(corrections))
        problems += [f"{key} is taken from {entry['base']} unsourced" for key in unsourced]
    return problems


@pytest.mark.parametrize("model_id", RECORDED)
def test_every_correction_names_its_public_sources_and_is_in_the_file(model_id: str) -> None:
    entry = config_provenance(model_id)
    assert entry is not None
    assert _correction_problems(model_id, entry, load_known_config(model_id)) == []


def test_the_correction_check_finds_a_missing_source_and_an_unsourced_base_dimension() -> None:
    config = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10}
    entry = {
        "base": "acme/big",
        "corrections": {"hidden_size": 64, "num_hidden_layers": 2},
        "correction_sources": {"hidden_size": ["https://example.org/spec"]},
    }
    assert _correction_problems("acme/small", entry, config) == [
        "num_hidden_layers has no source",
        "vocab_size is taken from acme/big unsourced",
    ]
    entry["omitted"] = ["n_routed_experts"]
    assert _correction_problems("acme/small", entry, {**config, "n_routed_experts": 8}) == [
        "n_routed_experts has no source",
        "num_hidden_layers has no source",
        "n_routed_experts is omitted but in the file",
        "n_routed_experts is taken from acme/big unsourced",
        "vocab_size is taken from acme/big unsourced",
    ]
    del entry["omitted"]
    entry["correction_sources"]["num_hidden_layers"] = ["memory"]
    assert (
        "is neither a page nor a pinned file"
        in _correction_problems("acme/small", entry, config)[0]
    )


@pytest.mark.parametrize("model_id", RECORDED)
def test_reconstructed_config_is_a_clean_causal_lm_config(model_id: str) -> None:
    config = load_known_config(model_id)
    assert not INTERNAL_KEYS & set(config)
    (architecture,) = config["architectures"]
    assert architecture.endswith("ForCausalLM")
    # The defaults say nothing about the published dtype, so none is claimed.
    assert "torch_dtype" not in config and "dtype" not in config


def test_a_config_without_a_record_reads_as_none_and_an_unknown_id_is_refused() -> None:
    assert config_provenance("openai-community/gpt2") is None
    with pytest.raises(ConfigError, match="is not one of the"):
        config_provenance("zzzz/qqqq")


def test_config_provenance_returns_a_fresh_copy() -> None:
    model_id = RECORDED[0]
    first = config_provenance(model_id)
    assert first is not None
    first["checked_against"].append("https://example.invalid")  # type: ignore[union-attr]
    again = config_provenance(model_id)
    assert again is not None and "https://example.invalid" not in again["checked_against"]
