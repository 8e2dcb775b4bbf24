"""The remote backend's lens over a generation: `POST /v1/lens/generate`, read event by event.

`RemoteLensStream` is given the remote model's HTTP pieces (its async client, how it raises an
error answer, how it words an unreachable server, how it sends steering) and yields each
`LensStep` as its server-sent event arrives, with the ids and probabilities as the model's
tensor type (torch or numpy).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from interp_core.lens_generation import LensStep
from interp_core.model_base import StreamCall
from interp_serve.lens_routes import lens_to_json, step_from_json
from interp_serve.wire import nested_ids

__all__ = ["RemoteLensStream"]


class RemoteLensStream:
    def __init__(
        self,
        *,
        events: Callable[[str, bytes], AsyncIterator[dict[str, Any]]],
        steering: Callable[[Any], list[dict[str, Any]]],
        tensor_type: str,
    ) -> None:
        self._events = events
        self._steering = steering
        self._tensor_type = tensor_type

    def _tensor(self, nested: Any, kind: str) -> Any:
        if self._tensor_type == "torch":
            import torch

            return torch.tensor(nested, dtype=torch.int64 if kind == "ids" else torch.float32)
        import numpy as np

        return np.asarray(nested, dtype=np.int64 if kind == "ids" else np.float32)

    async def generate_with_lens(
        self, tokens: Any, lenses: Any, call: StreamCall
    ) -> AsyncIterator[LensStep]:
        """The steps of `POST /v1/lens/generate`, for the keywords `ModelBase.generate_with_lens`
        read (the knobs set travel; the server's schema refuses any it does not take)."""
        listed = [lenses] if not isinstance(lenses, list | tuple) else list(lenses)
        mask = call.read["word_mask"]
        mask = mask.tolist() if hasattr(mask, "tolist") else mask
        ids = nested_ids(tokens)
        body = {
            "tokens": ids[0] if ids and isinstance(ids[0], list) and len(ids) == 1 else ids,
            "lenses": [lens_to_json(lens) for lens in listed],
            **call.read,
            "word_mask": None if mask is None else list(mask),
            "steering": self._steering(call.steering),
            # max_new_tokens travels even as None, for the server to refuse in the core's words.
            "max_new_tokens": call.sampling["max_new_tokens"],
            **{key: value for key, value in call.sampling.items() if value is not None},
        }
        async for data in self._events("/v1/lens/generate", json.dumps(body).encode()):
            yield step_from_json(data, self._tensor)
