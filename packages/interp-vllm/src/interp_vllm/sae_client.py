"""SAE features encoded inside the vLLM workers: the client side of `interp_vllm.sae_worker`.

`worker_features` is what `interp_sae.features(model, tokens, saes, top_k=k)` calls on a vLLM
model: the SAEs are loaded into every worker once (by path, named after their file and point, so
a second call finds them there), each request asks for its SAEs' top-k at their sites, and only
the k indices and values per token come back. The activations never leave the workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.errors import CapabilityUnsupported
from interp_vllm.support import INSTEAD
from interp_vllm.wire import address_key

__all__ = ["VLLMSAEs"]


class VLLMSAEs:
    """Mixed into `VLLMModel`; relies on its request plumbing (`_prompts`, `_request`, ...)."""

    async def worker_features(
        self, tokens: Any, saes: Sequence[dict[str, Any]], *, top_k: int, steering: Any = None
    ) -> list[dict[str, Any]]:
        """Top-k features per token of each SAE, encoded in the workers.

        `saes`: one dict per SAE with `path` (a folder the workers can read), `address` and
        optionally `write_address`. Returns, in order, `{"values": [batch, seq, k] float32,
        "indices": [batch, seq, k] int64}`.
        """
        import torch

        self._require_hooks("worker_features")  # type: ignore[attr-defined]
        prompts = self._prompts(tokens)  # type: ignore[attr-defined]
        self._may_write(steering)  # type: ignore[attr-defined]
        engine = await self._ready()  # type: ignore[attr-defined]
        named = [{**sae, "name": f"{sae['path']}@{sae['address']}"} for sae in saes]
        await engine.collective_rpc("interp_sae_load", args=(named,))
        addresses = self._addresses([to_address(s["address"]) for s in named])  # type: ignore[attr-defined]
        length = len(prompts[0])
        call = f"this call's {length}-token prompt"
        writes = self._writes(steering, length, call, prompts)  # type: ignore[attr-defined]
        wanted: dict[str, list[tuple[str, int]]] = {}
        for sae, address in zip(named, addresses, strict=True):
            wanted.setdefault(address_key(address), []).append((sae["name"], int(top_k)))
        spec = {"capture": [], "steer": writes, "features": wanted}
        results = await asyncio.gather(
            *(self._request(p, self._sampling(1, 0.0), spec) for p in prompts)  # type: ignore[attr-defined]
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
