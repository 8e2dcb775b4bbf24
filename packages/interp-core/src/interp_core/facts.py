"""What a model is, read from its `config.json` alone — before anything is loaded.

`ModelFacts` is the one place dimensions and architectural traits live. The backends resolve
points with it, the registry decides which points exist with it, the sizer prices memory with it
and the validator plans layers with it. It never imports transformers: a config is a mapping.

CONTRACT (fields are fixed; `from_config` fills them — see the implementation below).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ATTENDING_LAYER_KINDS",
    "LAYER_KINDS",
    "MLAFacts",
    "MoEFacts",
    "ModelFacts",
]

# Per-layer mixer kinds. "full" and "sliding" are softmax attention; the rest have no attention
# matrix, so attention points are absent on them.
LAYER_KINDS = ("full", "sliding", "chunked", "linear_attention", "recurrent", "mamba", "conv")
ATTENDING_LAYER_KINDS = frozenset({"full", "sliding", "chunked"})


@dataclass(frozen=True)
class MoEFacts:
    """Mixture-of-experts layout."""

    n_experts: int
    experts_per_token: int
    d_expert: int  # intermediate width of one routed expert
    n_shared_experts: int = 0
    d_shared_expert: int | None = None  # total intermediate width of the shared expert(s), if any
    sparse_layers: tuple[int, ...] = ()  # layer indices whose MLP is routed; the rest are dense


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
    gated_attn_output: bool = False  # an output gate multiplies z before o_proj (Qwen3-Next)
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    logit_multiplier: float | None = None  # applied to logits before any softcap
    residual_multiplier: float | None = None  # scales each sublayer's write into the residual
    embedding_multiplier: float | None = None  # scales the embedding output (Gemma: sqrt(d_model))
    n_streams: int = 1  # hyper-connection residual streams (DeepSeek-V4 mHC); 1 = ordinary trunk
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None  # the checkpoint's native dtype as the config states it
    extras: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelFacts:
        raise NotImplementedError  # filled in below by the facts implementation

    # --- per-layer predicates -------------------------------------------------------------------
    def layer_kind(self, layer: int) -> str:
        raise NotImplementedError

    def attends(self, layer: int) -> bool:
        """Whether `layer` computes a softmax attention matrix."""
        raise NotImplementedError

    def is_sparse(self, layer: int) -> bool:
        """Whether `layer`'s MLP is a routed mixture of experts."""
        raise NotImplementedError

    @property
    def q_width(self) -> int:
        """Width of the concatenated query heads (n_heads * head_dim, MLA-aware)."""
        raise NotImplementedError

    @property
    def kv_width(self) -> int:
        """Width of the concatenated key/value heads (n_kv_heads * head_dim)."""
        raise NotImplementedError

    @property
    def z_width(self) -> int:
        """Width of the o_proj input (n_heads * v_head_dim; differs from q_width on MLA)."""
        raise NotImplementedError
