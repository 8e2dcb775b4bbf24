"""Residual rows decoded inside the vLLM workers, through vLLM's own final norm and logits.

`WorkerDecoding` is a collaborator of `VLLMModel` (through its `ModelCalls`): `decode_residuals`
sends the rows to the workers, which decode them through the final norm and `compute_logits`
(normalized logits only); `top_k` decodes captured residual rows to the lens's top-k ids and
probabilities on the pipeline stage that holds the final norm. The other read-outs are
`interp_core.model_base.ModelBase`'s and `interp_torch.readouts`'.
"""

from __future__ import annotations

from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import TopTokens
from interp_core.sampling import check_lens_top_k
from interp_vllm.calls import ModelCalls

__all__ = ["WorkerDecoding", "lens_predictions"]


class WorkerDecoding:
    """Decoding in the workers, for one model's `ModelCalls`."""

    def __init__(self, calls: ModelCalls) -> None:
        self._calls = calls

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
        from interp_vllm.tensor_wire import decode_tensor, encode_tensor

        shape = tuple(residuals.shape)
        width = self._calls.facts.d_model
        if not shape or shape[-1] != width:
            what = f"decode_residuals got residuals of shape {list(shape)}"
            why = f"the final norm and the unembedding read rows {width} wide (d_model)"
            instead = "pass residuals shaped [..., d_model], e.g. one capture_residuals layer"
            raise InvalidArgument.build(what, why, instead)
        await self._calls.ready()
        if "final_norm" not in self._calls.served():
            what = "decode_residuals on this model is not served by vLLM"
            why = "the workers found no final norm to decode through"
            instead = "the eager backend (backend='eager') for decode_residuals"
            raise CapabilityUnsupported.build(what, why, instead)
        rows = encode_tensor(residuals.reshape(-1, width))
        if top_k is not None:
            import torch

            answers = await self._calls.rpc("interp_decode_rows", rows, top_k)
            top = next(answer for answer in answers if answer is not None)
            ids = torch.tensor(top["ids"], dtype=torch.int64)
            probs = torch.tensor(top["probs"], dtype=torch.float32)
            k = ids.shape[-1]
            return TopTokens(ids.reshape(*shape[:-1], k), probs.reshape(*shape[:-1], k))
        answers = await self._calls.rpc("interp_decode_rows", rows)
        logits = next(decode_tensor(*answer) for answer in answers if answer is not None)
        return logits.reshape(*shape[:-1], logits.shape[-1])

    async def top_k(self, payload: dict[str, Any], keys: list[str], top_k: int) -> dict[str, Any]:
        """The lens blocks of captured residual rows, decoded by the stage with the final norm."""
        import torch

        from interp_vllm.tensor_wire import encode_tensor

        rows = [payload["captured"][k] for k in keys]
        answers = await self._calls.rpc("interp_decode_rows", encode_tensor(torch.cat(rows)), top_k)
        decoded = next((a for a in answers if a is not None), None)
        if decoded is None:
            return {}
        blocks, start = {}, 0
        for key, block in zip(keys, rows, strict=True):
            stop = start + block.shape[0]
            blocks[key] = {
                "positions": payload["positions"][key],
                "ids": decoded["ids"][start:stop],
                "probs": decoded["probs"][start:stop],
            }
            start = stop
        return blocks


def lens_predictions(
    blocks: dict[str, Any],
    layers: list[int],
    addresses: list[Any],
    prompt: list[int],
    tokenizer: Any,
) -> dict[int, Any]:
    """The lens's per-layer predictions from the workers' top-k blocks (one per address key);
    a block missing or not covering every prompt position is refused, never filled in."""
    from interp_core.results import LensPrediction
    from interp_vllm.support import INSTEAD
    from interp_vllm.wire import address_key

    predictions = {}
    for layer, address in zip(layers, addresses, strict=True):
        block = blocks.get(address_key(address))
        if block is None or block["positions"] != list(range(len(prompt))):
            msg = f"the vLLM workers returned no lens rows for {address}"
            raise CapabilityUnsupported.build(msg, None, INSTEAD)
        predictions[layer] = tuple(
            tuple(
                LensPrediction(int(i), tokenizer.decode([int(i)]), float(p))
                for i, p in zip(ids, probs, strict=True)
            )
            for ids, probs in zip(block["ids"], block["probs"], strict=True)
        )
    return predictions
