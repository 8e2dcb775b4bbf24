"""The remote backend's read-outs: weight rows, residual decoding, probes, fitted lenses.

`RemoteReadouts` is a collaborator `RemoteModel` holds and delegates to; it is given the model's
HTTP calls (`send`, `get`), its steering admission and its tensor type, never the model itself.
Tensors go up and come back as safetensors bytes
(`interp_serve.readout_routes`), never as JSON lists; a fitted lens mapping is uploaded in our
lens layout; a path is read here without executing code (safetensors, or
`torch.load(weights_only=True)` for the `.pt` layouts) and checked against the server's model
before anything is sent; a file the server holds is named with `server_file=`.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.readouts import (
    DirectionSet,
    LensSpec,
    TopTokens,
    check_direction_sets,
    check_jacobians,
    check_token_ids,
    jacobian_mapping,
    load_torch_lens,
    require_lens_file,
)
from interp_core.results import LensResult
from interp_serve import tensors as tensor_io
from interp_serve.wire import lens_from_json, nested_ids

__all__ = ["RemoteReadouts"]

_BINARY = {"Content-Type": "application/octet-stream"}


class RemoteReadouts:
    """The read-outs of one `RemoteModel`: `send(method, path, **kwargs)` is its async HTTP
    request (an error answer or an unreachable server raised as the library's error), `get(path)`
    its sync JSON GET, `steering` turns a call's steering into the wire's specs."""

    def __init__(
        self,
        facts: ModelFacts,
        *,
        send: Callable[..., Awaitable[Any]],
        get: Callable[[str], Any],
        steering: Callable[[Any], list[dict[str, Any]]],
        tensor_type: str,
    ) -> None:
        self._facts = facts
        self._send = send
        self._get = get
        self._steering = steering
        self._tensor_type = tensor_type

    async def _tensors_from(self, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._send("POST", path, **kwargs)
        return tensor_io.decode(response.content, self._tensor_type)

    def _upload(self, tensors: dict[str, Any], meta: dict[str, Any]) -> bytes:
        return tensor_io.encode(tensors, {"interp": json.dumps(meta)})

    async def unembed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_U[token_ids]` `[k, d_model]`, read on the server."""
        ids = check_token_ids(token_ids, self._facts.vocab_size, "unembed_rows")
        body = json.dumps({"token_ids": ids}).encode()
        got = await self._tensors_from("/v1/unembed_rows", content=body, headers=_JSON)
        return got["rows"]

    async def embed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_E[token_ids]` `[k, d_model]`, read on the server."""
        ids = check_token_ids(token_ids, self._facts.vocab_size, "embed_rows")
        body = json.dumps({"token_ids": ids}).encode()
        got = await self._tensors_from("/v1/embed_rows", content=body, headers=_JSON)
        return got["rows"]

    async def decode_residuals(
        self, residuals: Any, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        """Logits (or `TopTokens`) of residuals decoded on the server; the residuals go up as
        safetensors, and with `top_k` only `[..., k]` comes back."""
        meta = {"raw": bool(raw), "top_k": top_k}
        data = self._upload({"residuals": residuals}, meta)
        got = await self._tensors_from("/v1/decode_residuals", content=data, headers=_BINARY)
        if "logits" in got:
            return got["logits"]
        return TopTokens(got["ids"], got["probs"])

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[Any]:
        """Per `DirectionSet`, `[batch, seq, k]` float32 values computed on the server."""
        sets: list[DirectionSet] = check_direction_sets(directions, self._facts)
        tensors: dict[str, Any] = {}
        for index, item in enumerate(sets):
            tensors[f"vectors.{index}"] = item.vectors
            if item.bias is not None:
                tensors[f"bias.{index}"] = item.bias
        meta = {
            "tokens": nested_ids(tokens),
            "sets": [{"point": str(s.point), "nonlinearity": s.nonlinearity} for s in sets],
            "steering": self._steering(steering),
        }
        data = self._upload(tensors, meta)
        got = await self._tensors_from("/v1/project", content=data, headers=_BINARY)
        return [got[f"values.{index}"] for index in range(len(sets))]

    async def set_lens_jacobians(
        self, jacobians: Any, *, name: str = "default", server_file: str | None = None
    ) -> int:
        """Install a fitted lens on the server as the set `name` (None removes it): a mapping or
        a local path (checked here, uploaded as safetensors), or `server_file=` naming a file in
        the server's `--lens-dir`. Returns the bytes the server holds for it."""
        path = f"/v1/lens_jacobians/{name}"
        if server_file is not None:
            body = json.dumps({"file": server_file}).encode()
            answer = (await self._send("PUT", path, content=body, headers=_JSON)).json()
            return int(answer["bytes"])
        if jacobians is None:
            await self._send("DELETE", path)
            return 0
        matrices = _local_lens(jacobians, self._facts)
        data = tensor_io.encode({f"J.{layer}": m for layer, m in matrices.items()})
        answer = (await self._send("PUT", path, content=data, headers=_BINARY)).json()
        return int(answer["bytes"])

    def lens_sets(self) -> dict[str, list[int]]:
        """The fitted lens sets installed on the server, and their layers."""
        sets = self._get("/v1/lens_jacobians")["sets"]
        return {str(k): [int(x) for x in v] for k, v in sets.items()}

    async def fitted_logit_lens(
        self, tokens: Any, spec: LensSpec, top_k: int, point: str
    ) -> LensResult:
        body = {
            "tokens": nested_ids(tokens),
            "layers": None if spec.layers is None else list(spec.layers),
            "jacobian_set": spec.jacobian_set,
            "top_k": top_k,
            "point": point,
        }
        response = await self._send(
            "POST", "/v1/lens/fitted", content=json.dumps(body).encode(), headers=_JSON
        )
        return lens_from_json(response.json())


_JSON = {"Content-Type": "application/json"}


def _local_lens(jacobians: Any, facts: Any) -> dict[int, Any]:
    """The lens as `{layer: J_bar}`, checked against the server's model before the upload."""
    meta: dict[str, str] = {}
    if isinstance(jacobians, dict):
        name = "the lens mapping"
        flat = all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in jacobians)
        mapping = dict(jacobians) if flat else jacobian_mapping(jacobians, name)
    elif isinstance(jacobians, str) or hasattr(jacobians, "__fspath__"):
        name = str(jacobians)
        checkpoint, meta = _read_file(Path(jacobians))
        mapping = jacobian_mapping(checkpoint, name)
    else:
        message = f"set_lens_jacobians takes a mapping or a path, got {type(jacobians).__name__}"
        raise InvalidArgument(message)
    return check_jacobians(mapping, facts, name, meta)


def _read_file(path: Path) -> tuple[Any, dict[str, str]]:
    """A lens file read without executing code: safetensors, or torch.load(weights_only=True)."""
    require_lens_file(path)
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        framework = "pt" if importlib.util.find_spec("torch") is not None else "numpy"
        with safe_open(str(path), framework=framework) as handle:
            meta = dict(handle.metadata() or {})
            return {key: handle.get_tensor(key) for key in handle.keys()}, meta
    try:
        import torch
    except ImportError as error:
        message = f"{path} is a torch file; reading it needs torch"
        raise CapabilityUnsupported.build(message, None, "save it as safetensors") from error
    return load_torch_lens(torch, path), {}
