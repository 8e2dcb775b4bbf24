"""Does the sizer price Gemma-4's per-layer widths, KV sharing and per-layer inputs exactly?

Gemma-4's full layers have wider heads and their own K/V head count, its last layers reuse an
earlier layer's keys and values (caching nothing of their own) with MLPs of twice the width, and
a per-layer input table adds a large embedding. The tiny family model is the ground truth: its
safetensors file for the weights, and transformers' own KV cache after a short prompt.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from interp_core.facts import ModelFacts
from interp_core.testing.published_shapes import gemma4_text
from interp_sizer import kv_layout
from interp_sizer.source import resolve_model
from interp_sizer.weights import parameter_count


def _published(**overrides: Any) -> dict[str, Any]:
    # A wrapper stating its text model's keys the way published Gemma-4 configs do.
    shortened: dict[str, Any] = {
        "num_hidden_layers": 6,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
        "num_kv_shared_layers": 3,
        "hidden_size_per_layer_input": 0,
    }
    text = gemma4_text(**{**shortened, **overrides})
    return {"architectures": ["Gemma4ForConditionalGeneration"], "text_config": text}


def test_each_layer_caches_at_its_own_width_and_sharing_layers_cache_nothing() -> None:
    facts = ModelFacts.from_config(_published())
    layout = kv_layout(facts, 2, "vllm")
    kinds = [layer.kind for layer in layout.layers]
    assert kinds == ["sliding", "sliding", "full", "shared", "shared", "shared"]
    # Sliding: 2 K/V heads of 256; full: 1 K/V head of 512 (keys and values both cached).
    assert [layer.values_per_token for layer in layout.layers[:3]] == [1024, 1024, 1024]
    assert layout.bytes_per_token == 3 * 1024 * 2
    # Two ranks split the sliding layers' two heads; the full layer's single head is replicated.
    split = kv_layout(facts, 2, "vllm", tensor_parallel=2)
    assert [layer.values_per_token for layer in split.layers[:3]] == [512, 512, 1024]
    wide = kv_layout(ModelFacts.from_config(_published(num_global_key_value_heads=4)), 2, "vllm")
    assert wide.layers[2].values_per_token == 4 * 2 * 512


@pytest.fixture(scope="module")
def tiny_gemma4() -> Any:
    from interp_testmodels.families import build_family

    return build_family("gemma4")


def test_the_config_count_matches_the_tiny_checkpoint(tiny_gemma4: Any) -> None:
    from safetensors.torch import load_file

    model = resolve_model(tiny_gemma4, hub=False)
    tensors = load_file(str(tiny_gemma4 / "model.safetensors"))
    count = parameter_count(model.facts)
    assert count.total == sum(t.numel() for t in tensors.values())
    inventory = model.inventory
    # The config count keeps QK-norm gains with the attention; the file's inventory sees vectors
    # and calls them small (so on every QK-norm family). KV-sharing layers have no key norm.
    facts = model.facts
    qk_norms = sum(
        facts.head_dim_at(layer) * (1 if facts.shares_kv(layer) else 2)
        for layer in range(facts.n_layers)
    )
    assert qk_norms == 288
    assert inventory.linear_elements == count.linear - qk_norms
    assert inventory.embedding_elements == count.embedding + count.unembedding
    assert inventory.small_elements == count.norms_and_biases + qk_norms
    # The per-layer input table is priced as an embedding: 1000 tokens x 4 layers x 16.
    assert count.embedding == 1000 * 128 + 1000 * 4 * 16


def test_the_eager_kv_price_is_what_transformers_caches(tiny_gemma4: Any) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    config = json.loads((tiny_gemma4 / "config.json").read_text())
    facts = ModelFacts.from_config(config)
    model = AutoModelForCausalLM.from_pretrained(tiny_gemma4, dtype=torch.float32).eval()
    tokens = 3  # inside the window of 4, so every caching layer holds every token
    with torch.no_grad():
        cache = model(torch.tensor([[2, 5, 6]]), use_cache=True).past_key_values
    cached = sum(
        t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values)
    )
    assert len(cache.layers) == 2  # layers 2 and 3 reuse layers 0 and 1
    assert kv_layout(facts, 4, "eager").sequence_bytes(tokens) == cached
