"""How many bytes do a model's weights take once loaded, for a given dtype and quantization?

Two sources, best first. A checkpoint's safetensors headers (a little-endian u64 length, then a
JSON table of every tensor's dtype, shape and byte range) give the stored bytes exactly without
reading a weight; they also tell which tensors are linear layers (quantizable), which are
embeddings and norms (kept at the model dtype), which hold packed quantized values and which are
scales. Without a checkpoint the parameter count is derived from the model's config through
`interp_core.facts.ModelFacts`; it is exact for the Llama/Qwen/Mistral/DeepSeek layout and close
(biases, learned positions) elsewhere.

The load dtype, not the file, decides what a float tensor costs: a bf16 file loaded as float32
doubles. Packed formats (MXFP4, FP8, AWQ/GPTQ) stay packed on vLLM and are priced as stored.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from interp_core.facts import ModelFacts
from interp_sizer.errors import SizerError
from interp_sizer.formats import (
    CheckpointQuantization,
    Quantization,
    dtype_bytes,
)
from interp_sizer.kv import gated_delta_dims

__all__ = [
    "ParameterCount",
    "TensorRecord",
    "WeightInventory",
    "WeightPart",
    "checkpoint_inventory",
    "config_inventory",
    "parameter_count",
    "read_safetensors_header",
    "safetensors_files",
]

# A header larger than this is not a safetensors header (the format caps it at 100 MB).
_MAX_HEADER_BYTES = 100_000_000
_FLOAT_CODES = frozenset({"F64", "F32", "F16", "BF16"})
# Model parameters whose names end like quantization scales (Gemma-4's router scales each
# expert's weight by a learned `per_expert_scale`).
_WEIGHTS_NAMED_LIKE_SCALES = (".per_expert_scale",)
# Tensor names that hold quantization side data rather than weights.
_SCALE_SUFFIXES = (
    "_scale",
    "_scale_inv",
    "_scales",
    ".scales",
    "_zeros",
    ".qzeros",
    ".g_idx",
    ".absmax",
    ".quant_map",
    ".nested_absmax",
    ".nested_quant_map",
    "_amax",
)
_LAYER_MARKERS = (".layers.", ".h.", ".blocks.", ".block.", "layers.")
_EMBEDDING_MARKERS = ("embed", "lm_head", "wte", "wpe", "word_embeddings", "embed_out")
# Linear layers of the trunk outside the decoder layers (Gemma-4 projects the embedding to its
# per-layer inputs); other trunk matrices are embeddings.
_TRUNK_LINEAR_MARKERS = ("per_layer_model_projection",)
_OUTPUT_MARKERS = ("lm_head", "embed_out")
# The decoder layer a tensor belongs to; a vision or audio tower's layers are not the decoder's.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_TOWER_MARKERS = ("vision", "visual", "audio", "mm_projector", "multi_modal_projector")


@dataclass(frozen=True)
class TensorRecord:
    """One tensor as a safetensors header describes it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def role(self) -> str:
        """'scale', 'packed', 'linear', 'embedding', 'small' or 'other'."""
        name = self.name
        scale_named = name.endswith(_SCALE_SUFFIXES) and not name.endswith(
            _WEIGHTS_NAMED_LIKE_SCALES
        )
        if self.dtype == "F8_E8M0" or scale_named or ".quant_state" in name:
            return "scale"  # an e8m0 tensor is always a block scale, never a weight
        if self.dtype in ("I64", "U64", "BOOL"):
            return "other"  # position ids and other bookkeeping
        if self.dtype not in _FLOAT_CODES:
            return "packed"
        if len(self.shape) < 2:
            return "small"
        if any(marker in name for marker in _EMBEDDING_MARKERS):
            return "embedding"
        if any(marker in name for marker in _LAYER_MARKERS + _TRUNK_LINEAR_MARKERS):
            return "linear"
        return "embedding"

    @property
    def logical_parameters(self) -> int:
        """Weights this tensor stands for, with packed formats unpacked (0 for scales)."""
        role = self.role
        if role in ("scale", "other"):
            return 0
        if role != "packed":
            return self.elements
        if self.dtype in ("U8", "I8"):
            # Byte containers hold two 4-bit values when the name says so (MXFP4 `_blocks`,
            # compressed-tensors `weight_packed`); 8-bit integer weights count one each.
            return self.elements * (2 if name_is_4bit(self.name) else 1)
        if self.dtype in ("I32", "U32"):
            return self.elements * 32 // 4  # AWQ/GPTQ pack eight 4-bit values per int32
        return self.elements  # F8 and F4 codes already count one value per element


