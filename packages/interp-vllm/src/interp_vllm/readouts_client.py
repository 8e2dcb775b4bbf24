"""Weight rows, probes and fitted lenses on vLLM: the client side of `readouts_worker`.

`VLLMReadouts` is a collaborator of `VLLMModel` (through its `ModelCalls`, so it never reaches into
the model) and keeps the names of the fitted-lens sets the workers hold. Each call validates
everything before a request is sent, then asks the workers for a small answer: `unembed_rows` /
`embed_rows` gather the rows each tensor-parallel rank owns; `project` runs a capture request
whose rows the workers dot with the directions and drop, so `[seq, k]` values cross instead of
`[seq, width]` rows; a fitted lens (`set_lens_jacobians`, then
`logit_lens(tokens, LensSpec(..., jacobian=True))`) is decoded where the rows and the held `J_bar`
are, and only the top-k travel back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import (
    LensSpec,
    check_direction_sets,
    check_fitted_layers,
    check_token_ids,
)
from interp_core.results import LensPrediction, LensResult
from interp_core.write_indices import wire_for_row
from interp_vllm.calls import ModelCalls
from interp_vllm.support import INSTEAD, RECOMPUTED
from interp_vllm.wire import address_key, needed_keys

__all__ = ["VLLMReadouts"]


class VLLMReadouts:
    """Weight rows, probes and fitted lenses in the workers, for one model's `ModelCalls`."""

    def __init__(self, calls: ModelCalls) -> None:
        self._calls = calls
        self._lens_held: dict[str, list[int]] = {}  # set name -> its layers, as the workers hold

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted-lens sets: name -> the layers it holds a `J_bar` for."""
        return {name: list(layers) for name, layers in self._lens_held.items()}

    # --- weight rows -------------------------------------------------------------------------
    async def _weight_rows(self, which: str, token_ids: Any, method: str) -> Any:
        import torch

        from interp_vllm.tensor_wire import decode_tensor

        self._calls.require_hooks(method)
        ids = check_token_ids(token_ids, self._calls.facts.vocab_size, method)
        answers = await self._calls.rpc("interp_weight_rows", which, ids)
        out, filled = None, [False] * len(ids)
        for answer in answers:
            if answer is None or not answer["where"]:
                continue
            rows = decode_tensor(*answer["rows"])
            if out is None:
                out = torch.empty((len(ids), rows.shape[-1]), dtype=rows.dtype)
            for row, index in zip(rows, answer["where"], strict=True):
                out[index] = row
                filled[index] = True
        if out is None or not all(filled):
            missing = [t for t, ok in zip(ids, filled, strict=True) if not ok]
            message = f"{method}: no vLLM worker holds the rows of token ids {missing}"
            raise CapabilityUnsupported.build(message, None, INSTEAD)
        return out

    async def unembed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_U[token_ids]` `[k, d_model]`, gathered from the tensor-parallel vocab shards."""
        return await self._weight_rows("unembed", token_ids, "unembed_rows")

    async def embed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_E[token_ids]` `[k, d_model]` as stored, gathered from the vocab shards."""
        return await self._weight_rows("embed", token_ids, "embed_rows")

    # --- requests read out in the workers -----------------------------------------------------
    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[Any]:
        """Per `DirectionSet`, `[batch, seq, k]` float32 values, computed in the workers."""
        import torch

        from interp_vllm.tensor_wire import encode_tensor

        calls = self._calls
        calls.require_hooks("project")
        sets = check_direction_sets(directions, calls.facts)
        for item in sets:
            if item.point.name in RECOMPUTED:
                message = f"project at {item.point} on vLLM"
                why = "the workers rebuild attention patterns in the client from q and k"
                raise CapabilityUnsupported.build(message, why, "project at z or attn_out")
        prompts = calls.prompts(tokens)
        calls.may_write(steering)
        await calls.ready()
        addresses = calls.addresses([s.point for s in sets])
        length = len(prompts[0])
        writes = calls.writes(steering, length, f"this call's {length}-token prompt", prompts)
        keys = needed_keys(addresses, calls.has_site)
        vectors = [torch.as_tensor(s.vectors).detach().to("cpu", torch.float32) for s in sets]
        wire = [
            {"key": address_key(a), "vectors": encode_tensor(v.contiguous())}
            for a, v in zip(addresses, vectors, strict=True)
        ]
        capture = sorted(set(keys))
        results = await asyncio.gather(
            *(
                calls.collected(
                    p,
                    {"capture": capture, "steer": wire_for_row(writes, r)},
                    "interp_collect_projected",
                    wire,
                )
                for r, p in enumerate(prompts)
            )
        )
        out = []
        for index, item in enumerate(sets):
            rows = [
                _projected(answers, index, len(p), item)
                for answers, p in zip(results, prompts, strict=True)
            ]
            out.append(torch.stack(rows))
        return out

    # --- fitted lenses -----------------------------------------------------------------------
    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens set in the workers of the last pipeline stage, a full copy per
        tensor-parallel rank; None removes it. Returns the bytes held per rank."""
        from interp_torch.lens import read_lens
        from interp_vllm.tensor_wire import encode_tensor

        self._calls.require_hooks("set_lens_jacobians")
        if not isinstance(name, str) or not name:
            message = f"name={name!r} must be a non-empty string naming the lens set"
            raise InvalidArgument(message)
        checked = None if jacobians is None else read_lens(jacobians, self._calls.facts)
        if checked is None:
            await self._calls.rpc("interp_set_lens", name, None)
            self._lens_held.pop(name, None)
            return 0
        payload = {str(layer): encode_tensor(m.contiguous().cpu()) for layer, m in checked.items()}
        answers = await self._calls.rpc("interp_set_lens", name, payload)
        held = [a for a in answers if a["held"]]
        if not held:
            message = "no vLLM worker holds the final norm to decode a fitted lens through"
            raise CapabilityUnsupported.build(message, None, INSTEAD)
        self._lens_held[name] = sorted(checked)
        return max(int(a["bytes"]) for a in held)

    async def fitted_logit_lens(
        self, prompt: list[int], chosen: list[int], spec: LensSpec, top_k: int, point: str
    ) -> LensResult:
        """`logit_lens` with a fitted lens: each layer's rows through its `J_bar` in the workers."""
        from interp_vllm.tensor_wire import encode_tensor

        calls = self._calls
        check_fitted_layers(spec, self._lens_held, chosen)
        addresses = calls.addresses([Address(point, layer) for layer in chosen])
        keys = [address_key(a) for a in addresses]
        steer = calls.writes(None, len(prompt), f"this lens's {len(prompt)}-token prompt")
        name = spec.jacobian_set
        if calls.pipeline > 1:
            # The rows live on their layers' stages and the lens on the last: capture, then send.
            request = {"capture": keys, "steer": steer}
            _, captured = await calls.request(prompt, calls.sampling(1, 0.0), request)
            blocks = [
                (a.layer, encode_tensor(captured["captured"][k]))
                for a, k in zip(addresses, keys, strict=True)
            ]
            answers = await calls.rpc("interp_fitted_decode_rows", blocks, top_k, name)
            decoded = next((a for a in answers if a is not None), None) or []
            lens = {
                key: {"positions": captured["positions"][key], **block}
                for key, block in zip(keys, decoded, strict=True)
            }
        else:
            request = {"capture": [], "steer": steer, "lens": keys}
            answers = await calls.collected(
                prompt, request, "interp_collect_fitted_lens", top_k, name
            )
            lens = {key: block for a in reversed(answers) for key, block in a["lens"].items()}
        tokenizer = calls.tokenizer()
        predictions = {}
        for layer, key in zip(chosen, keys, strict=True):
            block = lens.get(key)
            if block is None or block["positions"] != list(range(len(prompt))):
                message = f"the vLLM workers returned no fitted-lens rows for {key}"
                raise CapabilityUnsupported.build(message, None, INSTEAD)
            predictions[layer] = tuple(
                tuple(
                    LensPrediction(int(i), tokenizer.decode([int(i)]), float(p))
                    for i, p in zip(ids, probs, strict=True)
                )
                for ids, probs in zip(block["ids"], block["probs"], strict=True)
            )
        return LensResult(point, chosen, top_k, predictions)


def _projected(answers: list[dict[str, Any]], index: int, length: int, item: Any) -> Any:
    """One prompt's `[seq, k]` values of set `index`: whole from one rank, or the sum of every
    rank's partial products; then the bias and the nonlinearity."""
    import torch

    from interp_vllm.tensor_wire import decode_tensor

    parts = [a["projected"][str(index)] for a in answers if str(index) in a.get("projected", {})]
    if not parts or parts[0]["positions"][:length] != list(range(length)):
        message = f"the vLLM workers returned no projection at {item.point}"
        raise CapabilityUnsupported.build(message, None, INSTEAD)
    if parts[0]["partial"]:
        values = sum(decode_tensor(*p["values"]) for p in parts)
    else:
        values = decode_tensor(*parts[0]["values"])
    values = values[:length].to(torch.float32)
    if item.bias is not None:
        values = values + torch.as_tensor(item.bias).detach().to("cpu", torch.float32)
    if item.nonlinearity == "relu":
        values = values.clamp_min(0)
    return values
