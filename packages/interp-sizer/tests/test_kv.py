"""KV bytes per token per layer kind, and vLLM's block arithmetic."""

from __future__ import annotations

from pathlib import Path

from interp_core.facts import ModelFacts
from interp_core.known_models import facts_for
from interp_core.testing.published_shapes import config_file, deepseek_v4, gemma3n_text
from interp_sizer import kv_layout, vllm_kv_capacity
from interp_sizer.weights import parameter_count

DATA = Path(__file__).parent / "data"


def test_llama_31_8b_costs_128_kib_per_token_in_bf16_and_64_in_fp8() -> None:
    facts = facts_for("meta-llama/Llama-3.1-8B")
    assert kv_layout(facts, 2, "vllm").bytes_per_token == 32 * 8 * 256 * 2 == 128 * 1024
    assert kv_layout(facts, 1, "vllm").bytes_per_token == 64 * 1024
    # Eight KV heads split over at most eight ranks; past that vLLM replicates.
    assert kv_layout(facts, 2, "vllm", tensor_parallel=2).bytes_per_token == 64 * 1024
    assert kv_layout(facts, 2, "vllm", tensor_parallel=8).bytes_per_token == 16 * 1024
    # 8 GiB per 64k-token sequence: 1 GiB per 8k, as the anchors state.
    assert kv_layout(facts, 2, "vllm").sequence_bytes(8192) == 1 << 30


def test_deepseek_v3_mla_caches_576_values_per_layer_per_token_on_vllm() -> None:
    facts = facts_for("deepseek-ai/DeepSeek-V3")
    layout = kv_layout(facts, 2, "vllm")
    assert {layer.values_per_token for layer in layout.layers} == {576}  # 512 latent + 64 rope
    assert layout.bytes_per_token == 61 * 576 * 2 == 70_272  # ≈ 68.6 KiB
    # The latent is replicated on every rank, not split.
    assert kv_layout(facts, 2, "vllm", tensor_parallel=8).bytes_per_token == 70_272
    # HF transformers caches the decompressed per-head keys and values instead.
    eager = kv_layout(facts, 2, "eager")
    assert eager.values_per_token_layer() == 128 * (192 + 128)


def test_qwen3_uses_its_explicit_head_dim_not_hidden_over_heads() -> None:
    facts = facts_for("Qwen/Qwen3-4B")  # head_dim 128 while hidden/heads = 80
    assert kv_layout(facts, 2, "vllm").bytes_per_token == 36 * 8 * 2 * 128 * 2


def test_gemma3_sliding_layers_are_bounded_by_the_window() -> None:
    facts = facts_for("google/gemma-3-1b-it")
    layout = kv_layout(facts, 2, "vllm")
    windows = {layer.window for layer in layout.layers}
    assert windows == {None, facts.sliding_window}
    flat = layout.bytes_per_token * 32_768
    assert layout.sequence_bytes(32_768) < flat / 3  # 5 of 6 layers keep only 512 tokens