def name_is_4bit(name: str) -> bool:
    """Whether a byte tensor's name marks it as packed 4-bit values."""
    return name.endswith(("_blocks", ".weight_packed")) or ".qweight" in name


def read_safetensors_header(path: str | os.PathLike[str]) -> tuple[TensorRecord, ...]:
    """Every tensor of one .safetensors file, read from its header alone (no weight is read)."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            head = handle.read(8)
            if len(head) != 8:
                problem = "shorter than the 8-byte header length"
                raise ValueError(problem)
            (length,) = struct.unpack("<Q", head)
            if length > _MAX_HEADER_BYTES:
                problem = f"header length {length} exceeds the format's 100 MB cap"
                raise ValueError(problem)
            header = json.loads(handle.read(length))
    except (OSError, ValueError) as exc:
        error = SizerError.build(
            f"cannot read the safetensors header of {str(file)!r}",
            f"{type(exc).__name__}: {exc}",
            "Re-download the file, or size the model from its config.json alone",
        )
        raise error from exc
    return tuple(_records(header, str(file)))


def _records(header: Mapping[str, Any], where: str) -> Iterable[TensorRecord]:
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, end = entry["data_offsets"]
            record = TensorRecord(name, str(entry["dtype"]), tuple(entry["shape"]), end - start)
        except (KeyError, TypeError, ValueError) as exc:
            error = SizerError.build(
                f"tensor {name!r} in {where} has a malformed header entry",
                f"{type(exc).__name__}: {exc}",
                "Re-download the file",
            )
            raise error from exc
        yield record


def safetensors_files(folder: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The checkpoint's .safetensors files in a model folder (all shards), sorted."""
    return tuple(sorted(Path(folder).glob("*.safetensors")))


@dataclass(frozen=True)
class ParameterCount:
    """Parameters of a model by part, derived from its config."""

    embedding: int
    unembedding: int
    attention: int
    dense_mlp: int
    routed_experts: int
    shared_experts: int
    routers: int
    norms_and_biases: int
    active_routed: int  # routed-expert parameters one token uses
    approximate_layers: tuple[int, ...] = ()  # mixer layers priced as attention (no exact rule)
    # Per decoder layer: (linear parameters other than routed experts, routed experts, norms
    # and biases); what a pipeline stage holds (`interp_sizer.stages`).
    per_layer: tuple[tuple[int, int, int], ...] = ()
    final_norm: int = 0

    @property
    def linear(self) -> int:
        """Parameters in linear layers (what quantize-on-load narrows)."""
        return (
            self.attention
            + self.dense_mlp
            + self.routed_experts
            + self.shared_experts
            + self.routers
        )

    @property
    def total(self) -> int:
        return self.embedding + self.unembedding + self.linear + self.norms_and_biases

    @property
    def active(self) -> int:
        """Parameters one token touches: everything but the experts it was not routed to."""
        return self.total - self.routed_experts + self.active_routed


def _attention_params(facts: ModelFacts, biased: bool, layer: int) -> int:
    d, heads = facts.d_model, facts.n_heads
    cfg = facts.extras.get("text_config", facts.extras) or facts.extras
    mla = facts.mla
    if mla is not None:
        qk = mla.qk_head_dim
        if mla.q_lora_rank:
            q = d * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk
        else:
            q = d * heads * qk
        kv_a = d * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
        kv_b = mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        return q + kv_a + kv_b + heads * mla.v_head_dim * d
    q_width = facts.q_width_at(layer) * (2 if facts.gated_attn_output else 1)
    # Projections of keys and values: none on a layer that reuses another's (Gemma-3n's and -4's KV
    # sharing), the key projection alone where keys double as values (its full layers).
    kv_projections = 2
    if facts.shares_kv(layer):
        kv_projections = 0
    elif cfg.get("attention_k_eq_v") and facts.layer_kind(layer) == "full":
        kv_projections = 1
    kv_width = facts.kv_width_at(layer)
    params = d * q_width + kv_projections * d * kv_width + facts.z_width_at(layer) * d
    if facts.qk_norm:
        params += (2 if kv_projections else 1) * facts.head_dim_at(layer)
    if biased or cfg.get("attention_bias") or cfg.get("bias"):
        params += q_width + kv_projections * kv_width + (d if biased else 0)
    return params


