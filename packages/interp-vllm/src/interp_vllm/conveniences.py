"""The vLLM model's read-out conveniences of the protocol, kept out of `model.py`.

`capture_attention`, `capture_residuals` and `generate_text` are built from one capture or one
generation (`interp_torch.readouts`, shared with the eager backend; imported on call so that
importing this package stays free of torch). `decode_residuals` sends the rows to the workers,
which decode them through the final norm and `compute_logits` (normalized logits only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from interp_core.chat import ChatSpans, message_spans
from interp_core.errors import (
    CapabilityUnsupported,
    GradientsUnsupported,
    InvalidArgument,
)
from interp_core.readouts import TopTokens
from interp_core.sampling import check_lens_top_k

__all__ = ["VLLMConveniences"]


class VLLMConveniences:
    """Mixed into `VLLMModel`; relies on its `capture` and `generate`."""

    async def capture_attention(self, tokens: Any, layers: Sequence[int]) -> dict[int, Any]:
        from interp_torch import readouts

        return await readouts.capture_attention(self, tokens, layers)

    async def capture_residuals(
        self, tokens: Any, layers: Sequence[int] | None = None, *, detach: bool = True
    ) -> dict[int, Any]:
        if not detach:
            what = "capture_residuals(detach=False) on the vLLM backend"
            why = "vLLM runs its forward without autograd, so there is no graph to keep"
            instead = "the eager backend with requires_grad=True (backend='eager')"
            raise GradientsUnsupported.build(what, why, instead)
        from interp_torch import readouts

        return await readouts.capture_residuals(self, tokens, layers)

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
        from interp_torch import readouts

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
        """Normalized logits `[..., vocab]` of residuals `[..., d_model]`, decoded in the workers
        through vLLM's final norm and `compute_logits` (which applies the model's logit
        multiplier and final softcap as the engine serves them); `raw=True` is refused. With
        `top_k`, `TopTokens(ids, probs)` `[..., k]`: only those leave the workers."""
        if raw:
            what = "decode_residuals(raw=True) on the vLLM backend"
            why = (
                "vLLM's compute_logits applies the logit multiplier and final softcap inside the "
                "workers, so raw (uncapped) logits are never formed there"
            )
            instead = "the eager backend (backend='eager') for raw decode_residuals"
            raise CapabilityUnsupported.build(what, why, instead)
        if top_k is not None:
            top_k = check_lens_top_k(top_k)
        return await self._decode_rows(residuals, top_k)

    async def _decode_rows(self, residuals: Any, top_k: int | None = None) -> Any:
        from interp_vllm.worker import decode_tensor, encode_tensor

        shape = tuple(residuals.shape)
        width = self.d_model  # type: ignore[attr-defined]
        if not shape or shape[-1] != width:
            what = f"decode_residuals got residuals of shape {list(shape)}"
            why = f"the final norm and the unembedding read rows {width} wide (d_model)"
            instead = "pass residuals shaped [..., d_model], e.g. one capture_residuals layer"
            raise InvalidArgument.build(what, why, instead)
        engine = await self._ready()  # type: ignore[attr-defined]
        installed = self._installed  # type: ignore[attr-defined]
        if installed is None or "final_norm" not in installed.sites:
            what = "decode_residuals on this model is not served by vLLM"
            why = "the workers found no final norm to decode through"
            instead = "the eager backend (backend='eager') for decode_residuals"
            raise CapabilityUnsupported.build(what, why, instead)
        rows = encode_tensor(residuals.reshape(-1, width))
        if top_k is not None:
            import torch

            answers = await engine.collective_rpc("interp_decode_rows", args=(rows, top_k))
            top = next(answer for answer in answers if answer is not None)
            ids = torch.tensor(top["ids"], dtype=torch.int64)
            probs = torch.tensor(top["probs"], dtype=torch.float32)
            k = ids.shape[-1]
            return TopTokens(ids.reshape(*shape[:-1], k), probs.reshape(*shape[:-1], k))
        answers = await engine.collective_rpc("interp_decode_rows", args=(rows,))
        logits = next(decode_tensor(*answer) for answer in answers if answer is not None)
        return logits.reshape(*shape[:-1], logits.shape[-1])

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
