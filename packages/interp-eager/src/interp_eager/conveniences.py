"""The eager model's read-out conveniences of the protocol, kept out of `model.py`.

`capture_attention`, `capture_residuals` and `generate_text` are built from one capture or one
generation (`interp_torch.readouts`, shared with vLLM); `decode_residuals` awaits the eager
model's own `decode_residuals_sync`, which decodes raw or normalized logits in-process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp_core.chat import ChatSpans, message_spans
from interp_torch import readouts

__all__ = ["EagerConveniences"]


class EagerConveniences:
    """Mixed into `EagerModel`; relies on its `capture`, `generate` and `decode_residuals_sync`."""

    async def capture_attention(
        self, tokens: Any, layers: Sequence[int]
    ) -> dict[int, dict[str, torch.Tensor]]:
        return await readouts.capture_attention(self, tokens, layers)

    async def capture_residuals(
        self, tokens: Any, layers: Sequence[int] | None = None, *, detach: bool = True
    ) -> dict[int, torch.Tensor]:
        return await readouts.capture_residuals(self, tokens, layers, detach=detach)

    async def generate_text(
        self,
        prompt: Any,
        *,
        max_tokens: int = 200,
        temperature: float = 1.0,
        seed: int | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        steering: Any = None,
    ) -> str:
        return await readouts.generate_text(
            self,
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            top_k=top_k,
            top_p=top_p,
            steering=steering,
        )

    async def decode_residuals(
        self, residuals: Any, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        return self.decode_residuals_sync(residuals, raw=raw, top_k=top_k)  # type: ignore[attr-defined]

    # --- chat -----------------------------------------------------------------------------------
    def message_spans(
        self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = False
    ) -> ChatSpans:
        """The chat rendered with the template, each token labelled with its message, role and
        section (header / content / footer); see `interp_core.chat.message_spans`."""
        tokenizer = self.tokenizer  # type: ignore[attr-defined]
        return message_spans(tokenizer, messages, add_generation_prompt=add_generation_prompt)

    def message_partition(
        self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = False
    ) -> tuple[tuple[int, int], ...]:
        """Each message's contiguous `[start, end)` token range; the ranges cover every token."""
        spans = self.message_spans(messages, add_generation_prompt=add_generation_prompt)
        return spans.partition
