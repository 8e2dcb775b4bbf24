"""The `remote` backend: a model on an interp-serve server, behind the same protocol.

`load_model("http://host:8000", backend="remote", api_key=...)` returns a `RemoteModel` that
speaks the `InterpModel` protocol over HTTP: captures come back as tensors (torch when installed,
else numpy; `tensor_type=` chooses), steering specs travel as JSON, and a refusal on the server
is raised here as the same exception class with the same message. Specs made active with
`interp_core.steering.steer(model, ...)` are sent with each call, active ones first.

The model's facts and served points are read once, when the model is loaded; `supports`
verdicts are asked of the server and remembered. Nothing here loads weights: `warmup` is a no-op
(the server warmed its model up), and `shutdown` closes the connections, not the server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from interp_core.address import Address, AddressLike, to_address
from interp_core.cache import ActivationCache
from interp_core.capture_stream import check_rows
from interp_core.errors import BackendUnavailable, CapabilityUnsupported, InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.model_base import CaptureCall, ModelBase, StreamCall
from interp_core.points import PointSpec, get_point
from interp_core.readouts import lens_from_layers
from interp_core.results import Generation, GenerationStep, LensResult, Support
from interp_core.steering import as_specs
from interp_core.writes import admit_writes
from interp_serve import tensors as tensor_io
from interp_serve.injection import remote_fields
from interp_serve.patch_wire import pack_patch_values
from interp_serve.remote_chat import remote_generation_labels, remote_message_spans
from interp_serve.remote_readouts import RemoteReadouts
from interp_serve.remote_stream import stream_capture
from interp_serve.sse_client import server_events
from interp_serve.wire import (
    error_from_json,
    facts_from_json,
    generation_from_json,
    lens_from_json,
    nested_ids,
    specs_to_json,
    step_from_json,
    support_from_json,
)

# generate()'s sampling keywords that travel as top-level completion fields.
_GENERATE_KNOBS = frozenset(
    {
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "use_generation_config",
    }
)

__all__ = ["KEY_ENV", "RemoteBackend", "RemoteModel"]

KEY_ENV = "INTERP_API_KEY"
_INSTALL = "pip install 'interpoint-serve[client]'"


class RemoteBackend:
    """The `remote` entry of `interp.backends`: `load` takes the server's URL as the model."""

    name: ClassVar[str] = "remote"

    def probe(self) -> str | None:
        missing = [m for m in ("httpx", "safetensors") if importlib.util.find_spec(m) is None]
        if missing:
            return f"the remote backend needs {' and '.join(missing)}: {_INSTALL}"
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return Support.no(
            "a remote model serves what its server's backend serves, which only the server knows",
            "load the model and ask model.supports(point), or GET /v1/points on the server",
        )

    def load(
        self,
        model_id: str,
        *,
        num_gpus: int = 1,
        device: object = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        tensor_type: str = "auto",
        **kwargs: Any,
    ) -> RemoteModel:
        if kwargs:
            message = (
                f"backend='remote' does not take {', '.join(sorted(kwargs))}=: the server "
                f"chose how its model is loaded (`interp serve MODEL --dtype ...`); the remote "
                f"backend takes api_key=, timeout= and tensor_type="
            )
            raise InvalidArgument(message)
        if num_gpus != 1 or device is not None:
            message = (
                "num_gpus= and device= are the server's choice on backend='remote'; pass them "
                "to `interp serve` (--num-gpus), not to the client"
            )
            raise CapabilityUnsupported(message)
        return RemoteModel(model_id, api_key=api_key, timeout=timeout, tensor_type=tensor_type)