@dataclass(frozen=True)
class _PerLayerInputs:
    """Gemma-3n's and Gemma-4's per-layer inputs, by where the parameters sit.

    The table holds `hidden_size_per_layer_input` values per layer for each token of
    `vocab_size_per_layer_input`; the trunk projects the embedding to the same width per layer
    and normalises it; each block gates its output down to that width, projects it back up and
    normalises it. Gemma-4's blocks then scale their output by a learned scalar (a stored
    buffer); Gemma-3n's AltUp trunk adds its own parts, counted here too (see `_altup_parts`).
    """

    table: int = 0
    trunk_linear: int = 0
    trunk_norm: int = 0
    block_linear: int = 0
    block_norm: int = 0


def _per_layer_inputs(facts: ModelFacts) -> _PerLayerInputs:
    width = facts.per_layer_input_width
    if not width:
        return _PerLayerInputs()
    cfg = facts.extras.get("text_config", facts.extras) or facts.extras
    vocab = cfg.get("vocab_size_per_layer_input") or facts.vocab_size
    d, n = facts.d_model, facts.n_layers
    scalar = 1 if facts.altup_active_stream is None else 0  # Gemma-4's layer_scalar
    parts = _PerLayerInputs(vocab * n * width, d * n * width, width, 2 * d * width, d + scalar)
    return _altup_parts(facts, parts)


def _altup_parts(facts: ModelFacts, parts: _PerLayerInputs) -> _PerLayerInputs:
    """Gemma-3n's AltUp and LAuReL weights added to its per-layer-input parts.

    The trunk projects the embedding into each extra stream and back out of it before the final
    norm (2 (n-1) d x d matrices). Each block's AltUp holds its prediction coefficients (n^3),
    correction coefficients (n^2), a modality router (d x n) with its norm (d) and the corrected
    output's scale (d); its LAuReL branch two rank-r projections (d x r, r x d) and a norm (d).
    """
    if facts.altup_active_stream is None:
        return parts
    d, n = facts.d_model, facts.n_streams
    rank = facts.laurel_rank or 0
    return replace(
        parts,
        trunk_linear=parts.trunk_linear + 2 * (n - 1) * d * d,
        block_linear=parts.block_linear + n**3 + n * n + d * n + 2 * d * rank,
        block_norm=parts.block_norm + 3 * d,
    )


def _linear_attention_params(facts: ModelFacts) -> int | None:
    """Gated delta-net mixer (Qwen3-Next), from its `linear_*` keys; None when not stated."""
    dims = gated_delta_dims(facts.extras.get("text_config", facts.extras) or facts.extras)
    if dims is None:
        return None
    n_k, h_k, n_v, h_v, kernel = dims
    d = facts.d_model
    key_dim, value_dim = n_k * h_k, n_v * h_v
    in_proj = d * (2 * key_dim + 2 * value_dim) + d * 2 * n_v
    conv = (2 * key_dim + value_dim) * kernel
    return in_proj + conv + 2 * n_v + h_v + value_dim * d


def _mamba2_params(facts: ModelFacts) -> int | None:
    """Mamba-2 mixer (Nemotron-H), from its `mamba_*` keys; None when not stated. Its inner width
    is heads x head_dim (not expand x d_model); in_proj yields gate, x, B, C and one dt per head,
    the depthwise conv runs over x, B and C; dt_bias, A_log, D and the gated norm are vectors."""
    cfg = facts.extras
    keys = ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel")
    if not all(isinstance(cfg.get(k), int) for k in keys):
        return None
    heads, head_dim, groups, state, kernel = (cfg[k] for k in keys)
    d = facts.d_model
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state
    in_width = inner + conv_dim + heads
    conv = conv_dim * kernel + (conv_dim if cfg.get("use_conv_bias", True) else 0)
    biases = in_width + d if cfg.get("use_bias", False) else 0
    return d * in_width + conv + 3 * heads + inner + inner * d + biases


