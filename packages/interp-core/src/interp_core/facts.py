"""What a model is, read from its `config.json` alone — before anything is loaded.

`ModelFacts` is the one place dimensions and architectural traits live. The backends resolve
points with it, the registry decides which points exist with it, the sizer prices memory with it
and the validator plans layers with it. It never imports transformers: a config is a mapping.

Reading (`interp_core.facts_reading`) is literal where the config speaks and falls back, key
by key, to what transformers' config class for that `model_type` assumes when it does not:
published files omit keys equal to the class default (Gemma-3's nested `text_config` names four
keys), so a reader that refused every gap would refuse real checkpoints. A key that is missing
with no default, or present with a value that cannot be right, is a `ConfigError` naming the
key; nothing is guessed.

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
- `altup` is set on Gemma-3n only (`AltUpFacts`): its `n_streams` residual streams are AltUp's
  (predicted and corrected around each block, attention and MLP run on `altup.active_stream`),
  not hyper-connections; `altup_active_stream`, `laurel_rank` and `activation_sparsity` read it.
- The family conventions a config leaves unsaid (default tying, biases, QK-norm, ...) are one
  row per family in `interp_core.family_conventions` (`facts.family`); the single-family traits
  (`single_sublayer`, `normed_skip`, ...) are properties that read it. The reading itself is
  `interp_core.facts_reading`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from interp_core.errors import PointUnsupported
from interp_core.expert_reading import MoEFacts
from interp_core.fact_parts import (
    ATTENDING_LAYER_KINDS,
    COMPRESSED_LAYER_KINDS,
    LAYER_KINDS,
    AltUpFacts,
    MLAFacts,
)
from interp_core.facts_reading import read_fields
from interp_core.family_conventions import FamilyConventions, conventions_for

__all__ = [
    "ATTENDING_LAYER_KINDS",
    "COMPRESSED_LAYER_KINDS",
    "LAYER_KINDS",
    "AltUpFacts",
    "MLAFacts",
    "MoEFacts",
    "ModelFacts",
]


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
    qkv_clip: float | None = None  # q, k and v clamped to ±this after projection (DBRX)
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
    # Gemma-3n: the residual streams are AltUp's (see the module docstring), LAuReL runs beside
    # attention, and some layers' MLP gates are sparsified (gaussian top-k).
    altup: AltUpFacts | None = None
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
        return cls(**read_fields(config))

    @property
    def family(self) -> FamilyConventions:
        """The row of this model's family: what its config leaves unsaid."""
        return conventions_for(self.model_type)

    # --- single-family traits, read from the family's row ----------------------------------------
    @property
    def shared_key_value(self) -> bool:
        """Whether keys and values are one tensor (DeepSeek-V4: K = V, no value projection)."""
        return self.family.shared_key_value

    @property
    def routed_attention(self) -> bool:
        """Whether the query/output projections are routed experts (JetMoE)."""
        return self.family.routed_attention

    @property
    def normed_skip(self) -> bool:
        """Whether each sublayer leaves alpha*norm(x) + beta*out, the skip path being the normed
        input (MiniMax)."""
        return self.family.normed_skip

    @property
    def ssm_beside_attention(self) -> bool:
        """Whether a Mamba-2 mixer runs beside the attention on the same normed input in every
        layer, the block summing the two itself, so no module returns the mixer write
        (Falcon-H1)."""
        return self.family.parallel_ssm

    @property
    def single_sublayer(self) -> bool:
        """Whether each layer is one sublayer behind one norm and one residual add: its token
        mixer (the layer kind says which) or, on "mlp" layers, its MLP or experts alone
        (Nemotron-H)."""
        return self.family.single_sublayer

    @property
    def altup_active_stream(self) -> int | None:
        """The AltUp stream attention and the MLP run on (Gemma-3n); None on other trunks."""
        return self.altup.active_stream if self.altup is not None else None

    @property
    def laurel_rank(self) -> int | None:
        """The rank of Gemma-3n's LAuReL branch beside attention; None elsewhere."""
        return self.altup.laurel_rank if self.altup is not None else None

    @property
    def activation_sparsity(self) -> tuple[float, ...]:
        """Gemma-3n's per-layer gaussian top-k targets of the MLP gates; empty elsewhere."""
        return self.altup.activation_sparsity if self.altup is not None else ()

    @property
    def post_norms_only(self) -> bool:
        """Whether the sandwich norms come without pre-norms (OLMo-2/3 normalise only after)."""
        return self.family.post_norms_only

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
        return self.family.dense_beside_experts
