"""SAE features encoded inside the vLLM workers: the client side of `interp_vllm.sae_worker`.

`WorkerSAEs.features` is what `VLLMModel.worker_features` delegates to, and that is what
`interp_sae.features(model, tokens, saes, top_k=k)` calls on a vLLM model: the SAEs are loaded
into every worker once (by path, named after their file and point, so a second call finds them
there), each request asks for its SAEs' top-k at their sites, and only the k indices and values
per token come back. The activations never leave the workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.errors import CapabilityUnsupported
from interp_core.write_indices import wire_for_row
from interp_vllm.calls import ModelCalls
from interp_vllm.support import INSTEAD
from interp_vllm.wire import address_key

__all__ = ["WorkerSAEs"]


class WorkerSAEs:
    """A collaborator of `VLLMModel`: its request path (`ModelCalls`) carries the SAE requests."""

    def __init__(self, calls: ModelCalls) -> None:
        self._calls = calls

    async def features(
        self, tokens: Any, saes: Sequence[dict[str, Any]], *, top_k: int, steering: Any = None
    ) -> list[dict[str, Any]]:
        """Top-k features per token of each SAE, encoded in the workers.

        `saes`: one dict per SAE with `path` (a folder the workers can read), `address` and
        optionally `write_address`. Returns, in order, `{"values": [batch, seq, k] float32,
        "indices": [batch, seq, k] int64}`.
        """
        import torch

        calls = self._calls
        calls.require_hooks("worker_features")
        prompts = calls.prompts(tokens)
        calls.may_write(steering)
        named = [{**sae, "name": f"{sae['path']}@{sae['address']}"} for sae in saes]
        await calls.rpc("interp_sae_load", named)
        addresses = calls.addresses([to_address(s["address"]) for s in named])
        length = len(prompts[0])
        call = f"this call's {length}-token prompt"
        writes = calls.writes(steering, length, call, prompts)
        wanted: dict[str, list[tuple[str, int]]] = {}
        for sae, address in zip(named, addresses, strict=True):
            wanted.setdefault(address_key(address), []).append((sae["name"], int(top_k)))
        results = await asyncio.gather(
            *(
                calls.request(
                    p,
                    calls.sampling(1, 0.0),
                    {"capture": [], "steer": wire_for_row(writes, r), "features": wanted},
                )
                for r, p in enumerate(prompts)
            )
        )
        from interp_vllm.sae_worker import decode_features

        out = []
        for sae, address in zip(named, addresses, strict=True):
            values, indices = [], []
            for _, payload in results:
                part = decode_features(payload["features"]).get((address_key(address), sae["name"]))
                if part is None or part["positions"][:length] != list(range(length)):
                    msg = f"the vLLM workers returned no features for {sae['name']}"
                    raise CapabilityUnsupported.build(msg, None, INSTEAD)
                values.append(part["values"][:length])
                indices.append(part["indices"][:length])
            out.append({"values": torch.stack(values), "indices": torch.stack(indices)})
        return out