def test_recurrent_layers_cost_state_per_sequence_not_per_token() -> None:
    facts = facts_for("Qwen/Qwen3-Next-80B-A3B-Instruct")
    layout = kv_layout(facts, 2, "vllm")
    attending = [layer for layer in layout.layers if layer.kind != "state"]
    assert len(attending) == 12  # one full-attention layer in four
    assert layout.bytes_per_token == 12 * 2 * 2 * 256 * 2
    # The 36 gated delta-net layers each hold, per sequence (config: 16 key heads and 32 value
    # heads of 128, a causal conv of kernel 4): the conv window of the mixed q/k/v channels,
    # (4 - 1)·(2·16·128 + 32·128) = 24_576 values, and the recurrent state, one 128 x 128 matrix
    # per value head, 32·128·128 = 524_288 values; at 2 bytes per value.
    conv = (4 - 1) * (2 * 16 * 128 + 32 * 128)
    recurrent = 32 * 128 * 128
    assert (conv, recurrent) == (24_576, 524_288)
    assert layout.state_bytes_per_sequence == 36 * (conv + recurrent) * 2 == 39_518_208
    # vLLM shards the heads over tensor-parallel ranks; eager keeps each layer whole on one card.
    sharded = kv_layout(facts, 2, "vllm", tensor_parallel=4).state_bytes_per_sequence
    assert sharded == 36 * ((conv + recurrent) // 4) * 2 == 9_879_552
    assert kv_layout(facts, 2, "eager", tensor_parallel=4).state_bytes_per_sequence == 39_518_208
    assert layout.sequence_bytes(1) == layout.state_bytes_per_sequence + layout.bytes_per_token


def test_vllm_blocks_follow_the_allocator_for_uniform_and_hybrid_layouts() -> None:
    llama = kv_layout(facts_for("meta-llama/Llama-3.1-8B"), 2, "vllm")
    pool = 10 << 30
    capacity = vllm_kv_capacity(
        llama, pool, block_size=16, max_model_len=8192, max_in_flight_tokens=16384
    )
    assert capacity.bytes_per_block == 16 * 128 * 1024
    assert capacity.num_blocks == pool // (16 * 128 * 1024)
    assert capacity.tokens == capacity.num_blocks * 16 == 81_920
    assert capacity.max_concurrency == 10.0
    gemma = kv_layout(facts_for("google/gemma-3-1b-it"), 2, "vllm")  # 22 sliding + 4 full
    hybrid = vllm_kv_capacity(
        gemma, pool, block_size=16, max_model_len=32_768, max_in_flight_tokens=16384
    )
    # Group size is the smaller count (4 full layers); 22 sliding layers make 6 groups.
    assert hybrid.bytes_per_block == 16 * 4 * (1 * 2 * 256 * 2)
    per_request = 2048 + 6 * (-(-(512 - 1 + 16384) // 16) + 1)
    assert hybrid.blocks_per_request == per_request


def test_mha_and_mqa_follow_the_kv_head_count() -> None:
    from interp_core.facts import ModelFacts

    base = {
        "model_type": "llama",
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "vocab_size": 100,
    }
    mha = ModelFacts.from_config(base)  # no num_key_value_heads: one KV head per query head
    mqa = ModelFacts.from_config({**base, "num_key_value_heads": 1})
    assert kv_layout(mha, 2, "vllm").bytes_per_token == 2 * 2 * 8 * 64 * 2
    assert kv_layout(mqa, 2, "vllm").bytes_per_token == 2 * 2 * 1 * 64 * 2
    # One KV head cannot be split: every rank holds it whole.
    assert kv_layout(mqa, 2, "vllm", tensor_parallel=4).bytes_per_token == 2 * 2 * 64 * 2


def _nemotron_h(pattern: str) -> ModelFacts:
    # A small Nemotron-H (the published keys at a small size), laid out as `pattern` spells it.
    config = config_file(
        DATA / "configs" / "nemotron-h-small.json",
        hybrid_override_pattern=pattern,
        num_hidden_layers=len(pattern),
    )
    return ModelFacts.from_config(config)


def test_single_sublayer_mlp_layers_cost_neither_cache_nor_state() -> None:
    # Nemotron-H: pricing its MLP-only layers as recurrent would double the per-sequence state
    # here (two Mamba layers, two MLP layers) and add phantom attention weights.
    facts = _nemotron_h("M-M*-")
    layout = kv_layout(facts, 2, "vllm")
    kinds = [layer.kind for layer in layout.layers]
    assert kinds == ["state", "none", "state", "full", "none"]
    assert layout.bytes_per_token == 2 * 2 * 32 * 2  # the one attention layer: K and V, 2 heads
    mamba_only = kv_layout(_nemotron_h("MM*"), 2, "vllm")
    assert layout.state_bytes_per_sequence == mamba_only.state_bytes_per_sequence > 0
    count, without_mlps = parameter_count(facts), parameter_count(_nemotron_h("MM*"))
    assert count.dense_mlp == 2 * (2 * 256 * 512)  # two ungated (relu2) MLP layers
    assert without_mlps.dense_mlp == 0
    assert count.attention == without_mlps.attention  # the MLP layers add no mixer weights
    # one pre-norm per layer (no second norm: there is no second sublayer), plus the final norm
    assert count.norms_and_biases - without_mlps.norms_and_biases == 2 * 256


def test_deepseek_v4_compressed_layers_add_one_entry_per_rate_tokens() -> None:
    from interp_core.facts import ModelFacts

    # The last compress_ratios entry is the MTP layer's.
    config = deepseek_v4(num_hidden_layers=3, compress_ratios=[0, 4, 128, 0])
    layout = kv_layout(ModelFacts.from_config(config), 2, "eager")
    # One tensor is both keys and values: 512 values per token, every layer windowed to 128.
    assert [layer.bytes_per_token for layer in layout.layers] == [1024] * 3
    assert {layer.window for layer in layout.layers} == {128}
    # CSA: an entry of 512 values plus the indexer's 128 per 4 tokens; HCA: 512 per 128 tokens.
    csa, hca = layout.layers[1], layout.layers[2]
    assert (csa.compress_rate, csa.bytes_per_entry) == (4, (512 + 128) * 2)
    assert (hca.compress_rate, hca.bytes_per_entry) == (128, 512 * 2)
    tokens = 65_536
    windows = 3 * 128 * 1024
    entries = tokens // 4 * 1280 + tokens // 128 * 1024
    assert layout.sequence_bytes(tokens) == windows + entries
    # Flat, the entries are spread over their tokens: 1280 / 4 and 1024 / 128 bytes per token.
    assert layout.bytes_per_token == 3 * 1024 + 320 + 8


def test_gemma3n_kv_shared_layers_cache_nothing_of_their_own() -> None:
    from interp_core.facts import ModelFacts

    text = gemma3n_text()
    layout = kv_layout(ModelFacts.from_config({"text_config": text}), 2, "eager")
    per_layer = [layer.bytes_per_token for layer in layout.layers]
    # 2 K/V heads × 2 (K and V) × 256 × 2 bytes on the 20 computing layers, 0 on the 10 sharing.
    assert per_layer == [2048] * 20 + [0] * 10
    capacity = vllm_kv_capacity(
        kv_layout(ModelFacts.from_config({"text_config": text}), 2, "vllm"),
        1 << 30,
        block_size=16,
        max_model_len=4096,
        max_in_flight_tokens=2048,
    )
    assert capacity.exact  # the sharing layers form no bucket of their own