def _routed_attention_experts(facts: ModelFacts, layer: int) -> tuple[int, int]:
    """JetMoE's mixture of attention heads: (the shared key/value projection, one expert).

    Keys and values are projected once for all experts; each expert maps the input to its
    KV-width query block and its attention output back (two d x kv-width matrices). One router
    and one output bias sit beside the experts."""
    kv_width = facts.kv_width_at(layer)
    return 2 * facts.d_model * kv_width, 2 * facts.d_model * kv_width


def _mamba_keyed_mixer_params(facts: ModelFacts) -> int | None:
    """A Bamba or Falcon-H1 Mamba-2 mixer (Falcon-H1 runs one beside the attention in every
    layer), from its own `mamba_*` keys; None for other families or when they are not all
    stated. Laid out as Nemotron-H's (in_proj to gate, x, B, C and one dt per head; a depthwise
    conv over x, B and C; dt_bias, A_log and D per head), with the differences the family's row
    states (`FamilyConventions.mamba_keyed_mixer`)."""
    layout = facts.family.mamba_keyed_mixer
    cfg = facts.extras
    keys = ("mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_conv")
    if layout is None or not all(isinstance(cfg.get(k), int) for k in keys):
        return None
    from_d_ssm, norm_optional = layout.inner_from_d_ssm, layout.norm_only_with_flag
    out_bias_key = layout.out_bias_key
    heads, groups, state, kernel = (cfg[k] for k in keys)
    d = facts.d_model
    if from_d_ssm and "mamba_d_ssm" not in cfg:
        return None  # transformers' class default (1024) would be a guess about this file
    inner = cfg["mamba_d_ssm"] if from_d_ssm else None
    if inner is None:
        if not isinstance(cfg.get("mamba_expand"), int):
            return None
        inner = cfg["mamba_expand"] * d
    conv_dim = inner + 2 * groups * state
    in_width = inner + conv_dim + heads
    conv = conv_dim * kernel + (conv_dim if cfg.get("mamba_conv_bias", True) else 0)
    norm = inner if cfg.get("mamba_rms_norm", False) or not norm_optional else 0
    in_bias = in_width if cfg.get("mamba_proj_bias", False) else 0
    out_bias = d if cfg.get(out_bias_key, False) else 0
    return d * in_width + in_bias + conv + 3 * heads + norm + inner * d + out_bias


