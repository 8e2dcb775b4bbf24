"""How many bytes of KV cache does each token cost, and how many tokens fit in a given pool?

Per layer kind, on one tensor-parallel rank:

- softmax attention (MHA, GQA, MQA): `n_kv_heads · (head_dim + head_dim) · b_kv`, the heads split
  over `min(TP, n_kv_heads)` ranks (vLLM replicates a head past that);
- MLA on vLLM: one latent row of `kv_lora_rank + qk_rope_head_dim` values (576 on DeepSeek-V3),
  replicated on every rank; HF transformers instead caches the decompressed per-head keys and
  values, `n_heads · (qk_head_dim + v_head_dim)` values;
- sliding-window and chunked layers: the same bytes per token, but a sequence holds at most the
  window (vLLM: `window - 1 + in-flight tokens`, plus one block);
- linear-attention / recurrent layers: nothing per token; a fixed state per sequence;
- DeepSeek-V4: keys are values (one tensor, `K = V`), so a token costs `head_dim` values; its
  compressed layers hold the window's tokens plus one entry per `compress_rate` tokens
  (`head_dim` values, and `index_head_dim` more for the CSA indexer's keys), so a sequence of
  `t` tokens adds `t // compress_rate` entries beside its window.
- where head widths and K/V head counts differ by layer (Gemma-4's full layers), each layer is
  priced at its own; a layer that reuses another layer's keys and values (KV sharing: Gemma-3n, -4)
  caches nothing of its own, in transformers and in vLLM alike.

`vllm_kv_capacity` turns a pool of bytes into vLLM's blocks, groups and the "KV cache size: N
tokens" it logs, following vLLM's allocator (`vllm/v1/core/kv_cache_utils.py`): pages of
`block_size` tokens, one group per layer kind (hybrid trunks split into equal-sized groups), a
request at `max_model_len` holding whole blocks in every group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts

__all__ = ["KVLayout", "LayerKV", "VllmKVCapacity", "kv_layout", "vllm_kv_capacity"]

_WINDOWED = frozenset({"sliding", "chunked"})


@dataclass(frozen=True)
class LayerKV:
    """The KV cost of one layer on one rank."""

    layer: int
    kind: str  # 'full', 'sliding', 'chunked', 'mla', 'state', 'shared' or 'none' (MLP-only)
    values_per_token: int  # cached values per token (K and V together; the latent on MLA)
    bytes_per_token: int
    window: int | None = None
    # DeepSeek-V4's compressed layers: one more entry per `compress_rate` tokens, unwindowed.
    compress_rate: int | None = None
    bytes_per_entry: int = 0

    def entry_bytes(self, tokens: int) -> int:
        """Bytes of the compressed entries `tokens` tokens leave (0 on other layers)."""
        return tokens // self.compress_rate * self.bytes_per_entry if self.compress_rate else 0

    @property
    def flat_bytes_per_token(self) -> int:
        """Bytes per token, the compressed entries spread over their tokens (rounded up)."""
        if not self.compress_rate:
            return self.bytes_per_token
        return self.bytes_per_token + -(-self.bytes_per_entry // self.compress_rate)


@dataclass(frozen=True)
class KVLayout:
    """Per-layer KV costs of a model under one backend, dtype and TP size."""

    layers: tuple[LayerKV, ...]
    state_bytes_per_sequence: int  # recurrent / linear-attention state, per sequence
    backend_family: str  # 'vllm' or 'eager'

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token adds across all layers when nothing is windowed away (flat)."""
        return sum(layer.flat_bytes_per_token for layer in self.layers)

    @property
    def attention_layers(self) -> tuple[LayerKV, ...]:
        """The layers that cache keys and values of their own (KV-sharing layers do not)."""
        return tuple(
            layer for layer in self.layers if layer.kind not in ("state", "shared", "none")
        )

    @property
    def is_hybrid(self) -> bool:
        kinds = {(layer.kind, layer.window) for layer in self.attention_layers}
        return len(kinds) > 1 or self.state_bytes_per_sequence > 0

    def sequence_bytes(self, tokens: int) -> int:
        """KV bytes one sequence of `tokens` holds, windows applied, state included."""
        total = self.state_bytes_per_sequence
        for layer in self.attention_layers:
            held = tokens if layer.window is None else min(tokens, layer.window)
            total += held * layer.bytes_per_token + layer.entry_bytes(tokens)
        return total

    def values_per_token_layer(self) -> int:
        """Cached values per token in one (the first) attending layer."""
        attending = self.attention_layers
        return attending[0].values_per_token if attending else 0


