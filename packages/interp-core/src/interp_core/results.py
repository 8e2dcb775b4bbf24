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

__all__ = [
    "Generation",
    "GenerationStep",
    "LensPrediction",
    "LensResult",
    "Support",
    "TokenLogprobs",
    "top_pairs",
]

# (token id, log-probability) pairs, most probable first.
TopLogprobs = tuple[tuple[int, float], ...]


def top_pairs(pairs: Any) -> TopLogprobs:
    """`pairs` of (token id, log-probability) as plain ints and floats, in the order given."""
    return tuple((int(token), float(logprob)) for token, logprob in pairs)


@dataclass(frozen=True, slots=True)
class TokenLogprobs:
    """One position's token and its alternatives, as log-probabilities of the model's own
    distribution (log_softmax of the raw logits: before penalties, temperature and filtering,
    vLLM's default "raw_logprobs" meaning).

    `token_id` is the token that was generated (or, for a prompt position, the prompt's token);
    `logprob` is its log-probability; `top` are the `n` most probable tokens, best first.
    """

    token_id: int
    logprob: float
    top: TopLogprobs = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_id", int(self.token_id))
        object.__setattr__(self, "logprob", float(self.logprob))
        object.__setattr__(self, "top", top_pairs(self.top))


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

    `sampling` is the `interp_core.sampling.Sampling` the generation ran with (every knob
    decided, and `sampling.sources` says whether the caller, the checkpoint's
    generation_config.json or the library default decided it). `logprobs` holds one
    `TokenLogprobs` per generated token when `n_logprobs` was asked for (else None);
    `prompt_logprobs` one per prompt token when `prompt_logprobs` was asked for, None at
    position 0, which no token predicts.
    """

    text: str
    token_ids: tuple[int, ...]
    prompt_token_ids: tuple[int, ...] = ()
    finish_reason: str | None = None
    output: Any = field(default=None, compare=False, repr=False)
    sampling: Any = field(default=None, compare=False)
    logprobs: tuple[TokenLogprobs, ...] | None = field(default=None, compare=False)
    prompt_logprobs: tuple[TokenLogprobs | None, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # Callers pass lists; a frozen result should not alias their mutable list.
        object.__setattr__(self, "token_ids", tuple(int(t) for t in self.token_ids))
        object.__setattr__(self, "prompt_token_ids", tuple(int(t) for t in self.prompt_token_ids))
        if self.logprobs is not None:
            object.__setattr__(self, "logprobs", tuple(self.logprobs))
        if self.prompt_logprobs is not None:
            object.__setattr__(self, "prompt_logprobs", tuple(self.prompt_logprobs))

    @property
    def top_logprobs(self) -> tuple[TopLogprobs, ...]:
        """Each generated token's alternatives, best first (empty without `n_logprobs`)."""
        return tuple(entry.top for entry in self.logprobs or ())


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
    # With n_logprobs: the (token id, raw log-probability) alternatives at this step, best first.
    top_logprobs: TopLogprobs = ()
    # The settings the stream runs with; set on the first step.
    sampling: Any = field(default=None, compare=False)
    # With n_logprobs: this token's entry as `Generation.logprobs` holds it (its raw
    # log-probability and the alternatives), the same on every backend.
    token_logprobs: TokenLogprobs | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "top_logprobs", top_pairs(self.top_logprobs))


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