def parameter_count(facts: ModelFacts) -> ParameterCount:
    """Parameters by part from the config's dimensions (one fact, one place: `ModelFacts`)."""
    d, vocab = facts.d_model, facts.vocab_size
    biased = facts.biases
    mlp_matrices = 3 if facts.gated_mlp else 2
    embedding = vocab * d
    if facts.learned_positions and facts.max_position_embeddings:
        embedding += facts.max_position_embeddings * d
    unembedding = 0 if facts.tied_embeddings else vocab * d
    norm_width = 2 * d if biased else d  # LayerNorm carries a bias beside its gain
    # A single-sublayer trunk (Nemotron-H) has one pre-norm per layer, before its one sublayer.
    norms_per_layer = 1 if facts.single_sublayer else 2
    norms_per_layer += 2 if facts.sandwich_norms and not facts.post_norms_only else 0
    norms = facts.n_layers * norms_per_layer * norm_width + norm_width  # + the final norm

    attention = dense = routed = shared = routers = active_routed = 0
    approximate: list[int] = []
    per_layer: list[tuple[int, int, int]] = []
    linear_layer = _linear_attention_params(facts)
    mamba_layer = _mamba2_params(facts)
    keyed_mixer = _mamba_keyed_mixer_params(facts)
    beside_layer = keyed_mixer if facts.ssm_beside_attention else None
    if mamba_layer is None and not facts.ssm_beside_attention:
        mamba_layer = keyed_mixer
    inputs = _per_layer_inputs(facts)
    embedding += inputs.table
    dense += inputs.trunk_linear
    norms += inputs.trunk_norm
    dense_beside = facts.dense_beside_experts
    for layer in range(facts.n_layers):
        before = (attention + dense + shared + routers, routed, norms)
        attention_layer = _attention_params(facts, biased, layer)
        if not facts.has_mixer(layer):
            pass  # an MLP-only layer of a single-sublayer trunk
        elif facts.attends(layer) and facts.routed_attention and facts.moe is not None:
            kv_projection, expert = _routed_attention_experts(facts, layer)
            attention += kv_projection
            routed += facts.moe.n_experts * expert
            active_routed += facts.moe.experts_per_token * expert
            routers += d * facts.moe.n_experts
            norms += d  # the output bias of the attention experts
        elif facts.attends(layer):
            attention += attention_layer
            if beside_layer is not None:
                attention += beside_layer
            elif facts.ssm_beside_attention:
                approximate.append(layer)  # its Mamba-2 mixer's keys are not all stated
        elif facts.layer_kind(layer) == "linear_attention" and linear_layer is not None:
            attention += linear_layer
        elif facts.layer_kind(layer) == "mamba" and mamba_layer is not None:
            attention += mamba_layer
        else:
            attention += attention_layer
            approximate.append(layer)
        dense += inputs.block_linear
        norms += inputs.block_norm
        if facts.is_sparse(layer) and dense_beside:
            # Gemma-4: the dense MLP beside the experts, the experts' three norms of their own
            # and the router's per-channel and per-expert scales (vectors, like norm gains).
            dense += mlp_matrices * d * facts.d_mlp_at(layer)
            norms += 3 * norm_width + d + (facts.moe.n_experts if facts.moe else 0)
        if not facts.has_mlp(layer):
            pass  # a mixer-only layer of a single-sublayer trunk
        elif facts.is_sparse(layer):
            moe = facts.moe
            assert moe is not None
            expert = mlp_matrices * d * moe.d_expert
            routed += moe.n_experts * expert
            active_routed += moe.experts_per_token * expert
            routers += d * moe.n_experts
            if moe.d_shared_expert:
                shared += mlp_matrices * d * moe.d_shared_expert
            if facts.routed_attention:
                norms += d  # JetMoE's MLP experts share one output bias too
        else:
            dense += mlp_matrices * d * facts.d_mlp_at(layer)
            if biased:
                norms += facts.d_mlp_at(layer) + d
        per_layer.append(
            (
                attention + dense + shared + routers - before[0],
                routed - before[1],
                norms - before[2] + norms_per_layer * norm_width,
            )
        )
    return ParameterCount(
        embedding=embedding,
        unembedding=unembedding,
        attention=attention,
        dense_mlp=dense,
        routed_experts=routed,
        shared_experts=shared,
        routers=routers,
        norms_and_biases=norms,
        active_routed=active_routed,
        approximate_layers=tuple(approximate),
        per_layer=tuple(per_layer),
        final_norm=norm_width,
    )


@dataclass(frozen=True)
class WeightPart:
    """The weights of one place in the model (a decoder layer, the embeddings, the head)."""

    linear_elements: int = 0  # narrowed by quantize-on-load
    float_elements: int = 0  # embeddings, norms, biases: always at the model dtype
    packed_bytes: int = 0  # pre-quantized payload and scales, as stored

    def load_bytes(self, dtype: str, quantization: Quantization | None = None) -> int:
        width = dtype_bytes(dtype)
        linear = (
            math.ceil(self.linear_elements * quantization.bytes_per_weight)
            if quantization is not None
            else self.linear_elements * width
        )
        return linear + self.float_elements * width + self.packed_bytes

    def __add__(self, other: WeightPart) -> WeightPart:
        return WeightPart(
            self.linear_elements + other.linear_elements,
            self.float_elements + other.float_elements,
            self.packed_bytes + other.packed_bytes,
        )


@dataclass(frozen=True)
class WeightInventory:
    """What a checkpoint stores, split by how each part responds to dtype and quantization."""

    source: str  # 'safetensors' (exact) or 'config' (derived)
    linear_elements: int  # float weights of linear layers: narrowed by quantize-on-load
    embedding_elements: int  # float embeddings / lm_head: always at the model dtype
    small_elements: int  # norms, biases: always at the model dtype
    packed_bytes: int  # pre-quantized payload and its scales: priced as stored
    stored_bytes: int  # bytes on disk (exact for safetensors, estimated from config)
    bytes_by_dtype: Mapping[str, int] = field(default_factory=dict)
    parameters: int = 0  # logical parameters, packed formats unpacked
    files: tuple[str, ...] = ()
    checkpoint_quantization: str | None = None
    # Where the weights sit, for pipeline stages: per decoder layer (by index), the input side
    # (embeddings, and anything outside the decoder such as a vision tower) and the output side
    # (final norm, lm_head). Together they are the whole inventory.
    layer_parts: Mapping[int, WeightPart] = field(default_factory=dict)
    input_part: WeightPart = WeightPart()
    output_part: WeightPart = WeightPart()

    def load_bytes(self, dtype: str, quantization: Quantization | None = None) -> int:
        """Bytes the weights take in memory when loaded in `dtype` with `quantization`."""
        floats = self.embedding_elements + self.small_elements
        whole = WeightPart(self.linear_elements, floats, self.packed_bytes)
        return whole.load_bytes(dtype, quantization)