def _config(facts: ModelFacts) -> Mapping[str, Any]:
    nested = facts.extras.get("text_config")
    return nested if isinstance(nested, Mapping) else facts.extras


# Qwen3-Next's gated delta-net states its mixer's dimensions in these keys; the state here and the
# mixer's weights (interp_sizer.weights) read them alike.
_GATED_DELTA_KEYS = (
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def gated_delta_dims(cfg: Mapping[str, Any]) -> tuple[int, ...] | None:
    """Key heads, key head width, value heads, value head width and conv kernel of a gated
    delta-net mixer, or None when the config does not state every one of them."""
    if not all(isinstance(cfg.get(k), int) for k in _GATED_DELTA_KEYS):
        return None
    return tuple(cfg[k] for k in _GATED_DELTA_KEYS)


def _state_values(facts: ModelFacts, tp: int) -> int:
    """Values of one linear-attention layer's per-sequence state (Qwen3-Next gated delta-net)."""
    dims = gated_delta_dims(_config(facts))
    if dims is not None:
        n_k, h_k, n_v, h_v, kernel = dims
        conv = (kernel - 1) * (2 * n_k * h_k + n_v * h_v)
        recurrent = n_v * h_k * h_v
        return (conv + recurrent) // tp  # heads shard by TP
    # Without the mixer's own dimensions, price one d_model x head_dim state (a linear-attention
    # layer's key-value memory) so the term is visible rather than silently zero.
    return facts.n_heads * facts.head_dim * facts.head_dim // tp


def kv_layout(facts: ModelFacts, kv_bytes: int, backend: str, tensor_parallel: int = 1) -> KVLayout:
    """Per-layer KV costs for `backend` ('eager' or a vLLM backend) at `kv_bytes` per value."""
    family = "eager" if backend == "eager" else "vllm"
    layers: list[LayerKV] = []
    state = 0
    for layer in range(facts.n_layers):
        kind = facts.layer_kind(layer)
        window = facts.sliding_window if kind in _WINDOWED or facts.compress_rate(layer) else None
        # Eager splits layers across GPUs (device_map), never heads: each layer is whole there.
        shards = 1 if family == "eager" else min(tensor_parallel, facts.kv_heads_at(layer))
        if not facts.has_mixer(layer):
            # A single-sublayer trunk's MLP-only layer (Nemotron-H) caches nothing per token and
            # holds no state: pricing it as recurrent would add a phantom per-sequence cost.
            layers.append(LayerKV(layer, "none", 0, 0))
            continue
        if facts.shares_kv(layer):
            layers.append(LayerKV(layer, "shared", 0, 0, window))
            continue
        if not facts.attends(layer):
            values = _state_values(facts, 1 if family == "eager" else tensor_parallel)
            layers.append(LayerKV(layer, "state", 0, 0))
            state += values * kv_bytes
            continue
        if facts.mla is not None and family == "vllm":
            values = facts.mla.kv_lora_rank + facts.mla.qk_rope_head_dim
            layers.append(
                LayerKV(layer, "mla" if window is None else kind, values, values * kv_bytes, window)
            )
            continue
        if facts.mla is not None:
            values = facts.n_heads * (facts.mla.qk_head_dim + facts.mla.v_head_dim)
        else:
            heads_here = max(1, facts.kv_heads_at(layer) // shards)
            # DeepSeek-V4 caches one tensor read as both keys and values.
            values = heads_here * (1 if facts.shared_key_value else 2) * facts.head_dim_at(layer)
        rate = facts.compress_rate(layer)
        if rate is None:
            layers.append(LayerKV(layer, kind, values, values * kv_bytes, window))
            continue
        entry = facts.head_dim
        if kind == "compressed_sparse":
            index_dim = _config(facts).get("index_head_dim")
            if not isinstance(index_dim, int) or index_dim < 1:
                message = (
                    f"layer {layer} is a compressed sparse attention layer, whose indexer caches "
                    f"`index_head_dim` values per entry, but the config states {index_dim!r}; "
                    "state `index_head_dim` to price its KV cache"
                )
                raise ConfigError(message)
            entry += index_dim
        layers.append(
            LayerKV(layer, kind, values, values * kv_bytes, window, rate, entry * kv_bytes)
        )
    return KVLayout(tuple(layers), state, family)


@dataclass(frozen=True)
class VllmKVCapacity:
    """vLLM's KV pool for a given budget: blocks, and tokens at `max_model_len`."""

    num_blocks: int
    block_size: int
    bytes_per_block: int
    blocks_per_request: int  # blocks one request of max_model_len takes across all groups
    max_model_len: int
    exact: bool  # False where the layout is outside what vLLM's uniform grouping describes

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request if self.blocks_per_request else 0.0

    @property
    def tokens(self) -> int:
        """vLLM's "KV cache size: N tokens": max_model_len times the sequences that fit."""
        return int(self.max_concurrency * self.max_model_len)

    @property
    def block_tokens(self) -> int:
        """Token slots allocated per group (num_blocks × block_size)."""
        return self.num_blocks * self.block_size


def _request_blocks(layer: LayerKV, block_size: int, max_model_len: int, in_flight: int) -> int:
    if layer.window is None:
        return math.ceil(max_model_len / block_size)
    # A windowed layer keeps the last window-1 tokens plus what is in flight; +1 because the
    # window need not start on a block boundary.
    held = min(layer.window - 1 + in_flight, max_model_len)
    return math.ceil(held / block_size) + 1


def vllm_kv_capacity(
    layout: KVLayout,
    pool_bytes: int,
    *,
    block_size: int,
    max_model_len: int,
    max_in_flight_tokens: int,
) -> VllmKVCapacity:
    """How vLLM carves `pool_bytes` into KV blocks for this layout."""
    attending = layout.attention_layers  # KV-sharing and MLP-only layers take no blocks
    if not attending:
        return VllmKVCapacity(0, block_size, 0, 0, max_model_len, exact=False)
    buckets: dict[tuple[str, int | None, int], list[LayerKV]] = {}
    for layer in attending:
        key = ("full" if layer.window is None else "windowed", layer.window, layer.bytes_per_token)
        buckets.setdefault(key, []).append(layer)
    pages = {key[2] for key in buckets}
    compressed = any(layer.compress_rate for layer in attending)
    exact = len(pages) == 1 and layout.state_bytes_per_sequence == 0 and not compressed
    if len(buckets) == 1:
        (layers,) = buckets.values()
        bytes_per_block = block_size * sum(layer.bytes_per_token for layer in layers)
        per_request = _request_blocks(layers[0], block_size, max_model_len, max_in_flight_tokens)
    else:
        # Hybrid trunks: equal-sized groups, the smaller layer count as the group size unless
        # the counts are within 1.5x, then the larger (vLLM pads the short group).
        counts = [len(layers) for layers in buckets.values()]
        group_size = min(counts)
        if max(counts) < 1.5 * group_size:
            group_size = max(counts)
        page = max(pages)
        bytes_per_block = block_size * page * group_size
        per_request = 0
        for layers in buckets.values():
            groups = math.ceil(len(layers) / group_size)
            per_request += groups * _request_blocks(
                layers[0], block_size, max_model_len, max_in_flight_tokens
            )
    if layout.state_bytes_per_sequence:
        # Recurrent state rides in the same pool, padded to whole attention blocks.
        per_request += math.ceil(layout.state_bytes_per_sequence / bytes_per_block)
    num_blocks = max(0, pool_bytes) // bytes_per_block
    return VllmKVCapacity(
        num_blocks, block_size, bytes_per_block, per_request, max_model_len, exact
    )
