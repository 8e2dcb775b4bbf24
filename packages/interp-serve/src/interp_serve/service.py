"""The work behind the routes: tokens in, engine calls under the limits, activations stored.

Routes parse HTTP; this module holds what both the OpenAI-compatible and the interp routes do:
turn a prompt into token ids, steering JSON into specs, run a capture and keep its tensors under
a handle with the metadata a response carries.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.shapes import point_shape
from interp_core.steering import SteeringSpec
from interp_serve import tensors as tensor_io
from interp_serve.engine import Engine
from interp_serve.metrics import Metrics
from interp_serve.saes import feature_specs, pick
from interp_serve.settings import ServerSettings
from interp_serve.store import ActivationStore, check_request_bytes
from interp_serve.wire import nested_ids, spec_from_json

__all__ = ["Gone", "Service"]

# Whether the request's client has disconnected (Starlette's `Request.is_disconnected`).
Gone = Callable[[], Awaitable[bool]]

_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


class Service:
    """The model, its engine, the activation store, the settings and the metrics of one app."""

    def __init__(
        self, model: Any, settings: ServerSettings, saes: Mapping[str, Any] | None = None
    ) -> None:
        self.model = model
        self.settings = settings
        # name -> interp_sae.SAE, loaded at start (`--sae`); empty without interp-sae.
        self.saes: dict[str, Any] = dict(saes or {})
        self.name = settings.served_name or model.model_id
        self.engine = Engine(
            model,
            max_concurrency=settings.max_concurrency,
            max_queue=settings.max_queue,
            timeout_s=settings.request_timeout_s,
        )
        self.store = ActivationStore(
            ttl_s=settings.activation_ttl_s,
            request_cap=settings.max_capture_bytes,
            budget=settings.store_budget_bytes,
        )
        self.metrics = Metrics(self.engine)

    # --- inputs ---------------------------------------------------------------------------------
    def check_model(self, name: str) -> None:
        if name != self.name:
            message = (
                f"model {name!r} is not served here: this server serves {self.name!r} "
                f"(GET /v1/models); send model={self.name!r}"
            )
            raise InvalidArgument(message)

    def prompt_ids(self, prompt: str | list[int]) -> list[list[int]]:
        """One prompt as `[[ids]]`: text is tokenized with BOS, as `model.to_tokens` does."""
        if isinstance(prompt, str):
            return nested_ids(self.model.to_tokens(prompt))
        return [list(prompt)]

    def specs(
        self,
        steering: Sequence[Mapping[str, Any]],
        features: Sequence[Any] = (),
        clamp: Sequence[Any] = (),
    ) -> list[SteeringSpec]:
        """The request's specs (JSON), then its feature steering and clamps, in that order."""
        specs = [spec_from_json(s) for s in steering]
        return specs + feature_specs(self.saes, features, clamp)

    def _precheck_bytes(self, points: Sequence[Any], batch: int, seq: int) -> None:
        """Refuse a capture over the cap before computing it, when the model's dtype is known."""
        dtype = str(getattr(self.model, "dtype", "")).removeprefix("torch.")
        itemsize = _ITEMSIZE.get(dtype)
        if itemsize is None:
            return  # checked on the real tensors after the pass instead
        total = 0
        for point in points:
            try:
                shape = point_shape(to_address(point), self.model.facts, batch, seq)
            except Exception:
                return
            total += math.prod(shape) * itemsize
        check_request_bytes(total, self.settings.max_capture_bytes)

    # --- activations ----------------------------------------------------------------------------
    async def keep(
        self, cache: Any, inline: bool, positions: dict[str, list[int]]
    ) -> dict[str, Any]:
        """Store a cache's tensors under a handle; the `interp` metadata for the response."""
        tensors = {str(address): tensor for address, tensor in cache.items()}
        described = tensor_io.describe(tensors)
        size = sum(d["bytes"] for d in described.values())
        check_request_bytes(size, self.settings.max_capture_bytes)
        data = await asyncio.to_thread(tensor_io.encode, tensors)
        handle, ttl = self.store.put(data, {"tensors": described})
        meta: dict[str, Any] = {
            "handle": handle,
            "url": f"/v1/activations/{handle}",
            "expires_in": ttl,
            "bytes": len(data),
            "tensors": described,
            "positions": positions,
        }
        if inline:
            if size > self.settings.inline_max_bytes:
                message = (
                    f"inline: true asks for {size:,} bytes of activations as JSON, over this "
                    f"server's inline cap of {self.settings.inline_max_bytes:,} bytes; fetch them "
                    f"as safetensors from {meta['url']} instead"
                )
                raise CapabilityUnsupported(message)
            meta["inline"] = {key: t.tolist() for key, t in tensors.items()}
        return meta

    async def direct(self, cache: Any, meta: dict[str, Any]) -> bytes:
        """A cache as safetensors bytes for this response only, its metadata inside them.

        Nothing is stored: the bytes go out with the answer, so only the per-request cap
        applies. `meta` (positions, a generation) travels as JSON in the `interp` metadata key.
        """
        tensors = {str(address): tensor for address, tensor in cache.items()}
        described = tensor_io.describe(tensors)
        check_request_bytes(
            sum(d["bytes"] for d in described.values()), self.settings.max_capture_bytes
        )
        header = {"interp": json.dumps({**meta, "tensors": described})}
        return await asyncio.to_thread(tensor_io.encode, tensors, header)

    async def capture(
        self,
        tokens: list[Any],
        points: list[str],
        steering: list[SteeringSpec],
        attention_mask: Any = None,
        gone: Gone | None = None,
    ) -> Any:
        batch, seq = _batch_and_seq(tokens)
        if batch and seq:
            self._precheck_bytes(points, batch, seq)
        kwargs: dict[str, Any] = {"steering": steering}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        return await self.engine.call(
            "the capture", lambda: self.model.capture(tokens, points, **kwargs), gone
        )

    async def features(
        self,
        tokens: list[Any],
        names: Sequence[str] | None,
        top_k: Any,
        steering: list[SteeringSpec],
        gone: Gone | None = None,
    ) -> tuple[list[str], list[Any]]:
        """Top-k features per token of the named SAEs (all loaded ones by default)."""
        if names is None:
            names = list(self.saes)
        saes = [pick(self.saes, name) for name in names]
        if not saes:
            message = (
                "no SAE to encode with: name at least one in saes (GET /v1/saes lists them)"
                if self.saes
                else "this server loaded no SAE; start it with --sae PATH to serve features"
            )
            raise InvalidArgument(message)
        cap = self.settings.max_top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= cap:
            message = (
                f"top_k={top_k!r}: pass an int from 1 to this server's cap of {cap} (and at "
                f"most each SAE's d_sae); ask the operator to raise --max-top-k for more"
            )
            raise InvalidArgument(message)
        batch, seq = _batch_and_seq(tokens)
        # Indices (int64) and values (float32) per token, per SAE: refused before the pass.
        check_request_bytes(batch * seq * top_k * 12 * len(saes), self.settings.max_capture_bytes)
        from interp_sae import features

        results = await self.engine.call(
            "the features",
            lambda: features(self.model, tokens, saes, top_k=top_k, steering=steering),
            gone,
        )
        return list(names), results

    async def capture_generation(
        self,
        tokens: list[Any],
        points: list[str],
        steering: list[SteeringSpec],
        gone: Gone | None = None,
        **sampling: Any,
    ) -> tuple[Any, Any]:
        return await self.engine.call(
            "the captured generation",
            lambda: self.model.capture_generation(tokens, points, steering=steering, **sampling),
            gone,
        )


def _batch_and_seq(tokens: list[Any]) -> tuple[int, int]:
    """`[batch, seq]` of token ids given as `[seq]` or `[[...], ...]` (0s when ragged or empty;
    the backend refuses those in its own words)."""
    rows = tokens if tokens and all(isinstance(t, list) for t in tokens) else [tokens]
    lengths = {len(row) for row in rows}
    return (len(rows), lengths.pop()) if len(lengths) == 1 else (0, 0)