def checkpoint_inventory(
    records: Iterable[TensorRecord], files: Iterable[str] = ()
) -> WeightInventory:
    """The inventory of a checkpoint from its headers: exact bytes, per dtype, per role."""
    linear = embedding = small = packed = stored = parameters = 0
    by_dtype: dict[str, int] = {}
    quantized = False
    layers: dict[int, WeightPart] = {}
    sides = {"input": WeightPart(), "output": WeightPart()}
    for record in records:
        stored += record.nbytes
        by_dtype[record.dtype] = by_dtype.get(record.dtype, 0) + record.nbytes
        parameters += record.logical_parameters
        role = record.role
        if role == "linear":
            linear += record.elements
            part = WeightPart(linear_elements=record.elements)
        elif role == "embedding":
            embedding += record.elements
            part = WeightPart(float_elements=record.elements)
        elif role == "small":
            small += record.elements
            part = WeightPart(float_elements=record.elements)
        else:
            packed += record.nbytes
            quantized = quantized or role in ("packed", "scale")
            part = WeightPart(packed_bytes=record.nbytes)
        layer = _layer_of(record.name)
        if layer is not None:
            layers[layer] = layers.get(layer, WeightPart()) + part
        else:
            side = _side_of(record)
            sides[side] = sides[side] + part
    return WeightInventory(
        source="safetensors",
        linear_elements=linear,
        embedding_elements=embedding,
        small_elements=small,
        packed_bytes=packed,
        stored_bytes=stored,
        bytes_by_dtype=dict(sorted(by_dtype.items())),
        parameters=parameters,
        files=tuple(files),
        checkpoint_quantization="packed" if quantized else None,
        layer_parts=dict(sorted(layers.items())),
        input_part=sides["input"],
        output_part=sides["output"],
    )


def _layer_of(name: str) -> int | None:
    if any(marker in name for marker in _TOWER_MARKERS):
        return None
    found = _LAYER_INDEX.search(name)
    return int(found.group(1)) if found else None


def _side_of(record: TensorRecord) -> str:
    """Outside the decoder layers: the head and the final norm are output, the rest input."""
    if any(marker in record.name for marker in _OUTPUT_MARKERS):
        return "output"
    if record.role == "small" and not any(m in record.name for m in _TOWER_MARKERS):
        return "output"  # the final norm (model.norm, transformer.ln_f, ...)
    return "input"


def config_inventory(
    facts: ModelFacts, native_dtype: str, quant: CheckpointQuantization | None
) -> WeightInventory:
    """The inventory estimated from the config: parameter counts at the checkpoint's dtype."""
    count = parameter_count(facts)
    width = dtype_bytes(native_dtype)
    linear, packed = count.linear, 0
    if quant is not None:
        packed_params = count.routed_experts if quant.experts_only else count.linear
        linear -= packed_params
        packed = math.ceil(packed_params * quant.bytes_per_weight)
    float_elements = linear + count.embedding + count.unembedding + count.norms_and_biases
    stored = float_elements * width + packed
    layers: dict[int, WeightPart] = {}
    for index, (plain, routed, small) in enumerate(count.per_layer):
        packed_here = 0
        if quant is not None:
            packed_here = routed if quant.experts_only else plain + routed
        layers[index] = WeightPart(
            linear_elements=plain + routed - packed_here,
            float_elements=small,
            packed_bytes=math.ceil(packed_here * quant.bytes_per_weight) if quant else 0,
        )
    return WeightInventory(
        source="config",
        linear_elements=linear,
        embedding_elements=count.embedding + count.unembedding,
        small_elements=count.norms_and_biases,
        packed_bytes=packed,
        stored_bytes=stored,
        bytes_by_dtype={},
        parameters=count.total,
        checkpoint_quantization=quant.method if quant is not None else None,
        layer_parts=layers,
        input_part=WeightPart(float_elements=count.embedding),
        output_part=WeightPart(float_elements=count.unembedding + count.final_norm),
    )
