"""The work behind the routes: tokens in, engine calls under the limits, activations stored.

Routes parse HTTP; this module holds what both the OpenAI-compatible and the interp routes do:
turn a prompt into token ids, steering JSON into specs, run a capture and keep its tensors under
a handle with the metadata a response carries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import ctypes.util
import functools
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from interp_core.chat import check_chat_template
from interp_core.chat_formats import TEMPLATE, format_text, resolve_chat_format
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.protocol import InterpModel
from interp_core.readouts import check_token_ids
from interp_core.results import Generation, GenerationStep, LensResult
from interp_core.sampling import check_lens_top_k
from interp_core.steering import SteeringSpec
from interp_serve import tensors as tensor_io
from interp_serve.engine import Engine
from interp_serve.injection import ServedAdapters, decode_prompt_embeds
from interp_serve.inputs import check_ids, check_text, text_chars
from interp_serve.metrics import Metrics
from interp_serve.patch_wire import unpack_patch_values
from interp_serve.pricing import (
    check_answer,
    check_capture,
    check_decode,
    check_forward,
    value_bytes,
)
from interp_serve.saes import feature_specs, pick
from interp_serve.settings import ServerSettings
from interp_serve.store import ActivationStore, check_request_bytes
from interp_serve.wire import nested_ids, spec_from_json

__all__ = ["Gone", "Service"]

# Whether the request's client has disconnected (Starlette's `Request.is_disconnected`).
Gone = Callable[[], Awaitable[bool]]

# Characters past which a tokenization hands its freed memory back to the system afterwards.
_LARGE_TEXT = 65_536


def release_freed_memory() -> None:
    """Return the C heap's free pages to the system (glibc's `malloc_trim`; elsewhere nothing).

    A tokenizer's peak on a long text is tens of bytes per character in many small native
    allocations; freed, they stay in the heap as free pages the process still counts, and the
    next long text lands on a new peak. Trimming after each long one keeps the resident size
    where the first one left it.
    """
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.cache
def _libc() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None)
    except OSError:
        return None


class Service:
    """The model, its engine, the activation store, the settings and the metrics of one app.

    Every call a route makes on the model goes through here: tokenizing (capped, and off the
    event loop), the engine's work (priced, then run under the engine's limits) and the
    activations kept for the key that captured them.
    """

    def __init__(
        self, model: InterpModel, settings: ServerSettings, saes: Mapping[str, Any] | None = None
    ) -> None:
        self.model = model
        self.settings = settings
        # name -> interp_sae.SAE, loaded at start (`--sae`); empty without interp-sae.
        self.saes: dict[str, Any] = dict(saes or {})
        self.name = settings.served_name or model.model_id
        self.adapters = ServedAdapters(settings.loras)
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
        # Bytes per activation value, when the model says its dtype (else captures are checked
        # on the real tensors after the pass, and forwards are not priced).
        self.itemsize = value_bytes(getattr(model, "dtype", None))
        # Tokenizing runs here, off the event loop (a long text would freeze /health), on one
        # thread: a tokenizer's large transient allocations then stay in one malloc arena that
        # each call reuses, instead of a new peak per pool thread.
        self._text = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="interp-serve-text"
        )

    @property
    def backend_name(self) -> str:
        return self.model.backend_name

    # --- inputs ---------------------------------------------------------------------------------
    def check_model(self, name: str) -> None:
        if name != self.name:
            message = (
                f"model {name!r} is not served here: this server serves {self.name!r} "
                f"(GET /v1/models); send model={self.name!r}"
            )
            raise InvalidArgument(message)

    def call_inputs(self, prompt_embeds: str | None, lora: str | None) -> dict[str, Any]:
        """A request's embeddings prompt and adapter as the backend's keywords (none unset)."""
        inputs: dict[str, Any] = {}
        if prompt_embeds is not None:
            cap = self.settings.max_body_bytes
            inputs["prompt_embeds"] = decode_prompt_embeds(prompt_embeds, cap)
        adapter = self.adapters.pick(lora)
        if adapter is not None:
            inputs["lora"] = adapter
        return inputs

    def ids(self, tokens: Any, what: str = "tokens", *, in_range: bool = False) -> Any:
        """A request's token ids, checked to be ints (not bools) `[seq]` or `[[...], ...]`;
        with `in_range`, also inside the vocabulary (see `inputs.check_ids`)."""
        return check_ids(tokens, self.model.facts.vocab_size, what, in_range=in_range)

    async def _on_text_thread(self, work: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._text, work)

    async def tokenize(self, text: Any, prepend_bos: bool = True) -> list[Any]:
        """Text (one string or a list) as nested token-id lists, `model.to_tokens`'s answer."""
        check_text(text, self.settings.max_text_chars)

        def work() -> list[Any]:
            ids = nested_ids(self.model.to_tokens(text, prepend_bos=prepend_bos))
            if (text_chars(text) or 0) > _LARGE_TEXT:
                release_freed_memory()
            return ids

        return await self._on_text_thread(work)

    async def json_bytes(self, answer: Any) -> bytes:
        """`answer` as JSON bytes, encoded off the event loop (a long token list takes a while)."""
        return await self._on_text_thread(lambda: json.dumps(answer).encode())

    async def str_tokens(self, source: Any, prepend_bos: bool = True) -> list[Any]:
        if text_chars(source) is not None:
            check_text(source, self.settings.max_text_chars)
            if isinstance(source, list):
                # One string per token of one sequence, as for a batch of ids.
                if len(source) != 1:
                    message = (
                        f"str_tokens splits one text, got a list of {len(source)}; send one "
                        f"string (or one per request)"
                    )
                    raise CapabilityUnsupported(message)
                source = source[0]
        elif isinstance(source, list):
            source = self.ids(source, in_range=True)
        else:
            message = (
                f"str_tokens needs text (a string or a list of strings) or tokens (a list of "
                f"ids), got {type(source).__name__}; send one of them"
            )
            raise InvalidArgument(message)
        return await self._on_text_thread(
            lambda: self.model.to_str_tokens(source, prepend_bos=prepend_bos)
        )

    async def detokenize(self, tokens: Any) -> Any:
        ids = self.ids(tokens, in_range=True)
        return await self._on_text_thread(lambda: self.model.to_string(ids))

    async def prompt_ids(self, prompt: str | list[int]) -> list[list[int]]:
        """One prompt as `[[ids]]`: text is tokenized with BOS, as `model.to_tokens` does."""
        if isinstance(prompt, str):
            return await self.tokenize(prompt)
        return [self.ids(list(prompt), "prompt")]

    async def chat_ids(self, messages: list[dict[str, Any]]) -> list[list[int]]:
        """Chat messages rendered with the model's template, as `[[ids]]`."""
        tokenizer = self.model.tokenizer
        # A checkpoint that defines its chat format in code is rendered with ours.
        chat_format = resolve_chat_format(tokenizer, None, self.model.facts)
        if chat_format == TEMPLATE:
            check_chat_template(tokenizer)
        if not messages:
            message = "messages is empty: a chat completion needs at least one message"
            raise InvalidArgument(message)
        for item in messages:
            check_text(item["content"], self.settings.max_text_chars, "a message's content")

        def render() -> str:
            if chat_format != TEMPLATE:
                return format_text(chat_format, messages, add_generation_prompt=True)
            return tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )

        text = await self._on_text_thread(render)
        check_text(text, self.settings.max_text_chars, "the rendered chat")
        # The template writes its own BOS where the model wants one.
        return (await self.tokenize(text, prepend_bos=False))[:1]

    async def message_spans(
        self, messages: list[dict[str, Any]], generated: Any, **options: Any
    ) -> tuple[Any, Any]:
        """The chat's text, ids and spans (`model.message_spans`, which picks the chat format from
        the checkpoint's facts too), and, where `generated` ids are given, their channel labels;
        on the text thread, the rendered chat checked against the text cap."""
        fmt, chat_format = options.get("fmt"), options.get("chat_format")

        def work() -> tuple[Any, Any]:
            chat = self.model.message_spans(messages, **options)
            check_text(chat.text, self.settings.max_text_chars, "the rendered chat")
            if generated is None:
                return chat, None
            labels = self.model.generation_labels(
                chat.token_ids, generated, fmt=fmt, chat_format=chat_format
            )
            return chat, labels

        return await self._on_text_thread(work)

    def specs(
        self,
        steering: Sequence[Mapping[str, Any]],
        features: Sequence[Any] = (),
        clamp: Sequence[Any] = (),
    ) -> list[SteeringSpec]:
        """The request's specs (JSON), then its feature steering and clamps, in that order."""
        specs = [spec_from_json(s) for s in unpack_patch_values(steering)]
        return specs + feature_specs(self.saes, features, clamp)

    def lens_top_k(self, top_k: Any) -> int:
        """A lens `top_k`, checked by the core, then capped by this server and the vocabulary."""
        top_k = check_lens_top_k(top_k)
        cap = min(self.settings.max_top_k, self.model.facts.vocab_size)
        if top_k > cap:
            message = (
                f"top_k={top_k} guesses per layer and position is over this server's cap of "
                f"{cap} (the answer grows with it); ask for at most {cap}, or ask the operator "
                f"to raise --max-top-k"
            )
            raise InvalidArgument(message)
        return top_k

    # --- prices ---------------------------------------------------------------------------------
    def price(
        self, what: str, tokens: list[Any], points: Sequence[Any] = (), extra: Any = 0
    ) -> None:
        """Refuse (413) a request whose forward, or whose capture of `points`, is priced over
        its cap, before anything runs; `extra` is the positions a generation adds."""
        if self.itemsize is None:
            return
        rows, length = _batch_and_seq(tokens)
        if not rows or not length:
            return  # ragged or empty: the backend refuses it in its own words
        facts = self.model.facts
        if isinstance(extra, int) and not isinstance(extra, bool) and extra > 0:
            # Never past the context: a longer ask is refused by the core in its own words.
            length = min(length + extra, facts.max_position_embeddings or length + extra)
        check_capture(points, facts, self.itemsize, rows, length, self.settings.max_capture_bytes)
        check_forward(facts, self.itemsize, rows, length, self.settings.max_forward_bytes, what)

    # --- engine calls ---------------------------------------------------------------------------
    async def generate(
        self,
        tokens: list[Any] | None,
        steering: list[SteeringSpec],
        gone: Gone | None,
        inputs: Mapping[str, Any] | None = None,
        **sampling: Any,
    ) -> Generation:
        # The prompt's forward: each later step runs one token per row against the KV cache,
        # which the backend sizes itself.
        self.price("this generation", _priced(tokens, inputs))
        kwargs = {**sampling, **(inputs or {})}
        return await self.engine.call(
            "the generation",
            lambda: self.model.generate(tokens, steering=steering, **kwargs),
            gone,
        )

    def generate_stream(
        self, tokens: list[Any] | None, steering: list[SteeringSpec], **sampling: Any
    ) -> AsyncIterator[GenerationStep]:
        self.price("this generation", _priced(tokens, sampling))
        return self.engine.stream(
            "the stream",
            lambda: self.model.generate_stream(tokens, steering=steering, **sampling),
        )

    def capture_generation_stream(
        self, tokens: list[Any], points: list[str], steering: list[SteeringSpec], **options: Any
    ) -> AsyncIterator[Any]:
        """A captured generation whose chunks arrive while it runs (`capture_stream_routes`): the
        forward priced over the prompt and every position the generation may add."""
        tokens = self.ids(tokens)
        extra = options.get("max_new_tokens")
        self.price("this streamed capture", tokens, points, extra=extra)
        return self.engine.stream(
            "the streamed capture",
            lambda: self.model.capture_generation_stream(
                tokens, points, steering=steering, **options
            ),
        )

    def generate_with_lens(
        self,
        tokens: list[Any],
        lenses: list[Any],
        steering: list[SteeringSpec],
        *,
        top_n: Any,
        max_new_tokens: Any,
        **options: Any,
    ) -> AsyncIterator[Any]:
        """The lens over a generation (`lens_routes`): `top_n` capped like a lens's `top_k`, the
        forward priced over the prompt and every position the generation may add."""
        tokens = self.ids(tokens)
        top_n = self.lens_top_k(top_n)
        self.price("this lens over a generation", tokens, extra=max_new_tokens)
        return self.engine.stream(
            "the lens over a generation",
            lambda: self.model.generate_with_lens(
                tokens,
                lenses,
                top_n=top_n,
                max_new_tokens=max_new_tokens,
                steering=steering,
                **options,
            ),
        )

    async def logit_lens(
        self, tokens: list[Any], layers: Any, top_k: Any, point: Any, gone: Gone | None = None
    ) -> LensResult:
        tokens = self.ids(tokens)
        top_k = self.lens_top_k(top_k)
        self.price("this lens", tokens)
        return await self.engine.call(
            "the logit lens",
            lambda: self.model.logit_lens(tokens, layers, top_k=top_k, point=point),
            gone,
        )

    # --- read-outs (readout_routes) ----------------------------------------------------------
    async def weight_rows(self, which: str, token_ids: Any, gone: Gone | None = None) -> Any:
        """`unembed_rows` or `embed_rows` of a flat list of in-vocabulary ids, the answer
        (`[k, d_model]`) priced against the per-request cap before it is gathered."""
        if which not in ("unembed_rows", "embed_rows"):
            raise AssertionError(which)  # the routes name one of the two
        # Ints (not bools, not nested lists) inside the vocabulary, as every backend checks them.
        ids = check_token_ids(token_ids, self.model.facts.vocab_size, which)
        size = len(ids) * self.model.facts.d_model * (self.itemsize or 4)
        check_answer(which, size, self.settings.max_capture_bytes)
        method = getattr(self.model, which)
        return await self.engine.call(which, lambda: method(ids), gone)

    async def decode_residuals(
        self, residuals: Any, top_k: Any, raw: bool, gone: Gone | None = None
    ) -> Any:
        """Residuals `[..., d_model]` to logits (or top-k), the logits priced before they run."""
        facts = self.model.facts
        shape = tuple(getattr(residuals, "shape", ()))
        if not shape or shape[-1] != facts.d_model:
            message = (
                f"residuals has shape {list(shape)}; decode_residuals takes [..., d_model] with "
                f"d_model={facts.d_model} (this model's width)"
            )
            raise InvalidArgument(message)
        kwargs: dict[str, Any] = {"raw": raw}
        if top_k is not None:
            kwargs["top_k"] = top_k = self.lens_top_k(top_k)
        rows = math.prod(shape[:-1])
        check_decode(
            facts,
            self.itemsize or 4,
            rows,
            top_k,
            self.settings.max_forward_bytes,
            self.settings.max_capture_bytes,
        )
        return await self.engine.call(
            "decode_residuals", lambda: self.model.decode_residuals(residuals, **kwargs), gone
        )

    async def project(
        self,
        tokens: list[Any],
        sets: Sequence[Any],
        steering: list[SteeringSpec],
        gone: Gone | None = None,
    ) -> list[Any]:
        """Direction sets evaluated where the activations are: the forward and the activations
        of the sets' points priced like a capture, the `[batch, seq, k]` float32 answer too."""
        tokens = self.ids(tokens, in_range=True)
        # A DirectionSet checked its vectors ([k, width]) and bias when it was built.
        self.price("this projection", tokens, [d.point for d in sets])
        rows, length = _batch_and_seq(tokens)
        k = sum(d.k for d in sets)
        check_answer("this projection", rows * length * k * 4, self.settings.max_capture_bytes)
        return await self.engine.call(
            "project",
            lambda: self.model.project(tokens, sets, steering=steering or None),
            gone,
        )

    async def set_lens(self, source: Any, name: str, gone: Gone | None = None) -> int:
        """Install (or, with None, remove) a fitted lens set; the bytes it holds."""
        held = await self.engine.call(
            "set_lens_jacobians",
            lambda: self.model.set_lens_jacobians(source, name=name),
            gone,
        )
        return int(held or 0)

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted lens sets and their layers ({} on a model without them)."""
        listed = getattr(self.model, "lens_sets", None)
        return dict(listed()) if callable(listed) else {}

    # --- activations ----------------------------------------------------------------------------
    async def keep(
        self, cache: Any, inline: bool, positions: dict[str, list[int]], owner: str = ""
    ) -> dict[str, Any]:
        """Store a cache's tensors under a handle of `owner` (the key that asked; see
        `store.owner_of`); the `interp` metadata for the response."""
        tensors = {str(address): tensor for address, tensor in cache.items()}
        described = tensor_io.describe(tensors)
        size = sum(d["bytes"] for d in described.values())
        check_request_bytes(size, self.settings.max_capture_bytes)
        data = await asyncio.to_thread(tensor_io.encode, tensors)
        handle, ttl = self.store.put(data, {"tensors": described}, owner)
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

    def fetch(self, handle: str, owner: str) -> bytes | None:
        return self.store.get(handle, owner)

    def drop(self, handle: str, owner: str) -> bool:
        return self.store.delete(handle, owner)

    async def shutdown(self) -> None:
        await self.engine.shutdown()
        self._text.shutdown(wait=False, cancel_futures=True)

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
        inputs: Mapping[str, Any] | None = None,
        rows: Any = None,
    ) -> Any:
        tokens = _checked_or_placeholders(self, tokens, inputs)
        self.price("this capture", _priced(tokens, inputs), points)
        kwargs: dict[str, Any] = {"steering": steering, **(inputs or {})}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if rows is not None:
            kwargs["rows"] = rows
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
        tokens = self.ids(tokens)
        batch, seq = _batch_and_seq(tokens)
        # Indices (int64) and values (float32) per token, per SAE: refused before the pass.
        check_request_bytes(batch * seq * top_k * 12 * len(saes), self.settings.max_capture_bytes)
        self.price("this features pass", tokens)
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
        inputs: Mapping[str, Any] | None = None,
        **sampling: Any,
    ) -> tuple[Any, Any]:
        tokens = _checked_or_placeholders(self, tokens, inputs)
        more = sampling.get("max_new_tokens")
        self.price("this captured generation", _priced(tokens, inputs), points, extra=more)
        kwargs = {**sampling, **(inputs or {})}
        return await self.engine.call(
            "the captured generation",
            lambda: self.model.capture_generation(tokens, points, steering=steering, **kwargs),
            gone,
        )


def _checked_or_placeholders(service: Service, tokens: Any, inputs: Any) -> Any:
    """The request's checked ids; None when the embeddings rows are the whole prompt."""
    if tokens is None:
        rows = (inputs or {}).get("prompt_embeds")
        if rows is None or isinstance(rows, Mapping):
            message = (
                "the request has no tokens; send tokens, or prompt_embeds without positions "
                "(the rows are then the whole prompt)"
            )
            raise InvalidArgument(message)
        return None
    return service.ids(tokens)


def _priced(tokens: Any, inputs: Any) -> list[Any]:
    """What a forward is priced on: the ids, or one position per row of a whole-embeds prompt."""
    if tokens is None:
        return [0] * int(inputs["prompt_embeds"].shape[0])
    return tokens


def _batch_and_seq(tokens: list[Any]) -> tuple[int, int]:
    """`[batch, seq]` of token ids given as `[seq]` or `[[...], ...]` (0s when ragged or empty;
    the backend refuses those in its own words)."""
    rows = tokens if tokens and all(isinstance(t, list) for t in tokens) else [tokens]
    lengths = {len(row) for row in rows}
    return (len(rows), lengths.pop()) if len(lengths) == 1 else (0, 0)