class _RemoteTokenizer:
    """The server's tokenizer, by HTTP: `encode` and `decode`, and the chat spans its template
    renders on the server (`ModelBase.message_spans` asks a tokenizer with `chat_spans`)."""

    def __init__(self, model: RemoteModel) -> None:
        self._model = model

    def chat_spans(self, messages: Sequence[dict[str, Any]], **options: Any) -> Any:
        return remote_message_spans(self._model._post, messages, **options)

    def generation_labels(self, *args: Any, **kwargs: Any) -> Any:
        remote_generation_labels()

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return nested_ids(self._model.to_tokens(text, prepend_bos=add_special_tokens))[0]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._model.to_string(list(ids)))


class RemoteModel(ModelBase):
    """An `InterpModel` whose work runs on an interp-serve server."""

    binds_event_loop = True  # its async connections belong to the loop that opened them
    graph_refusal = "gradients cannot cross HTTP: capture remotely, differentiate in-process"

    def __init__(
        self, url: str, *, api_key: str | None, timeout: float, tensor_type: str = "auto"
    ) -> None:
        import httpx

        self._url = url.rstrip("/")
        self._model_id = self._url
        if not self._url.startswith(("http://", "https://")):
            message = (
                f"backend='remote' takes the server's URL as the model, got {url!r}; pass "
                f"e.g. 'http://127.0.0.1:8000'"
            )
            raise InvalidArgument(message)
        key = api_key if api_key is not None else os.environ.get(KEY_ENV)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._tensor_type = tensor_io.resolve_tensor_type(tensor_type)
        self._client = httpx.Client(
            base_url=self._url, headers=self._headers, timeout=self._timeout
        )
        self._async: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._verdicts: dict[Address, Support] = {}
        info = self._get("/v1/points")
        self._facts = facts_from_json(info["facts"])
        self._served = tuple(get_point(name) for name in info["served_points"])
        self._served_name = str(info["model"])
        self._server_model_id = str(info["model_id"])
        self._server_backend = str(info["backend"])
        # Weight rows, decoding, probes and fitted lenses (interp_serve.remote_readouts).
        self._readouts = RemoteReadouts(
            self._facts,
            send=self._asend,
            get=self._get,
            steering=self._steering,
            tensor_type=self._tensor_type,
        )

    # --- identity and facts (model_id: the URL, facts, n_layers, d_model: ModelBase) ------------
    @property
    def backend_name(self) -> str:
        return "remote"

    @property
    def server_backend(self) -> str:
        """The backend the server runs the model on ("eager", "vllm", ...)."""
        return self._server_backend

    @property
    def server_model_id(self) -> str:
        return self._server_model_id

    @property
    def tokenizer(self) -> Any:
        return _RemoteTokenizer(self)

    def __repr__(self) -> str:
        return (
            f"RemoteModel({self._url!r}, serving {self._server_model_id} on {self._server_backend})"
        )

    # --- HTTP -----------------------------------------------------------------------------------
    def _raise_for(self, response: Any) -> None:
        if response.status_code < 400:
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        retry = response.headers.get("retry-after")
        raise error_from_json(body, response.status_code, float(retry) if retry else None)

    def _unreachable(self, error: Exception) -> BackendUnavailable:
        message = (
            f"cannot reach the interp-serve server at {self._url} ({type(error).__name__}: "
            f"{error}); start it with `interp serve MODEL`, or check the URL"
        )
        return BackendUnavailable(message)

    def _get(self, path: str) -> Any:
        import httpx

        try:
            response = self._client.get(path)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        self._raise_for(response)
        return response.json()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import httpx

        try:
            response = self._client.post(path, content=_dumps(body), headers=_JSON)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        self._raise_for(response)
        return response.json()

    def _events(self, path: str, body: bytes) -> AsyncIterator[dict[str, Any]]:
        """The JSON events of a server-sent stream from POST `path` (`sse_client`), with this
        model's refusals and its "server unreachable" error."""
        return server_events(
            self._aclient(), path, body, raise_for=self._raise_for, unreachable=self._unreachable
        )

    def _aclient(self) -> Any:
        import asyncio

        import httpx

        loop = asyncio.get_running_loop()
        client = self._async.get(loop)
        if client is None:
            client = httpx.AsyncClient(
                base_url=self._url, headers=self._headers, timeout=self._timeout
            )
            self._async[loop] = client
        return client

    async def _asend(self, method: str, path: str, **kwargs: Any) -> Any:
        """One async request; an error answer or an unreachable server raised as ours."""
        import httpx

        try:
            response = await self._aclient().request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        self._raise_for(response)
        return response

    async def _apost(self, path: str, body: dict[str, Any]) -> Any:
        return (await self._asend("POST", path, content=_dumps(body), headers=_JSON)).json()

    async def _direct(self, body: dict[str, Any]) -> tuple[ActivationCache, dict[str, Any]]:
        """A capture answered with the safetensors bytes themselves: one round trip, nothing
        left in the server's store. Returns the cache and the answer's JSON metadata."""
        tensors, meta = await self._direct_tensors("/v1/capture", body)
        cache = ActivationCache({Address.parse(k): tensors[k] for k in meta["tensors"]})
        return cache, meta

    async def _direct_tensors(
        self, path: str, body: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        import httpx

        body["direct"] = True
        try:
            response = await self._aclient().post(path, content=_dumps(body), headers=_JSON)
        except httpx.TransportError as error:
            raise self._unreachable(error) from error
        self._raise_for(response)
        meta = json.loads(tensor_io.metadata(response.content)["interp"])
        return tensor_io.decode(response.content, self._tensor_type), meta

    def _steering(self, steering: Any) -> list[dict[str, Any]]:
        # The stack merged by the one admission step; the server's backend checks the rest.
        # Patches and ablations expand into set specs here, sized with the served facts.
        # Their rows travel as safetensors (interp_serve.patch_wire), not float lists.
        admitted = admit_writes(self, as_specs(steering, self.facts), None)
        return pack_patch_values(specs_to_json(admitted))

    def _tensor(self, nested: Any) -> Any:
        if self._tensor_type == "torch":
            import torch

            return torch.tensor(nested, dtype=torch.long)
        import numpy as np

        return np.asarray(nested, dtype=np.int64)

    # --- tokens ---------------------------------------------------------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Any:
        answer = self._post("/v1/tokenize", {"text": text, "prepend_bos": prepend_bos})
        return self._tensor(answer["tokens"])

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        body: dict[str, Any] = {"prepend_bos": prepend_bos, "str_tokens": True}
        if isinstance(text, str) or (isinstance(text, list) and text and isinstance(text[0], str)):
            body["text"] = text
        else:
            body["tokens"] = nested_ids(text)
        return list(self._post("/v1/tokenize", body)["str_tokens"])

    def to_string(self, tokens: Any) -> str | list[str]:
        return self._post("/v1/detokenize", {"tokens": nested_ids(tokens)})["text"]

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        return self._served

    def supports(self, point: AddressLike) -> Support:
        address = to_address(point)
        verdict = self._verdicts.get(address)
        if verdict is None:
            answer = self._post("/v1/supports", {"points": [str(address)]})
            verdict = support_from_json(answer["verdicts"][0])
            self._verdicts[address] = verdict
        return verdict

    # --- work -----------------------------------------------------------------------------------
    # capture, capture_generation and logit_lens take their keywords in ModelBase, which
    # hands the hooks below a CaptureCall (the lens: its arguments).
    def _capture_body(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> dict[str, Any]:
        """The fields of a capture request both captures send."""
        return {
            "tokens": None if tokens is None else nested_ids(tokens),
            "points": [str(p) for p in points],
            "steering": self._steering(call.steering),
            **remote_fields(call.prompt_embeds, call.lora),
        }

    async def _capture(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> ActivationCache:
        body = self._capture_body(tokens, points, call)
        if call.attention_mask is not None:
            body["attention_mask"] = nested_ids(call.attention_mask)
        if call.rows is not None:
            ids = body["tokens"]
            length = len(ids[0]) if ids and isinstance(ids[0], list) else len(ids)
            body["rows"] = list(check_rows(call.rows, length) or ())
        cache, _ = await self._direct(body)
        return cache

    async def _capture_generation(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> tuple[Generation, ActivationCache]:
        body = {**self._capture_body(tokens, points, call), "generate": dict(call.sampling)}
        cache, meta = await self._direct(body)
        return generation_from_json(meta["generation"]), cache

    # The server's capture_generation_stream, one chunk per server-sent event (POST
    # /v1/capture/stream, interp_serve.remote_stream); its keywords are read by ModelBase.
    _stream_capture = stream_capture

    def _completion(
        self,
        tokens: Any,
        stream: bool,
        *,
        max_new_tokens: int = 64,
        steering: Any = None,
        n_logprobs: int = 0,
        prompt_logprobs: int | None = None,
        prompt_embeds: Any = None,
        lora: Any = None,
        **knobs: Any,
    ) -> dict:
        """The completions request of one generation; its keywords are `InterpModel.generate`'s,
        which `generate` and `generate_stream` pass on. Only the knobs the caller set travel:
        an unset one is decided on the server, against the checkpoint it serves."""
        ids = [] if tokens is None else nested_ids(tokens)
        if ids and isinstance(ids[0], list):
            if len(ids) != 1:
                message = (
                    f"generation on backend='remote' takes one prompt, got a batch of "
                    f"{len(ids)}; generate each prompt in its own call (they run concurrently)"
                )
                raise CapabilityUnsupported(message)
            ids = ids[0]
        unknown = sorted(set(knobs) - _GENERATE_KNOBS)
        if unknown:
            message = (
                f"generate() got unknown arguments {unknown}; it takes {sorted(_GENERATE_KNOBS)}"
            )
            raise CapabilityUnsupported(message)
        interp: dict[str, Any] = {
            "steering": self._steering(steering),
            **remote_fields(prompt_embeds, lora),
        }
        if n_logprobs:
            interp["n_logprobs"] = n_logprobs
        if prompt_logprobs is not None:
            interp["prompt_logprobs"] = prompt_logprobs
        return {
            "model": self._served_name,
            "prompt": ids,
            "max_tokens": max_new_tokens,
            **{key: value for key, value in knobs.items() if value is not None},
            "stream": stream,
            "interp": interp,
        }

    async def generate(self, tokens: Any, **sampling: Any) -> Generation:
        """`InterpModel.generate` on the server (keywords: max_new_tokens, temperature, top_k,
        top_p, seed, steering)."""
        answer = await self._apost("/v1/completions", self._completion(tokens, False, **sampling))
        return generation_from_json(answer["interp"])

    async def generate_stream(self, tokens: Any, **sampling: Any) -> AsyncIterator[GenerationStep]:
        """`InterpModel.generate_stream` on the server, one step per server-sent event."""

        body = self._completion(tokens, True, **sampling)
        async for data in self._events("/v1/completions", _dumps(body)):
            step = data["interp"]["step"]
            if step is not None:
                yield step_from_json(step)

    async def _prompt_lens(self, tokens: Any, layers: Any, top_k: Any, point: Any) -> LensResult:
        """The lens on the server (POST /v1/lens), which checks its arguments."""
        plain, fitted = lens_from_layers(layers)
        if fitted is not None:  # remote_readouts: POST /v1/lens/fitted
            return await self._readouts.fitted_logit_lens(tokens, fitted, top_k, point)
        layers = plain
        body = {
            "tokens": nested_ids(tokens),
            "layers": None if layers is None else list(layers),
            "top_k": top_k,
            "point": point,
        }
        return lens_from_json(await self._apost("/v1/lens", body))

    # --- read-outs (generate_text, capture_residuals, chat spans: ModelBase) --------------------
    async def capture_attention(self, tokens: Any, layers: Sequence[int]) -> dict[int, Any]:
        message = (
            "capture_attention is not served over HTTP yet; capture the attention points "
            "(attn_scores, attn_probs, v) with capture(), or load the model in-process"
        )
        raise CapabilityUnsupported(message)

    # --- weight rows, decoding, probes, fitted lenses: delegated to remote_readouts -------------
    async def unembed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_U[token_ids]` `[k, d_model]`, read on the server."""
        return await self._readouts.unembed_rows(token_ids)

    async def embed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_E[token_ids]` `[k, d_model]`, read on the server."""
        return await self._readouts.embed_rows(token_ids)

    async def decode_residuals(
        self, residuals: Any, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        """Logits (or `TopTokens` with `top_k`) of residuals decoded on the server."""
        return await self._readouts.decode_residuals(residuals, raw=raw, top_k=top_k)

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[Any]:
        """Per `DirectionSet`, `[batch, seq, k]` float32 values computed on the server."""
        return await self._readouts.project(tokens, directions, steering=steering)

    async def set_lens_jacobians(
        self, jacobians: Any, *, name: str = "default", server_file: str | None = None
    ) -> int:
        """Install a fitted lens set `name` on the server (None removes it): a mapping, a local
        path, or `server_file=` naming a file in its `--lens-dir`. Returns the bytes held."""
        return await self._readouts.set_lens_jacobians(
            jacobians, name=name, server_file=server_file
        )

    def lens_sets(self) -> dict[str, list[int]]:
        """The fitted lens sets installed on the server, and their layers."""
        return self._readouts.lens_sets()

    def _lens_stream(self, tokens: Any, lenses: Any, call: StreamCall) -> AsyncIterator[Any]:
        """The lens over a generation on the server, a step per server-sent event
        (`interp_serve.remote_lens`)."""
        from interp_serve.remote_lens import RemoteLensStream

        stream = RemoteLensStream(
            events=self._events, steering=self._steering, tensor_type=self._tensor_type
        )
        return stream.generate_with_lens(tokens, lenses, call)

    # --- SAEs loaded on the server (interp serve --sae) ---------------------------------------
    def saes(self) -> list[dict[str, Any]]:
        """The SAEs the server loaded: name, address, write_address, d_in, d_sae, ..."""
        return list(self._get("/v1/saes")["saes"])

    async def features(
        self,
        tokens: Any,
        saes: Sequence[str] | None = None,
        *,
        top_k: int,
        steering: Any = None,
    ) -> dict[str, dict[str, Any]]:
        """Top-k features per token of the server's SAEs, by name (all when `saes` is None),
        encoded on the server next to its capture: `{name: {"indices", "values"}}`, each
        `[batch, seq, top_k]`, largest first. Only the top-k cross the network."""
        body: dict[str, Any] = {
            "tokens": nested_ids(tokens),
            "top_k": top_k,
            "steering": self._steering(steering),
        }
        if saes is not None:
            body["saes"] = list(saes)
        tensors, meta = await self._direct_tensors("/v1/features", body)
        return {
            name: {"indices": tensors[f"{name}.indices"], "values": tensors[f"{name}.values"]}
            for name in meta["saes"]
        }

    async def warmup(self) -> None:
        return None

    async def shutdown(self) -> None:
        """Close this client's connections (the server keeps serving)."""
        self._client.close()
        for client in list(self._async.values()):
            try:
                await client.aclose()
            except RuntimeError:  # its loop is gone; the sockets went with it
                pass
        self._async.clear()


_JSON = {"Content-Type": "application/json"}


def _dumps(body: dict[str, Any]) -> bytes:
    # Strict JSON when possible; a NaN sampling argument still travels (as Python's json spells
    # it) so the server refuses it in the core's words, as an in-process call would.
    try:
        return json.dumps(body, allow_nan=False).encode()
    except ValueError:
        return json.dumps(body).encode()
