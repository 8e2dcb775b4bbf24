"""What does a model hand back, apart from tensors?

Plain, immutable data that every backend returns in the same form: a capability verdict
(`Support`), a finished generation (`Generation`), one streamed step (`GenerationStep`) and a
logit-lens read-out (`LensResult`). Nothing here holds a reference to a tensor library; where a
backend has a richer native object (an HF output, a vLLM `CompletionOutput`, a logits tensor) it
rides along in an `output`/`logits` field that the core never inspects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Generation", "GenerationStep", "LensPrediction", "LensResult", "Support"]


@dataclass(frozen=True, slots=True)
class Support:
    """A verdict on whether something can be served, with the reason when it cannot.

    Truthy exactly when supported, so `if model.supports("z.3"):` reads naturally, while a refusal
    still carries `reason` (why not) and `instead` (what to do) for the error message.
    """

    ok: bool
    reason: str | None = None
    instead: str | None = None

    def __post_init__(self) -> None:
        # A refusal without a reason is the one thing a verdict must never be.
        if not self.ok and not self.reason:
            message = "a negative Support verdict needs a reason: say why it cannot be served"
            raise ValueError(message)

    def __bool__(self) -> bool:
        return self.ok

    @classmethod
    def yes(cls) -> Support:
        return cls(True)

    @classmethod
    def no(cls, reason: str, instead: str | None = None) -> Support:
        return cls(False, reason, instead)

    def explain(self) -> str:
        """The verdict as one sentence: 'supported', or the reason followed by the alternative."""
        if self.ok:
            return "supported"
        text = self.reason or ""
        if self.instead:
            text = f"{text.rstrip('.')}. {self.instead}"
        return text


@dataclass(frozen=True, slots=True)
class Generation:
    """A finished completion of one prompt.

    `token_ids` are the generated tokens only (the prompt is in `prompt_token_ids`); `text` is
    their decoding. `finish_reason` is "length" when `max_new_tokens` ran out, "stop" at an
    end-of-sequence token, or a backend's own word. `output` is the backend's native result.
    """

    text: str
    token_ids: tuple[int, ...]
    prompt_token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None
    output: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Callers pass lists; a frozen result should not alias their mutable list.
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))
        object.__setattr__(self, "prompt_token_ids", tuple(int(t) for t in self.prompt_token_ids))


@dataclass(frozen=True, slots=True)
class GenerationStep:
    """One token of a streamed generation.

    The `text` fields of the steps of a stream concatenate to the `Generation.text` the same call
    would have returned; a step may carry empty text when a token completes no character yet.
    """

    index: int  # 0 for the first generated token
    token_id: int
    text: str
    logprob: float | None = None
    finished: bool = False
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class LensPrediction:
    """One of the top-k tokens the lens reads out at a layer and position."""

    token_id: int
    token: str
    prob: float


@dataclass(frozen=True)
class LensResult:
    """Logit-lens read-out: for each layer, for each position, the top-k next-token guesses.

    `predictions[layer][position]` is a tuple of `LensPrediction`, most probable first. The lens
    decodes `point` (usually `resid_post`) through the final norm and the unembedding, with the
    model's own logit multiplier and softcap applied. `logits` optionally holds the backend's full
    `[n_layers, seq, vocab]` tensor.
    """

    point: str
    layers: tuple[int, ...]
    top_k: int
    predictions: Mapping[int, tuple[tuple[LensPrediction, ...], ...]]
    logits: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "predictions", MappingProxyType(dict(self.predictions)))
        missing = [layer for layer in self.layers if layer not in self.predictions]
        if missing:
            message = f"LensResult lists layers {missing} but holds no predictions for them"
            raise ValueError(message)

    def top(self, layer: int, position: int = -1) -> tuple[LensPrediction, ...]:
        """The top-k guesses at one layer and position (default: the last position)."""
        if layer not in self.predictions:
            message = (
                f"the lens was not read at layer {layer}: it holds layers "
                f"{list(self.layers)}; pass layers=[{layer}] to logit_lens"
            )
            raise KeyError(message)
        return self.predictions[layer][position]

    @property
    def n_positions(self) -> int:
        return len(self.predictions[self.layers[0]]) if self.layers else 0
