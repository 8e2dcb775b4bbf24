"""What does a lens over a generation take, what does each of its steps hold, and what is refused?

`generate_with_lens(tokens, lenses, ...)` generates one completion and streams, position by
position, the lens read-out at the requested layers: every prompt position first (from the
prompt's forward pass), then each generated token once the model has run on it. The read-out at
position `p` is what each layer would predict for position `p + 1`, so a step carries both the
token at `p` (`token_id`) and the one that followed it (`next_token_id`: the prompt's next token,
or the sampled one). As everywhere in this library the last sampled token is never fed back, so
the steps cover `len(prompt) + len(generated) - 1` positions (minus those before `skip_before`),
exactly the rows `capture_generation` returns; the last sampled token is the last step's
`next_token_id`.

Each `LensSpec` of the call yields one `[n_layers, top_n]` block of ids and probabilities per
step, in the order of its layers. Probabilities are over the whole vocabulary; a `word_mask`
(`[vocab]` booleans, True for the ids allowed) only restricts which ids may be ranked, so a
masked read-out's probabilities are the same numbers the unmasked one reports for those ids.

A lens is a `LensSpec`, or a string: `"logit"` (the plain logit lens at every layer), or the name
of a fitted lens set installed with `set_lens_jacobians` (that set at every layer it holds).
Everything here is checked before the first forward pass; nothing imports a tensor library.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.errors import InvalidArgument
from interp_core.readouts import LensSpec, check_fitted_layers
from interp_core.sampling import check_lens_layers, check_lens_point, check_lens_top_k

__all__ = ["LOGIT_LENS", "LensPlan", "LensStep", "check_lens_generation", "check_skip_reach"]

LOGIT_LENS = "logit"  # the string naming the plain logit lens in `lenses`


@dataclass(frozen=True)
class LensStep:
    """One position's read-out.

    `top_ids[i]` / `top_probs[i]` belong to the call's i-th lens: `[n_layers, top_n]` token ids
    (int64) and probabilities (float32, over the full vocabulary), best first, one row per layer
    of that lens in its order. `finish_reason` is set on the last step only ("stop" or
    "length", as `generate` reports it).
    """

    position: int
    token_id: int
    is_generated: bool
    top_ids: tuple[Any, ...]
    top_probs: tuple[Any, ...]
    next_token_id: int | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class LensPlan:
    """A lens-over-generation call, checked: each lens with its layers resolved, the union of
    the layers to read, and the read-out's options."""

    lenses: tuple[LensSpec, ...]
    layers: tuple[int, ...]
    top_n: int
    point: str
    skip_before: int
    word_mask: Any

    def fitted_sets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.jacobian_set for s in self.lenses if s.jacobian))


def _one_lens(item: object, index: int, n_layers: int, held: Mapping[str, Sequence[int]]) -> Any:
    if isinstance(item, str):
        if item == LOGIT_LENS:
            return LensSpec(None)
        if item not in held:
            names = ", ".join(repr(n) for n in (LOGIT_LENS, *sorted(held)))
            message = f"lenses[{index}] = {item!r} names no lens of this model (known: {names})"
            instead = (
                "install a fitted lens first (set_lens_jacobians(path, name=...)) or pass "
                "LensSpec(layers) for the logit lens"
            )
            raise InvalidArgument.build(message, None, instead)
        return LensSpec(list(held[item]), jacobian=True, jacobian_set=item)
    if not isinstance(item, LensSpec):
        message = (
            f"lenses[{index}] is a {type(item).__name__}; a lens is a LensSpec(layers, "
            f"jacobian=..., jacobian_set=...), {LOGIT_LENS!r}, or an installed fitted set's name"
        )
        raise InvalidArgument(message)
    return item


def check_lens_generation(
    lenses: object,
    *,
    n_layers: int,
    vocab_size: int | None,
    held: Mapping[str, Sequence[int]],
    top_n: object = 10,
    point: object = "resid_post",
    skip_before: object = 0,
    word_mask: object = None,
) -> LensPlan:
    """Refuse what a lens over a generation cannot read, before any forward pass.

    `held` is the model's installed fitted sets (name -> the layers each holds a `J_bar` for);
    a fitted lens whose set or layers are missing is refused rather than read as a plain lens.
    """
    if isinstance(lenses, LensSpec | str):
        lenses = [lenses]
    if isinstance(lenses, bytes) or not isinstance(lenses, Sequence):
        message = f"lenses takes a list of LensSpec, got {type(lenses).__name__}"
        raise InvalidArgument(message)
    if not lenses:
        message = "generate_with_lens got no lens, so it would read nothing; pass LensSpec(None)"
        raise InvalidArgument(message)
    top_n = check_lens_top_k(top_n)
    point = check_lens_point(point)
    specs = []
    for index, item in enumerate(lenses):
        spec = _one_lens(item, index, n_layers, held)
        layers = check_lens_layers(None if spec.layers is None else list(spec.layers), n_layers)
        outside = [layer for layer in layers if layer >= n_layers]
        if outside:
            message = f"lenses[{index}] reads layers {outside}, but this model has {n_layers}"
            raise InvalidArgument.build(message, None, f"use layers 0..{n_layers - 1}")
        spec = LensSpec(layers, jacobian=spec.jacobian, jacobian_set=spec.jacobian_set)
        if spec.jacobian:
            if point != "resid_post":
                message = f"a fitted lens read at {point}"
                raise InvalidArgument.build(
                    message,
                    "its J_bar was fitted on resid_post, the residual each layer hands on",
                    "read fitted lenses at point='resid_post', or use the plain logit lens",
                )
            check_fitted_layers(spec, held, layers)
        specs.append(spec)
    if isinstance(skip_before, bool) or not isinstance(skip_before, int) or skip_before < 0:
        message = f"skip_before={skip_before!r} must be a position: an int >= 0"
        raise InvalidArgument(message)
    if word_mask is not None:
        _check_mask(word_mask, vocab_size)
    union = tuple(sorted({layer for spec in specs for layer in spec.layers or ()}))
    return LensPlan(tuple(specs), union, top_n, point, int(skip_before), word_mask)


def _check_mask(mask: object, vocab_size: int | None) -> None:
    shape = getattr(mask, "shape", None)
    if shape is not None:
        size = int(shape[0]) if len(shape) == 1 else None
    elif isinstance(mask, Sequence) and not isinstance(mask, str | bytes):
        size = len(mask)
        if not all(isinstance(v, bool) for v in mask):
            message = "word_mask must hold booleans (True for each token id the lens may rank)"
            raise InvalidArgument(message)
    else:
        size = None
    if size is None:
        message = f"word_mask must be a [vocab] boolean array, got {type(mask).__name__}"
        raise InvalidArgument(message)
    if vocab_size is not None and size != vocab_size:
        message = f"word_mask has {size} entries, but this model's vocabulary has {vocab_size}"
        raise InvalidArgument.build(message, None, "pass one boolean per token id")


def check_skip_reach(plan: LensPlan, prompt_length: int, max_new_tokens: int) -> None:
    """Refuse a `skip_before` past every position the call can read (nothing would stream)."""
    last = prompt_length + max_new_tokens - 2  # the last sampled token is never fed back
    if plan.skip_before > last:
        message = (
            f"skip_before={plan.skip_before} is past the last position this call reads ({last}: "
            f"{prompt_length} prompt tokens and up to {max_new_tokens} new ones, the last never "
            f"fed back)"
        )
        raise InvalidArgument.build(message, None, "lower skip_before or raise max_new_tokens")
