"""What the registry says about one point: its scope, width rule, role and engine names.

`PointSpec` is one row of the registry (`interp_core.point_table` holds the 34 rows); the enums
here are the vocabulary those rows are written in. Whether a model has a point is answered by the
rules in `interp_core.presence`, which `PointSpec.absence_reason` asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Literal

from interp_core.errors import PointUnsupported
from interp_core.presence import why_absent

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = ["ENGINES", "Equivalent", "PointSpec", "Role", "Scope", "Width"]

ENGINES = ("transformer_lens", "nnsight", "nnterp")


class Scope(Enum):
    """Whether a point occurs once per forward pass (trunk) or once per decoder layer."""

    TRUNK = "trunk"
    LAYER = "layer"


class Width(Enum):
    """How wide a point is, as a rule over model facts; the value is the rule in words."""

    D_MODEL = "d_model"
    Q_HEADS = "n_heads*head_dim"
    KV_HEADS = "n_kv_heads*head_dim"
    Z_HEADS = "n_heads*v_head_dim"
    D_MLP = "d_mlp"
    N_EXPERTS = "n_experts"
    TOP_K = "experts_per_token"
    SCORES = "heads*q*k"
    VOCAB = "vocab"
    STREAMS = "n_streams"
    STREAMS_X_D_MODEL = "n_streams*d_model"
    STREAMS_SQUARED = "n_streams*n_streams"

    @property
    def rule(self) -> str:
        return self.value

    @property
    def token_major(self) -> bool:
        """True when the tensor is laid out [batch, seq, ...]; attention is [batch, heads, q, k]."""
        return self is not Width.SCORES

    def per_token_dims(
        self, facts: ModelFacts, seq: int | None = None, layer: int | None = None
    ) -> tuple[int, ...]:
        """The dims one (batch row, query token) contributes: everything after [batch, seq].

        Attention has no fixed per-token width (each query row holds one entry per key), so
        SCORES needs `seq` and answers (n_heads, seq). Head and MLP widths are read at `layer`;
        on a model whose widths differ by layer (Gemma-4) they need it.
        """
        if self is Width.SCORES:
            if seq is None:
                message = (
                    "attention scores and probabilities have no fixed width: each query row has "
                    "one entry per key, so pass seq= (the key length)"
                )
                raise ValueError(message)
            return (facts.n_heads, seq)
        if self is Width.D_MODEL:
            return (facts.d_model,)
        if self in _LAYER_WIDTHS:
            if layer is not None:
                return (_LAYER_WIDTHS[self](facts, layer),)
            if facts.widths_vary:
                message = f"width {self.rule} of {facts.architecture} needs a layer"
                raise PointUnsupported.build(
                    message,
                    "its head widths, K/V head counts or MLP widths differ by layer",
                    "Pass layer=",
                )
            return (_UNIFORM_WIDTHS[self](facts),)
        if self is Width.VOCAB:
            return (facts.vocab_size,)
        if self in (Width.N_EXPERTS, Width.TOP_K):
            if facts.moe is None:
                message = f"width {self.rule} is undefined for {facts.architecture}"
                raise PointUnsupported.build(
                    message,
                    "the model has no mixture-of-experts layers",
                )
            return (
                facts.moe.n_experts if self is Width.N_EXPERTS else facts.moe.experts_per_token,
            )
        if self is Width.STREAMS:
            return (facts.n_streams,)
        if self is Width.STREAMS_X_D_MODEL:
            return (facts.n_streams, facts.d_model)
        return (facts.n_streams, facts.n_streams)  # STREAMS_SQUARED

    def dims(self, facts: ModelFacts, seq: int, layer: int | None = None) -> tuple[int, ...]:
        """The shape of one batch row: (seq, *per-token dims), or (heads, seq, seq) for SCORES."""
        if self is Width.SCORES:
            return (facts.n_heads, seq, seq)
        return (seq, *self.per_token_dims(facts, layer=layer))


# The widths read per layer: (facts, layer) -> width.
_LAYER_WIDTHS = {
    Width.Q_HEADS: lambda facts, layer: facts.q_width_at(layer),
    Width.KV_HEADS: lambda facts, layer: facts.kv_width_at(layer),
    Width.Z_HEADS: lambda facts, layer: facts.z_width_at(layer),
    Width.D_MLP: lambda facts, layer: facts.d_mlp_at(layer),
}
# The same widths on a model where every layer has them.
_UNIFORM_WIDTHS = {
    Width.Q_HEADS: lambda facts: facts.q_width,
    Width.KV_HEADS: lambda facts: facts.kv_width,
    Width.Z_HEADS: lambda facts: facts.z_width,
    Width.D_MLP: lambda facts: facts.d_mlp,
}


class Role(Enum):
    """Which part of the network a point belongs to (groups points in docs and the CLI)."""

    TRUNK = "trunk"  # once per forward pass: embeddings, final norm, logits
    RESIDUAL = "residual"  # the residual stream at block boundaries
    ATTENTION = "attention"  # the token-mixing sublayer
    MLP = "mlp"  # the channel-mixing sublayer
    ROUTING = "routing"  # mixture-of-experts router decisions
    STREAM = "stream"  # hyper-connection (multi-stream) residual machinery


@dataclass(frozen=True)
class Equivalent:
    """One reference engine's name for a point, or None with the reason there is none.

    Names use `{L}` for the layer index. `note` explains any caveat: a convention that differs
    (pre-gain norms, flattened heads), or a name that means our point only on some families.
    """

    name: str | None
    note: str = ""

    def format(self, layer: int | None = None) -> str | None:
        """The name with the layer filled in (None stays None)."""
        if self.name is None or layer is None:
            return self.name
        return self.name.replace("{L}", str(layer))


@dataclass(frozen=True)
class PointSpec:
    """Everything the engine knows about one standardized point, independent of any model."""

    name: str
    scope: Scope
    width: Width
    role: Role
    definition: str
    writable: bool
    read_only_reason: str | None  # why a write is refused; None exactly when writable
    multi_stream_only: bool
    accepts_stream: bool
    dtype_kind: Literal["float", "int"]
    transformer_lens: Equivalent
    nnsight: Equivalent
    nnterp: Equivalent

    @property
    def is_trunk(self) -> bool:
        return self.scope is Scope.TRUNK

    @property
    def is_layer_point(self) -> bool:
        return self.scope is Scope.LAYER

    def equivalent(self, engine: str) -> Equivalent:
        """The model-independent mapping for `engine` (one of ENGINES)."""
        if engine not in ENGINES:
            message = f"unknown engine {engine!r}; known: {', '.join(ENGINES)}"
            raise ValueError(message)
        return getattr(self, engine)

    def absence_reason(
        self, facts: ModelFacts, layer: int | None = None, stream: int | None = None
    ) -> str | None:
        """None when the model has this point (at `layer`, or at any layer), else why not."""
        found = why_absent(self, facts, layer, stream)
        return None if found is None else found.sentence()

    def is_present(
        self, facts: ModelFacts, layer: int | None = None, stream: int | None = None
    ) -> bool:
        return why_absent(self, facts, layer, stream) is None
