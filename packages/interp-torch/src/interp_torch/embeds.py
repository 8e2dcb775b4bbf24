"""Prompt embeddings: rows spliced in where token embeddings would be.

A prompt given as embeddings is the tensor a model's input-embedding module would output (HF's
`inputs_embeds`, vLLM's prompt-embeds input): `[seq, d_model]` for the whole prompt, or
`{position: row}` to replace only some token slots of a tokenized prompt. Both normalise to an
`Injection` — which positions are replaced and by what — so every backend splices the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["Injection", "check_prompt_embeds", "splice_rows"]


@dataclass(frozen=True)
class Injection:
    """Embedding rows `[len(positions), d_model]` replacing the prompt's slots at `positions`.

    `whole` is True when the rows are the whole prompt (no tokens were given); `length` is the
    prompt's length in positions.
    """

    positions: tuple[int, ...]
    rows: torch.Tensor
    length: int
    whole: bool


def _as_rows(value: Any, d_model: int, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as error:
            msg = f"{what} is not a tensor of floats: {error}"
            raise InvalidArgument(msg) from error
    if not value.is_floating_point():
        msg = f"{what} has dtype {value.dtype}; embedding rows are floats"
        raise InvalidArgument(msg)
    if value.shape[-1:] != (d_model,):
        msg = (
            f"{what} has shape {tuple(value.shape)}; its last axis must be d_model={d_model} "
            f"(the width of the model's input-embedding module)"
        )
        raise InvalidArgument(msg)
    if not bool(torch.isfinite(value).all()):
        msg = f"{what} holds NaN or infinite values"
        raise InvalidArgument(msg)
    return value.detach()


def check_prompt_embeds(
    prompt_embeds: Any, d_model: int, tokens: list[int] | None
) -> Injection | None:
    """The call's `prompt_embeds=` as an `Injection`, refused before any work when malformed.

    `tokens` is the call's single tokenized prompt, or None when the rows are the whole prompt.
    """
    if prompt_embeds is None:
        return None
    if isinstance(prompt_embeds, Mapping):
        if tokens is None:
            msg = (
                "prompt_embeds given as {position: row} replaces slots of a tokenized prompt, "
                "but no tokens were given; pass the tokens, or the whole prompt as a "
                "[seq, d_model] tensor with tokens=None"
            )
            raise InvalidArgument(msg)
        if not prompt_embeds:
            msg = "prompt_embeds={} replaces no position; pass None instead"
            raise InvalidArgument(msg)
        positions = []
        for key in prompt_embeds:
            if not isinstance(key, int) or isinstance(key, bool):
                msg = f"prompt_embeds position {key!r} is not an int"
                raise InvalidArgument(msg)
            if not 0 <= key < len(tokens):
                msg = (
                    f"prompt_embeds position {key} is outside the {len(tokens)}-token prompt "
                    f"(0..{len(tokens) - 1}); negative positions are not counted from the end"
                )
                raise InvalidArgument(msg)
            positions.append(key)
        order = sorted(positions)
        rows = torch.stack(
            [_as_rows(prompt_embeds[p], d_model, f"prompt_embeds[{p}]") for p in order]
        )
        if rows.dim() != 2:
            msg = (
                f"each prompt_embeds row must be one vector [d_model]; got {tuple(rows.shape[1:])}"
            )
            raise InvalidArgument(msg)
        return Injection(tuple(order), rows, len(tokens), whole=False)
    if tokens is not None:
        msg = (
            "prompt_embeds as a tensor is the whole prompt, and tokens were given too; pass "
            "tokens=None, or {position: row} to replace only some token slots"
        )
        raise InvalidArgument(msg)
    rows = _as_rows(prompt_embeds, d_model, "prompt_embeds")
    if rows.dim() == 3:
        if rows.shape[0] != 1:
            msg = (
                f"prompt_embeds holds a batch of {rows.shape[0]} prompts; a call takes one "
                f"embeddings prompt [seq, d_model]; call once per prompt"
            )
            raise CapabilityUnsupported(msg)
        rows = rows[0]
    if rows.dim() != 2 or rows.shape[0] == 0:
        msg = (
            f"prompt_embeds has shape {tuple(rows.shape)}; the whole prompt is [seq, d_model] "
            f"with seq >= 1"
        )
        raise InvalidArgument(msg)
    return Injection(tuple(range(rows.shape[0])), rows, rows.shape[0], whole=True)


def splice_rows(embedded: torch.Tensor, injection: Injection) -> torch.Tensor:
    """`embedded` `[batch, seq, d]` (or `[seq, d]`) with the injection's rows in its slots."""
    out = embedded.clone()
    index = torch.tensor(injection.positions, device=out.device)
    rows = injection.rows.to(device=out.device, dtype=out.dtype)
    if out.dim() == 3:
        out[:, index] = rows.unsqueeze(0).expand(out.shape[0], -1, -1)
    else:
        out[index] = rows
    return out
