"""Which parts make up `ModelFacts` besides plain numbers? Layer kinds, MLA and AltUp.

Kept apart from `interp_core.facts` so the config reader (`interp_core.facts_reading`) can build
them without importing the facts it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ATTENDING_LAYER_KINDS",
    "COMPRESSED_LAYER_KINDS",
    "LAYER_KINDS",
    "AltUpFacts",
    "MLAFacts",
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
class AltUpFacts:
    """Gemma-3n's AltUp trunk: its residual streams are AltUp's (predicted and corrected around
    each block, attention and MLP run on `active_stream`), not hyper-connections; LAuReL runs
    beside attention; some layers' MLP gates are sparsified (gaussian top-k)."""

    active_stream: int
    laurel_rank: int | None = None
    # The per-layer gaussian top-k target of the MLP gates (0.0: a plain activation).
    activation_sparsity: tuple[float, ...] = ()
