"""What a model is, read from its `config.json` alone — before anything is loaded.

`ModelFacts` is the one place dimensions and architectural traits live. The backends resolve
points with it, the registry decides which points exist with it, the sizer prices memory with it
and the validator plans layers with it. It never imports transformers: a config is a mapping.

Reading is literal where the config speaks and falls back, key by key, to what transformers'
config class for that `model_type` assumes when it does not: published files omit keys equal to
the class default (Gemma-3's nested `text_config` names four keys), so a reader that refused
every gap would refuse real checkpoints. A key that is missing with no default, or present with
a value that cannot be right, is a `ConfigError` naming the key; nothing is guessed.

Conventions the fields follow:

- `architecture` is the outer `architectures[0]` (the wrapper's class for a multimodal model);
  `model_type` is the text model's (`gemma3_text` for Gemma-3-4b), whose conventions apply.
- `head_dim` is the per-head width of q and k: an explicit `head_dim` wins (Gemma, Qwen3), MLA
  models record `qk_nope_head_dim + qk_rope_head_dim`, and only then `d_model // n_heads`.
- Where widths differ by layer (Gemma-4's full layers: wider heads, their own K/V head count;
  its KV-sharing layers: a doubled MLP), `layer_head_dims`, `layer_kv_heads` and `layer_d_mlp`
  hold one entry per layer and `head_dim_at(layer)` & co. read them; they are empty, and
  `head_dim` / `n_kv_heads` / `d_mlp` hold for every layer, on every other family.
  `head_dim`, `n_kv_heads` and `d_mlp` are then the config's own (Gemma-4's sliding layers').
- `kv_source_layers` (Gemma-3n's and Gemma-4's `num_kv_shared_layers`): per layer, the layer
  whose keys and values its attention reads (`kv_source(layer)`, the layer itself unless
  `shares_kv(layer)`); a sharing layer projects no keys or values: the last earlier layer of
  its own kind does.
- `d_mlp` is the width of the dense MLP. When every layer is a routed mixture of experts it is 0,
  even if the config carries an `intermediate_size`: on Mixtral and gpt-oss that number is the
  width of one expert (see `moe.d_expert`), and on Qwen3-MoE it is the width of a dense layer
  that this checkpoint never builds.
- `layer_kinds` always has one entry per layer.
- `sliding_window` is set only when some layer actually slides (Qwen2.5 states a window that
  `use_sliding_window: false` turns off).
- `embedding_multiplier` is Granite's `embedding_multiplier`, or sqrt(d_model) on the Gemma
  family, which scales the embedding output by it (transformers rounds it to the model dtype).
- `index_topk` is set on DeepSeek-V3.2 only: its attention is causal softmax attention (layer
  kind "full") restricted, per query, to the keys its lightning indexer keeps.
- `sandwich_norms` is True on Gemma-2/3, GLM-4, OLMo-2/3, EXAONE-4 and FlexOlmo; the last four
  have the post norms only, with no norm before attention or the MLP, which `post_norms_only`
  tells apart.
- `altup_active_stream` is set on Gemma-3n only: its `n_streams` residual streams are AltUp's
  (predicted and corrected around each block, attention and MLP run on this one), not
  hyper-connections. `activation_sparsity` is the per-layer gaussian top-k target of its MLP
  gates (0.0: a plain activation).
- The family conventions a config leaves unsaid (default tying, biases, QK-norm, ...) are tables
  in `interp_core.family_conventions`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from interp_core import family_conventions as conventions
from interp_core.errors import ConfigError, PointUnsupported
from interp_core.expert_reading import ExpertReading, MoEFacts
from interp_core.layer_kind_reading import LayerKindReading, is_int
from interp_core.layer_widths import LayerWidthReading

__all__ = [
    "ATTENDING_LAYER_KINDS",
    "COMPRESSED_LAYER_KINDS",
    "LAYER_KINDS",
    "MLAFacts",
    "MoEFacts",
    "ModelFacts",
]

# Per-layer mixer kinds. "full", "sliding" and "chunked" are softmax attention over token keys;
# the two compressed kinds (DeepSeek-V4's CSA and HCA) are softmax attention over a sliding
# window of tokens plus compressed entries (one per `compress_rates[kind]` tokens), so they have
# z and attn_out but no token-by-token attention matrix; the rest have no attention at all.
# "mlp" is a layer with no token mixer at all: its one sublayer is an MLP or mixture of experts
# (Nemotron-H, `ModelFacts.single_sublayer`).
COMPRESSED_LAYER_KINDS = frozenset({"compressed_sparse", "heavily_compressed"})
LAYER_KINDS = (
    "full",
    "sliding",
    "chunked",
    "compressed_sparse",
    "heavily_compressed",
    "linear_attention",
    "recurrent",
    "mamba",
    "conv",
    "mlp",
)
ATTENDING_LAYER_KINDS = frozenset({"full", "sliding", "chunked", *COMPRESSED_LAYER_KINDS})


@dataclass(frozen=True)
class MLAFacts:
    """Multi-head latent attention (DeepSeek-V2/V3, MiniCPM3, ...): no per-head value projection."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class ModelFacts:
    """Dimensions and traits of one causal LM, derived from its config."""

    architecture: str  # first entry of `architectures`, else the model_type
    model_type: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int  # per-head width of q/k (explicit `head_dim` wins over d_model // n_heads)
    d_mlp: int  # dense MLP intermediate width (0 when no layer is dense)
    vocab_size: int
    tied_embeddings: bool = False
    layer_kinds: tuple[str, ...] = ()  # one of LAYER_KINDS per layer
    sliding_window: int | None = None
    moe: MoEFacts | None = None
    mla: MLAFacts | None = None
    qk_norm: bool = False
    sandwich_norms: bool = False  # post-attention and post-MLP norms inside the residual branch
    parallel_attn_mlp: bool = False  # attention and MLP both read the same resid_pre
    gated_mlp: bool = True  # act(gate) * up; False for plain fc -> act -> proj
    biases: bool = False  # linear layers carry biases and the norms are LayerNorms with one
    learned_positions: bool = False  # a learned absolute position-embedding table (GPT-2's wpe)
    gated_attn_output: bool = False  # an output gate multiplies z before o_proj (Qwen3-Next)
    shared_key_value: bool = False  # keys and values are one tensor (DeepSeek-V4: K = V)
    routed_attention: bool = False  # query/output projections are routed experts (JetMoE)
    qkv_clip: float | None = None  # q, k and v clamped to ±this after projection (DBRX)
    # Each sublayer leaves alpha*norm(x) + beta*out: the skip path is the normed input (MiniMax).
    normed_skip: bool = False
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    logit_multiplier: float | None = None  # applied to logits before any softcap
    residual_multiplier: float | None = None  # scales each sublayer's write into the residual
    embedding_multiplier: float | None = None  # scales the embedding output (Gemma: sqrt(d_model))
    n_streams: int = 1  # hyper-connection residual streams (DeepSeek-V4 mHC); 1 = ordinary trunk
    # DeepSeek-V4: tokens per compressed entry, per compressed layer kind present (kind, rate).
    compress_rates: tuple[tuple[str, int], ...] = ()
    # DeepSeek-V3.2's sparse attention: each query attends to at most this many of its visible
    # keys, the ones a lightning indexer scores highest (the rest are masked like future tokens).
    index_topk: int | None = None
    # Falcon-H1: a Mamba-2 mixer runs beside the attention on the same normed input in every
    # layer; the block sums the two (each scaled) itself, so no module returns the mixer write.
    ssm_beside_attention: bool = False
    # Nemotron-H: each layer is one sublayer behind one norm and one residual add, its token
    # mixer (the layer kind says which) or, on "mlp" layers, its MLP or experts alone.
    single_sublayer: bool = False
    # Gemma-3n: the residual streams are AltUp's (see the module docstring), LAuReL runs beside
    # attention, and some layers' MLP gates are sparsified (gaussian top-k).
    altup_active_stream: int | None = None
    laurel_rank: int | None = None
    activation_sparsity: tuple[float, ...] = ()
    # Per-layer widths, one entry per layer, only where they differ by layer (Gemma-4); empty
    # means head_dim / n_kv_heads / d_mlp hold for every layer.
    layer_head_dims: tuple[int, ...] = ()
    layer_kv_heads: tuple[int, ...] = ()
    layer_d_mlp: tuple[int, ...] = ()
    # Per layer, the layer whose keys and values its attention reads (KV sharing: Gemma-3n, -4);
    # empty when every layer computes its own.
    kv_source_layers: tuple[int, ...] = ()
    # Gemma-4's per-layer input width: each block gates a per-layer input of this width into
    # the residual after its MLP (0: none).
    per_layer_input_width: int = 0
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None  # the checkpoint's native dtype as the config states it
    extras: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelFacts:
        """Read the facts of a HuggingFace `config.json` mapping (no transformers needed).

        Multimodal wrappers (Gemma-3-4b, Llama-4, Mistral-3) are read through their nested
        `text_config`; `architecture` stays the wrapper's `architectures[0]`. Raises
        `ConfigError` naming the key when a required key is missing or a value cannot be right.
        """
        return _read_facts(config)

    @property
    def post_norms_only(self) -> bool:
        """Whether the sandwich norms come without pre-norms (OLMo-2/3 normalise only after)."""
        return self.model_type in conventions.POST_NORM_ONLY_TYPES

    # --- per-layer predicates -------------------------------------------------------------------
    def _check_layer(self, layer: int) -> None:
        if not 0 <= layer < self.n_layers:
            message = (
                f"layer {layer} does not exist: this {self.architecture} has layers "
                f"0..{self.n_layers - 1}"
            )
            raise PointUnsupported(message)

    def layer_kind(self, layer: int) -> str:
        self._check_layer(layer)
        return self.layer_kinds[layer] if self.layer_kinds else "full"

    def attends(self, layer: int) -> bool:
        """Whether `layer` computes softmax attention (over tokens, or compressed entries too)."""
        return self.layer_kind(layer) in ATTENDING_LAYER_KINDS

    def has_mixer(self, layer: int) -> bool:
        """Whether `layer` has a token mixer (every layer but a single-sublayer MLP layer)."""
        return self.layer_kind(layer) != "mlp"

    def has_mlp(self, layer: int) -> bool:
        """Whether `layer` has an MLP or experts (on single-sublayer trunks, its "mlp" layers)."""
        return not self.single_sublayer or self.layer_kind(layer) == "mlp"

    def attends_tokens_only(self, layer: int) -> bool:
        """Whether `layer`'s attention matrix has one key per token (not DeepSeek-V4's
        compressed layers, whose keys are window tokens followed by compressed entries)."""
        return self.attends(layer) and self.layer_kind(layer) not in COMPRESSED_LAYER_KINDS

    def compress_rate(self, layer: int) -> int | None:
        """Tokens per compressed entry on a DeepSeek-V4 compressed layer; None elsewhere."""
        return dict(self.compress_rates).get(self.layer_kind(layer))

    def sparsity_at(self, layer: int) -> float:
        """The gaussian top-k sparsity of `layer`'s MLP gate (0.0: every unit passes)."""
        self._check_layer(layer)
        return self.activation_sparsity[layer] if self.activation_sparsity else 0.0

    def head_dim_at(self, layer: int) -> int:
        """The per-head width of q and k (and v) at `layer`."""
        self._check_layer(layer)
        return self.layer_head_dims[layer] if self.layer_head_dims else self.head_dim

    def kv_heads_at(self, layer: int) -> int:
        """The K/V head count at `layer`."""
        self._check_layer(layer)
        return self.layer_kv_heads[layer] if self.layer_kv_heads else self.n_kv_heads

    def d_mlp_at(self, layer: int) -> int:
        """The dense MLP's width at `layer`."""
        self._check_layer(layer)
        return self.layer_d_mlp[layer] if self.layer_d_mlp else self.d_mlp

    def kv_source(self, layer: int) -> int:
        """The layer whose keys and values `layer` attends over (itself unless it shares)."""
        self._check_layer(layer)
        return self.kv_source_layers[layer] if self.kv_source_layers else layer

    def shares_kv(self, layer: int) -> bool:
        """Whether `layer` reuses another layer's keys and values instead of projecting its own."""
        return self.kv_source(layer) != layer

    @property
    def widths_vary(self) -> bool:
        """Whether head widths, K/V head counts or MLP widths differ between layers."""
        return bool(self.layer_head_dims or self.layer_kv_heads or self.layer_d_mlp)

    def is_sparse(self, layer: int) -> bool:
        """Whether `layer`'s MLP is a routed mixture of experts."""
        self._check_layer(layer)
        return self.moe is not None and layer in self.moe.sparse_layers

    def q_width_at(self, layer: int) -> int:
        return self.n_heads * self.head_dim_at(layer) if self.mla is None else self.q_width

    def kv_width_at(self, layer: int) -> int:
        return (
            self.kv_heads_at(layer) * self.head_dim_at(layer) if self.mla is None else self.kv_width
        )

    def z_width_at(self, layer: int) -> int:
        return self.n_heads * self.head_dim_at(layer) if self.mla is None else self.z_width

    @property
    def q_width(self) -> int:
        """Width of the concatenated query heads (n_heads * head_dim, MLA-aware)."""
        if self.mla is not None:
            return self.n_heads * self.mla.qk_head_dim
        return self.n_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of the concatenated key (or value) heads: n_kv_heads * head_dim."""
        if self.mla is not None:
            return self.n_kv_heads * self.mla.qk_head_dim
        return self.n_kv_heads * self.head_dim

    @property
    def z_width(self) -> int:
        """Width of the o_proj input (n_heads * v_head_dim; differs from q_width on MLA)."""
        if self.mla is not None:
            return self.n_heads * self.mla.v_head_dim
        return self.n_heads * self.head_dim

    @property
    def n_sparse_layers(self) -> int:
        return len(self.moe.sparse_layers) if self.moe is not None else 0

    @property
    def has_dense_layers(self) -> bool:
        if self.single_sublayer:
            return any(self.has_mlp(i) and not self.is_sparse(i) for i in range(self.n_layers))
        return self.n_sparse_layers < self.n_layers

    @property
    def has_dense_mlp(self) -> bool:
        """Whether some layer has a dense MLP: a dense layer, or one beside the experts."""
        return self.has_dense_layers or self.dense_beside_experts

    @property
    def dense_beside_experts(self) -> bool:
        """Whether routed layers run their experts beside a dense MLP of their own (Gemma-4)."""
        return self.model_type in conventions.DENSE_BESIDE_EXPERTS_TYPES


# --- reading a config -------------------------------------------------------------------------
_NOT_STATED = object()


def _read_facts(config: Mapping[str, Any]) -> ModelFacts:
    if not isinstance(config, Mapping):
        message = (
            f"a model config must be a mapping (the parsed `config.json`), not "
            f"{type(config).__name__}: `ModelFacts.from_config` reads keys from it. Pass "
            f"`json.load(open('config.json'))`, or `PretrainedConfig.to_dict()` for a live config"
        )
        raise ConfigError(message)
    reader = _Reader(config)

    n_layers = reader.layer_count()
    d_model = reader.positive_int("the residual width", "hidden_size", "n_embd", "d_model")
    n_heads = reader.n_heads()
    vocab_size = reader.positive_int("the vocabulary size", "vocab_size", "padded_vocab_size")
    mla = reader.mla()
    moe = reader.moe(n_layers)
    layer_kinds = reader.layer_kinds(n_layers)
    # Compressed layers slide too: their token keys are a window, beside the compressed entries.
    slides = bool({"sliding", "chunked", *COMPRESSED_LAYER_KINDS} & set(layer_kinds))
    model_type = reader.model_type
    altup = conventions.ALTUP_TYPES
    n_kv_heads = reader.kv_heads(n_heads)
    head_dim = reader.head_dim(d_model, n_heads, mla)
    d_mlp = reader.d_mlp(d_model, n_layers, moe)
    overrides = reader.layer_overrides(n_layers)
    kv_sources = reader.kv_source_layers(layer_kinds)

    return ModelFacts(
        architecture=reader.architecture,
        model_type=model_type,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        d_mlp=d_mlp,
        vocab_size=vocab_size,
        tied_embeddings=reader.tied_embeddings(),
        layer_kinds=layer_kinds,
        sliding_window=reader.sliding_window() if slides else None,
        moe=moe,
        mla=mla,
        qk_norm=reader.qk_norm(),
        sandwich_norms=model_type in conventions.SANDWICH_NORM_TYPES,
        parallel_attn_mlp=reader.parallel_attn_mlp(),
        gated_mlp=model_type not in conventions.UNGATED_MLP_TYPES,
        biases=model_type in conventions.BIASED_TYPES,
        learned_positions=model_type in conventions.LEARNED_POSITION_TYPES,
        gated_attn_output=bool(reader.get("attn_output_gate")[1])
        or model_type in conventions.GATED_ATTN_OUTPUT_TYPES,
        shared_key_value=model_type in conventions.SHARED_KEY_VALUE_TYPES,
        routed_attention=model_type in conventions.ROUTED_ATTENTION_TYPES,
        qkv_clip=reader.number("clip_qkv"),
        normed_skip=model_type in conventions.NORMED_SKIP_TYPES,
        attn_logit_softcap=reader.number("attn_logit_softcapping"),
        final_logit_softcap=reader.number("final_logit_softcapping"),
        logit_multiplier=reader.logit_multiplier(),
        residual_multiplier=reader.number("residual_multiplier"),
        embedding_multiplier=reader.embedding_multiplier(d_model),
        n_streams=reader.n_streams(),
        compress_rates=reader.compress_rates(layer_kinds),
        index_topk=reader.positive_int("the indexer's top-k", "index_topk")
        if model_type in conventions.INDEXED_ATTENTION_TYPES
        else None,
        ssm_beside_attention=model_type in conventions.PARALLEL_SSM_TYPES,
        single_sublayer=model_type in conventions.SINGLE_SUBLAYER_TYPES,
        altup_active_stream=reader.altup_active_stream(),
        laurel_rank=reader.optional_int("laurel_rank") if model_type in altup else None,
        activation_sparsity=reader.activation_sparsity(n_layers) if model_type in altup else (),
        layer_head_dims=reader.layer_head_dims(overrides, head_dim, n_layers),
        layer_kv_heads=reader.layer_kv_heads(overrides, n_kv_heads, n_heads, n_layers),
        layer_d_mlp=reader.layer_d_mlp(overrides, d_mlp, kv_sources, n_layers),
        kv_source_layers=kv_sources,
        per_layer_input_width=reader.per_layer_input_width(),
        max_position_embeddings=reader.optional_int(
            # Kimi Linear saves its context length as `model_max_length`.
            "max_position_embeddings",
            "n_positions",
            "max_sequence_length",
            "max_seq_len",
            "model_max_length",
        ),
        torch_dtype=reader.torch_dtype(),
        # A copy, so later edits to the caller's dict do not change facts already read.
        extras=dict(config),
    )


class _Reader(LayerKindReading, LayerWidthReading, ExpertReading):
    """Looks keys up in the text model's config, then in its family's class defaults."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.outer = config
        self.cfg = self._text_config(config)
        self.model_type = self._model_type()
        self.architecture = self._architecture()
        self.defaults = conventions.CLASS_DEFAULTS.get(self.model_type, {})
        for nested in conventions.NESTED_CONFIG_KEYS.get(self.model_type, ()):
            inner = self.cfg.get(nested)
            if isinstance(inner, Mapping):
                # A key stated at the top wins (the nested ones carry an empty model_type).
                self.cfg = {**inner, **self.cfg}

    # --- lookups ---------------------------------------------------------------------------
    def get(self, *keys: str) -> tuple[str | None, Any]:
        """The first of `keys` the config states, with its value; `(None, None)` if none is.

        A key written as null counts as stated-as-absent: transformers passes the None to the
        config class, which derives the value itself, so the class default does not apply.
        """
        stated_null = False
        for key in keys:
            value = self.cfg.get(key, _NOT_STATED)
            if value is None:
                stated_null = True
            elif value is not _NOT_STATED:
                return key, value
        if not stated_null:
            for key in keys:
                if key in self.defaults:
                    return key, self.defaults[key]
        return None, None

    def positive_int(self, what: str, *keys: str) -> int:
        key, value = self.get(*keys)
        if key is None:
            tried = ", ".join(f"`{k}`" for k in keys)
            message = (
                f"the {self.model_type} config states {what} under none of {tried}: every model "
                f"needs it and no default stands in. Add `{keys[0]}` with the checkpoint's value"
            )
            raise ConfigError(message)
        return self._checked_int(key, value, what, minimum=1)

    def optional_int(self, *keys: str, minimum: int = 1) -> int | None:
        key, value = self.get(*keys)
        if key is None:
            return None
        return self._checked_int(key, value, "an integer", minimum=minimum)

    def number(self, key: str) -> float | None:
        _, value = self.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config, which is not a number: "
                f"it must be a number or null. Fix `{key}`"
            )
            raise ConfigError(message)
        return float(value)

    def _checked_int(self, key: str, value: Any, what: str, minimum: int) -> int:
        if not is_int(value) or value < minimum:
            bound = "a positive" if minimum == 1 else "a non-negative"
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config, which cannot be {what}: "
                f"it must be {bound} integer. Fix `{key}`"
            )
            raise ConfigError(message)
        return value

    # --- identity ----------------------------------------------------------------------------
    @staticmethod
    def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
        nested = config.get("text_config")
        if nested is None:
            return config
        if not isinstance(nested, Mapping):
            message = (
                f"`text_config` is a {type(nested).__name__}, not a mapping: a multimodal "
                f"wrapper keeps its language model's keys there. Fix `text_config`, or pass the "
                f"text model's own mapping"
            )
            raise ConfigError(message)
        return nested

    def _model_type(self) -> str:
        # The text model's type decides every trait read below; the wrapper's is a fallback.
        for source in (self.cfg, self.outer):
            value = source.get("model_type")
            if isinstance(value, str) and value:
                return value
        message = (
            "the config has no `model_type`: it names the family whose conventions fill the "
            "keys a published config leaves out. Add the `model_type` the checkpoint was saved "
            "with (e.g. `llama`, `qwen3`)"
        )
        raise ConfigError(message)

    def _architecture(self) -> str:
        architectures = self.outer.get("architectures")
        if isinstance(architectures, Sequence) and not isinstance(architectures, str):
            if architectures and isinstance(architectures[0], str):
                return architectures[0]
        return self.model_type

    def torch_dtype(self) -> str | None:
        # Wrappers often state the dtype once, at the top.
        for source in (self.cfg, self.outer):
            for key in ("torch_dtype", "dtype"):
                value = source.get(key)
                if isinstance(value, str):
                    return value
        return None

    # --- attention ---------------------------------------------------------------------------
    def n_heads(self) -> int:
        keys = ("num_attention_heads", "n_head", "n_heads")
        if self.get(*keys)[0] is None and self.model_type in conventions.ROUTED_ATTENTION_TYPES:
            # JetMoE derives it: each of a token's routed experts brings one query per K/V head.
            kv = self.positive_int("the number of K/V heads", "num_key_value_heads")
            return kv * self.positive_int("how many experts each token uses", "num_experts_per_tok")
        return self.positive_int("the number of attention heads", *keys)

    def kv_heads(self, n_heads: int) -> int:
        key, value = self.get("num_key_value_heads")
        if key is None:
            if self.cfg.get("new_decoder_architecture"):
                # Falcon-40B style: grouped K/V, counted by `num_kv_heads`.
                key, value = self.get("num_kv_heads")
            elif self.cfg.get("multi_query"):
                # GPT-BigCode and Falcon-7B attend with one K/V head whatever else is stated.
                return 1
            else:
                key, value = self.get("num_kv_heads", "n_head_kv", "kv_n_heads")
        if key is None:
            return n_heads
        if not is_int(value) or value <= 0 or n_heads % value:
            message = (
                f"`{key}` is {value!r} in the {self.model_type} config: it must be a positive "
                f"integer dividing the {n_heads} attention heads, since each K/V head serves a "
                f"whole group of query heads. Fix `{key}`"
            )
            raise ConfigError(message)
        return value

    def head_dim(self, d_model: int, n_heads: int, mla: MLAFacts | None) -> int:
        if mla is not None:
            # MLA has no single head width; q and k are the nope and rope parts side by side.
            return mla.qk_head_dim
        head_dim = self.optional_int("head_dim", "kv_channels")  # JetMoE: kv_channels
        if head_dim is not None:
            return head_dim
        if d_model % n_heads:
            message = (
                f"the {self.model_type} config has no `head_dim` and its width {d_model} does "
                f"not split into {n_heads} equal heads, so the per-head width is unknown. Add "
                f"`head_dim`"
            )
            raise ConfigError(message)
        return d_model // n_heads

    def mla(self) -> MLAFacts | None:
        if self.get("kv_lora_rank")[0] is None:
            return None
        what = "a multi-head latent attention width"
        return MLAFacts(
            kv_lora_rank=self.positive_int(what, "kv_lora_rank"),
            qk_nope_head_dim=self.positive_int(what, "qk_nope_head_dim"),
            qk_rope_head_dim=self.positive_int(what, "qk_rope_head_dim"),
            v_head_dim=self.positive_int(what, "v_head_dim"),
            # Null on DeepSeek-V2-Lite: the query is projected directly, without a low rank.
            q_lora_rank=self.optional_int("q_lora_rank"),
        )

    def qk_norm(self) -> bool:
        if self.model_type in conventions.QK_NORM_AFTER_ROPE_TYPES:
            # Llama-4 states `use_qk_norm`, but its norm follows rotary: no QK-norm points.
            return False
        for key in ("qk_layernorm", "use_qk_norm", "qk_norm"):
            found, value = self.get(key)
            if found is not None:
                return bool(value)
        return self.model_type in conventions.QK_NORM_TYPES

    def parallel_attn_mlp(self) -> bool:
        if self.model_type == "falcon" and self.get("new_decoder_architecture")[1]:
            # Falcon-40B's decoder is parallel whatever `parallel_attn` says.
            return True
        for key in ("use_parallel_residual", "parallel_attn"):
            found, value = self.get(key)
            if found is not None:
                return bool(value)
        return (
            self.model_type in conventions.ALWAYS_PARALLEL_TYPES | conventions.PARALLEL_BY_DEFAULT
        )

    # --- layer kinds -------------------------------------------------------------------------
    def sliding_window(self) -> int | None:
        return self.optional_int("sliding_window", "attention_chunk_size")

    # --- MLP ---------------------------------------------------------------------------------
    def d_mlp(self, d_model: int, n_layers: int, moe: MoEFacts | None) -> int:
        dense_beside = self.model_type in conventions.DENSE_BESIDE_EXPERTS_TYPES
        if moe is not None and len(moe.sparse_layers) == n_layers and not dense_beside:
            return 0
        if self.model_type in conventions.SINGLE_SUBLAYER_TYPES:
            if "mlp" not in (self.block_types()[1] or ()):
                return 0  # Nemotron-3: its MLP layers are all mixtures of experts
        # Llama-4 states its dense width apart: intermediate_size is one expert's there.
        keys: tuple[str, ...] = (
            "intermediate_size_mlp",
            "intermediate_size",
            "n_inner",
            "ffn_dim",
            "ffn_hidden_size",
        )
        own_key = conventions.DENSE_MLP_WIDTH_KEYS.get(self.model_type)
        if own_key is not None:
            keys = (own_key,)
        key, stated = self.get(*keys)
        if isinstance(stated, list) and self.model_type in conventions.ALTUP_TYPES:
            # Gemma-3n states one width per layer, the same on every published checkpoint;
            # differing widths are read only from Gemma-4's per_layer_config (layer_widths).
            if not stated or len(set(stated)) != 1:
                message = (
                    f"`{key}` is {stated!r}: per-layer MLP widths that differ are not read "
                    f"from a Gemma-3n list (every published Gemma-3n states one width). State "
                    f"one width for every layer"
                )
                raise ConfigError(message)
            return self._checked_int(key, stated[0], "the MLP width", minimum=1)
        if key is not None:
            width = self.positive_int("the MLP width", *keys)
            if self.get("block_auto_adjust_ff_dim")[1]:
                width = self._lfm2_width(width)
            return width
        if self.model_type in conventions.UNGATED_MLP_TYPES:
            # GPT-2-era families leave the width null and build 4 * d_model.
            return 4 * d_model
        tried = ", ".join(f"`{k}`" for k in keys)
        message = (
            f"the {self.model_type} config states the MLP width under none of {tried}, and the "
            f"family has no default width. Add `{keys[0]}`"
        )
        raise ConfigError(message)

    def _lfm2_width(self, stated: int) -> int:
        # LFM2 builds its gated MLP Llama-style from the stated width: two thirds of it, times
        # `block_ffn_dim_multiplier` when set (and only then rounded up to `block_multiple_of`).
        width = int(2 * stated / 3)
        multiplier = self.number("block_ffn_dim_multiplier")
        if multiplier is not None:
            width = int(multiplier * width)
            multiple = self.optional_int("block_multiple_of") or 1
            width = multiple * ((width + multiple - 1) // multiple)
        return width

    def _layer_indices(self, key: str, n_layers: int) -> frozenset[int]:
        _, value = self.get(key)
        if value is None:
            return frozenset()
        if isinstance(value, str) or not isinstance(value, Sequence):
            message = f"`{key}` is {value!r}, not a list of layer indices. Fix `{key}`"
            raise ConfigError(message)
        for index in value:
            if not is_int(index) or not 0 <= index < n_layers:
                message = (
                    f"`{key}` names layer {index!r}, but this config's layers run "
                    f"0..{n_layers - 1}. Fix `{key}`"
                )
                raise ConfigError(message)
        return frozenset(value)

    # --- embeddings, logits, residual --------------------------------------------------------
    def tied_embeddings(self) -> bool:
        # Wrappers may state tying for the whole model at the top instead of in text_config.
        for source in (self.cfg, self.outer):
            value = source.get("tie_word_embeddings")
            if value is None:
                continue
            if not isinstance(value, bool):
                message = (
                    f"`tie_word_embeddings` is {value!r}, not true or false: it says whether "
                    f"the unembedding reuses the embedding matrix. Fix `tie_word_embeddings`"
                )
                raise ConfigError(message)
            return value
        return self.model_type not in conventions.UNTIED_BY_DEFAULT

    def logit_multiplier(self) -> float | None:
        divisor = self.number("logits_scaling")
        if divisor is not None:
            # Granite divides the logits by `logits_scaling`.
            if divisor == 0:
                message = (
                    "`logits_scaling` is 0: Granite divides the logits by it, so it cannot be "
                    "zero. Fix `logits_scaling` (Granite-3 8B ships 16.0)"
                )
                raise ConfigError(message)
            return 1.0 / divisor
        for key in ("logit_scale", "lm_head_multiplier"):
            value = self.number(key)
            if value is not None:
                return value
        return None

    def embedding_multiplier(self, d_model: int) -> float | None:
        value = self.number("embedding_multiplier")
        if value is not None:
            return value
        if self.model_type in conventions.SQRT_EMBED_SCALE_TYPES:
            return math.sqrt(d_model)
        return None

    def altup_active_stream(self) -> int | None:
        if self.model_type not in conventions.ALTUP_TYPES:
            return None
        active = self.optional_int("altup_active_idx", minimum=0) or 0
        if active >= self.n_streams():
            message = (
                f"`altup_active_idx` is {active}, but the trunk has {self.n_streams()} AltUp "
                f"streams (`altup_num_inputs`). Fix `altup_active_idx`"
            )
            raise ConfigError(message)
        return active

    def activation_sparsity(self, n_layers: int) -> tuple[float, ...]:
        _, pattern = self.get("activation_sparsity_pattern")
        if pattern is None:
            # The class default: 0.95 on the first 10 layers of a model deeper than 10.
            sparse = 10 if n_layers > 10 else 0
            return (0.95,) * sparse + (0.0,) * (n_layers - sparse)
        if isinstance(pattern, int | float) and not isinstance(pattern, bool):
            return (float(pattern),) * n_layers
        values = self._per_layer_list(pattern, "activation_sparsity_pattern", n_layers)
        if not all(isinstance(v, int | float) and 0 <= v < 1 for v in values):
            message = (
                f"`activation_sparsity_pattern` is {pattern!r}: each entry must be a number in "
                f"[0, 1). Fix `activation_sparsity_pattern`"
            )
            raise ConfigError(message)
        return tuple(float(v) for v in values)

    def n_streams(self) -> int:
        if self.model_type in conventions.ALTUP_TYPES:
            return self.optional_int("altup_num_inputs") or 1
        if self.get("mhc_enabled")[1] is False:
            return 1
        return self.optional_int("hc_mult", "mhc_expansion_rate") or 1
