"""What is the same in every backend's model, whatever runs its forward?

`ModelBase` is the shared half of an `interp_core.protocol.InterpModel`, written once for the
eager, vLLM and remote backends and the core's test fake (a third-party backend may derive it
too). It needs no tensor library: what it reads of a tensor is `.shape`, `[0]`, `.tolist()` and,
for a flat row, `.unsqueeze(0)` (torch) or `[None]` (numpy).

* **Identity**: `model_id`, `facts`, `n_layers` and `d_model`, read from the `_model_id` and
  `_facts` a subclass sets in its `__init__`.
* **Conveniences** written over the subclass's own `capture` and `generate` (so steering made
  active with `steer(model, ...)` applies to them as to those calls): `generate_text`,
  `capture_residuals`, and the chat spans (`message_spans`, `message_partition`,
  `generation_labels`) of its `tokenizer`. `capture_attention` is refused here; the torch
  backends serve it from `interp_torch.readouts`. Their blocking forms are the twins of
  `interp_core.sync`.
* **The work methods' keywords**: `capture`, `capture_generation` and `logit_lens` take the
  protocol's keywords here, once, read the points (`interp_core.address.to_addresses`) and hand
  the backend's `_capture` / `_capture_generation` a `CaptureCall` and its `_prompt_lens` the
  lens's arguments; `_lens_arguments` checks those where the backend reads them.
* **The streams' keywords**: `capture_generation_stream` and `generate_with_lens` take the
  protocol's keywords here, once, and hand the backend's `_stream_capture` / `_lens_stream` a
  `StreamCall` (the generation's keywords under `generate`'s names); a backend without the
  stream keeps the refusal written here.

A subclass states, as the class attribute `graph_refusal`, why `capture_residuals(detach=False)`
cannot keep an autograd graph on it; None (eager) passes `detach=False` on to its `capture`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from interp_core.address import Address, to_addresses
from interp_core.capture_stream import refuse_rows_without_tokens
from interp_core.channels import generation_labels
from interp_core.chat import ChatSpans, message_spans
from interp_core.chat_formats import TEMPLATE, format_generation_labels, resolve_chat_format
from interp_core.errors import CapabilityUnsupported, GradientsUnsupported, InvalidArgument
from interp_core.generation_config import read_generation_config, recommended_sampling
from interp_core.readouts import lens_from_layers
from interp_core.sampling import (
    Sampling,
    check_lens_layers,
    check_lens_point,
    check_lens_top_k,
    resolve_sampling,
)

if TYPE_CHECKING:
    from interp_core.cache import ActivationCache
    from interp_core.facts import ModelFacts
    from interp_core.results import Generation, LensResult

__all__ = [
    "LENS_SAMPLING",
    "CaptureCall",
    "ModelBase",
    "StreamCall",
    "check_lens_sampling",
    "generation_reach",
    "one_prompt",
]

# The sampling knobs a lens over a generation takes (besides max_new_tokens) in-process.
LENS_SAMPLING = ("temperature", "top_k", "top_p", "seed", "min_p", "use_generation_config")


def one_prompt(model: Any, tokens: Any, method: str) -> Any:
    """`tokens` as one prompt (`[1, seq]` or a flat list); a string is tokenized with the model's
    `to_tokens`, and a batch of several rows is refused."""
    if isinstance(tokens, str):
        tokens = model.to_tokens(tokens)
    shape = getattr(tokens, "shape", None)
    if shape is not None:
        rows = 1 if len(shape) < 2 else int(shape[0])
        if len(shape) == 1:
            unsqueeze = getattr(tokens, "unsqueeze", None)  # torch; numpy takes [None]
            tokens = unsqueeze(0) if unsqueeze is not None else tokens[None]
    elif isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], (list, tuple)):
        rows = len(tokens)
    else:
        rows = 1
    if rows != 1:
        message = f"{method} reads one prompt; got a batch of {rows} rows"
        why = "its results are per prompt (no batch dimension), as the protocol documents them"
        instead = f"call {method} once per row, or capture() for a batched forward"
        raise InvalidArgument.build(message, why, instead)
    return tokens


@dataclass(frozen=True)
class StreamCall:
    """A streamed call's keywords as `ModelBase` hands them to the backend's stream: the
    steering, the generation's `sampling` (`generate`'s names: max_new_tokens and the knobs) and,
    for the lens, what it `read`s (`interp_core.lens_generation.check_lens_generation`'s top_n,
    point, skip_before and word_mask)."""

    steering: Any
    sampling: dict[str, Any]
    read: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CaptureCall:
    """A capture's keywords as `ModelBase` hands them to the backend's `_capture` (the forward's
    `attention_mask` and `rows`) or `_capture_generation` (the generation's `sampling`:
    max_new_tokens, temperature and seed): the steering and the call's inputs (`prompt_embeds`,
    `lora`) in both."""

    steering: Any
    prompt_embeds: Any = None
    lora: Any = None
    attention_mask: Any = None
    rows: Sequence[int] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)


def generation_reach(prompt_length: int, max_new_tokens: int) -> tuple[int, str]:
    """How many positions a generation's forward passes run, and the words for them (what a
    steering write's reach is checked against): the prompt and every generated token but the
    last, which is sampled and never fed back."""
    length = prompt_length + max_new_tokens - 1
    return length, (
        f"this generation of {prompt_length} prompt tokens and up to {max_new_tokens} new ones "
        f"(the last is never fed back)"
    )


class ModelBase:
    """Identity and the conveniences of an `InterpModel`; see the module docstring."""

    _model_id: str
    _facts: ModelFacts
    backend_name: Any  # a class attribute or a property of the subclass
    tokenizer: Any
    # Why capture_residuals(detach=False) keeps no graph here; None: capture takes detach=.
    graph_refusal: ClassVar[str | None] = "this backend runs its forward without autograd"

    # --- identity and facts ---------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    @property
    def n_layers(self) -> int:
        return self._facts.n_layers

    @property
    def d_model(self) -> int:
        return self._facts.d_model

    # --- the checkpoint's sampling ---------------------------------------------------------------
    def _generation_config_source(self) -> Any:
        """Where the checkpoint's generation_config.json is looked for: the model id or folder.
        A backend whose checkpoint lies elsewhere (a server's, on remote) overrides this."""
        return self._model_id

    @property
    def recommended_sampling(self) -> dict[str, Any]:
        """The sampling knobs the checkpoint's generation_config.json states (see
        `interp_core.generation_config`); empty when it has no such file on disk."""
        cached = self.__dict__.get("_recommended")
        if cached is None:
            source = self._generation_config_source()
            cached = recommended_sampling(read_generation_config(source)) if source else {}
            self.__dict__["_recommended"] = cached
        return dict(cached)

    def resolve_sampling(self, **arguments: Any) -> Sampling:
        """A generation's keywords (max_new_tokens, seed, the knobs, n_logprobs,
        prompt_logprobs, use_generation_config) checked and decided against this checkpoint's
        recommendation; every backend's generation calls this before any work."""
        return resolve_sampling(self.recommended_sampling, **arguments)

    # --- work: the protocol's keywords, read once -----------------------------------------------
    async def capture(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        steering: Any = None,
        attention_mask: Any = None,
        prompt_embeds: Any = None,
        lora: Any = None,
        rows: Sequence[int] | None = None,
    ) -> ActivationCache:
        """One forward pass; the cache holds `[batch, seq, ...]` tensors keyed by `Address`
        (`[batch, len(rows), ...]` with `rows=`; `prompt_embeds`, `lora` and `rows` as
        `InterpModel.capture` documents them). The backend's `_capture` serves it; `rows=` with
        `tokens=None` is refused here, on every backend."""
        if rows is not None and tokens is None:
            refuse_rows_without_tokens()
        call = CaptureCall(steering, prompt_embeds, lora, attention_mask, rows)
        return await self._capture(tokens, to_addresses(points), call)

    async def _capture(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> ActivationCache:
        raise NotImplementedError  # every backend serves capture

    async def capture_generation(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        max_new_tokens: int = 8,
        temperature: float = 0.0,
        seed: int | None = None,
        steering: Any = None,
        prompt_embeds: Any = None,
        lora: Any = None,
    ) -> tuple[Generation, ActivationCache]:
        """Generate, and capture over prompt + generated tokens minus the last one (the last
        sampled token is never fed back); the backend's `_capture_generation` serves it, with the
        sampling under `generate`'s names."""
        sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
        call = CaptureCall(steering, prompt_embeds, lora, sampling=sampling)
        return await self._capture_generation(tokens, to_addresses(points), call)

    async def _capture_generation(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> tuple[Generation, ActivationCache]:
        raise NotImplementedError  # every backend serves capture_generation

    async def logit_lens(
        self,
        tokens: Any,
        layers: Sequence[int] | None = None,
        *,
        top_k: int = 10,
        point: str = "resid_post",
    ) -> LensResult:
        """Decode `point` at each layer (default: all; a fitted `LensSpec` reads through its
        `J_bar`s) through the final norm and the unembedding; the backend's `_prompt_lens`
        serves it."""
        return await self._prompt_lens(tokens, layers, top_k, point)

    async def _prompt_lens(self, tokens: Any, layers: Any, top_k: Any, point: Any) -> LensResult:
        raise NotImplementedError  # every backend serves logit_lens

    def _lens_arguments(
        self, layers: Any, top_k: Any, point: Any
    ) -> tuple[list[int], Any, int, str]:
        """`logit_lens`'s arguments checked as the in-process backends check them (remote's
        server checks its own): the layers read (all when None), the fitted `LensSpec` (None:
        the plain lens), `top_k` and `point`."""
        top_k = check_lens_top_k(top_k)
        point = check_lens_point(point)
        plain, fitted = lens_from_layers(layers)
        return check_lens_layers(plain, self.n_layers), fitted, top_k, point

    def _refuse_method(self, method: str, why: str, instead: str) -> NoReturn:
        """Refuse a method this backend does not serve, named with the backend."""
        what = f"{method} on backend={self.backend_name!r}"
        raise CapabilityUnsupported.build(what, why, instead)

    # --- conveniences over capture and generate -------------------------------------------------
    async def generate_text(
        self,
        prompt: Any,
        *,
        max_tokens: int = 200,
        temperature: float | None = None,
        seed: int | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        steering: Any = None,
    ) -> str:
        """The generated text (prompt excluded) of one generation of up to `max_tokens` tokens;
        a string prompt is tokenized first (with BOS)."""
        generation = await self.generate(  # type: ignore[attr-defined]
            one_prompt(self, prompt, "generate_text"),
            max_new_tokens=max_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            steering=steering,
        )
        return str(generation.text)

    async def capture_residuals(
        self, tokens: Any, layers: Sequence[int] | None = None, *, detach: bool = True
    ) -> dict[int, Any]:
        """`{layer: resid_post [seq, d_model]}` at `layers` (default: all) for one prompt."""
        if not detach and self.graph_refusal is not None:
            what = f"capture_residuals(detach=False) on backend={self.backend_name!r}"
            why = f"{self.graph_refusal}, so there is no graph to keep"
            instead = "the eager backend with requires_grad=True (backend='eager')"
            raise GradientsUnsupported.build(what, why, instead)
        streams = self._facts.n_streams
        if streams > 1:
            message = f"capture_residuals on a trunk of {streams} residual streams"
            why = "resid_post there is a stack of streams, not one d_model-wide residual"
            instead = "capture resid_streams.L (or resid_post.L.stream-K) with capture()"
            raise CapabilityUnsupported.build(message, why, instead)
        prompt = one_prompt(self, tokens, "capture_residuals")
        chosen = check_lens_layers(layers, self.n_layers)
        points = [Address("resid_post", layer) for layer in chosen]
        kwargs = {} if detach else {"detach": False}
        cache = await self.capture(prompt, points, **kwargs)  # type: ignore[attr-defined]
        return {layer: cache[point][0] for layer, point in zip(chosen, points, strict=True)}

    async def capture_attention(self, tokens: Any, layers: Sequence[int]) -> dict[int, Any]:
        """Refused here; a torch backend serves it from `interp_torch.readouts`."""
        why = "this backend has no read-out that lays attention out per head"
        instead = "capture attn_scores, attn_probs, value and z with capture()"
        self._refuse_method("capture_attention", why, instead)

    # --- chat -----------------------------------------------------------------------------------
    def message_spans(
        self,
        messages: Sequence[dict[str, str]],
        *,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        enable_thinking: bool | None = None,
        fmt: str | None = None,
        chat_format: str | None = None,
        reasoning_effort: str | None = None,
        drop_thinking: bool | None = None,
    ) -> ChatSpans:
        """The chat rendered with the template (or the format the checkpoint defines in code,
        `interp_core.chat_formats`), each token labelled with its message, role, section
        (header / content / footer) and reasoning channel; see
        `interp_core.chat.message_spans`. A tokenizer that renders its spans where its template
        lives (the remote backend's proxy of the server's) is asked through its `chat_spans`."""
        options = {
            "add_generation_prompt": add_generation_prompt,
            "continue_final_message": continue_final_message,
            "enable_thinking": enable_thinking,
            "fmt": fmt,
            "chat_format": chat_format,
            "reasoning_effort": reasoning_effort,
            "drop_thinking": drop_thinking,
        }
        remote = getattr(self.tokenizer, "chat_spans", None)
        if remote is not None:
            return remote(messages, **options)
        options["chat_format"] = resolve_chat_format(self.tokenizer, chat_format, self.facts)
        return message_spans(self.tokenizer, messages, **options)

    def message_partition(
        self, messages: Sequence[dict[str, str]], **options: Any
    ) -> tuple[tuple[int, int], ...]:
        """Each message's contiguous `[start, end)` token range; the ranges cover every token."""
        return self.message_spans(messages, **options).partition

    def generation_labels(
        self,
        prompt_ids: Sequence[int],
        generated_ids: Sequence[int],
        *,
        fmt: str | None = None,
        chat_format: str | None = None,
    ) -> tuple[tuple[str | None, str, int], ...]:
        """`(channel, section, message)` of each generated token; see
        `interp_core.channels.generation_labels` (or the tokenizer's own, as for chat spans;
        a prompt in a code chat format: `interp_core.chat_formats.format_generation_labels`)."""
        own = getattr(self.tokenizer, "generation_labels", None)
        if own is not None:
            return own(prompt_ids, generated_ids, fmt=fmt)
        name = resolve_chat_format(self.tokenizer, chat_format, self.facts)
        if name != TEMPLATE:
            return format_generation_labels(self.tokenizer, name, prompt_ids, generated_ids, fmt)
        return generation_labels(self.tokenizer, prompt_ids, generated_ids, fmt=fmt)

    # --- samples and streamed capture ------------------------------------------------------------
    async def generate_samples(
        self, tokens: Any, *, n: int, seed: int | None = None, **knobs: Any
    ) -> tuple[Any, ...]:
        """`n` generations of one prompt, sample i with `seed + i` (`interp_core.samples`)."""
        from interp_core.samples import generate_samples

        return await generate_samples(self, tokens, n=n, seed=seed, **knobs)

    def capture_generation_stream(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        max_new_tokens: int = 8,
        temperature: float = 0.0,
        seed: int | None = None,
        steering: Any = None,
        **knobs: Any,
    ) -> Any:
        """Chunks of a generation's captures as they are computed (`knobs`: the other sampling
        keywords of `generate`); the backend's `_stream_capture` serves them."""
        sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
        return self._stream_capture(tokens, points, StreamCall(steering, {**sampling, **knobs}))

    def _stream_capture(self, tokens: Any, points: Any, call: StreamCall) -> Any:
        """Refused here; a backend that can hand rows out while it generates overrides it."""
        why = "this backend returns a generation's captures only when it ends"
        instead = "capture_generation(...) (the same rows, at the end)"
        self._refuse_method("capture_generation_stream", why, instead)

    # --- the lens over a generation -------------------------------------------------------------
    def generate_with_lens(
        self,
        tokens: Any,
        lenses: Any,
        *,
        top_n: int = 10,
        point: str = "resid_post",
        max_new_tokens: int = 16,
        skip_before: int = 0,
        word_mask: Any = None,
        steering: Any = None,
        **knobs: Any,
    ) -> Any:
        """A `LensStep` per position of one generation (`ReadoutModel.generate_with_lens`;
        `knobs`: its sampling keywords); the backend's `_lens_stream` serves them."""
        read = {"top_n": top_n, "point": point, "skip_before": skip_before, "word_mask": word_mask}
        sampling = {"max_new_tokens": max_new_tokens, **knobs}
        return self._lens_stream(tokens, lenses, StreamCall(steering, sampling, read))

    def _lens_stream(self, tokens: Any, lenses: Any, call: StreamCall) -> Any:
        """Refused here; a backend that decodes the lens as it generates overrides it."""
        why = "this backend has no lens over a generation"
        instead = "logit_lens(...) on the prompt followed by the generated tokens"
        self._refuse_method("generate_with_lens", why, instead)


def check_lens_sampling(sampling: dict[str, Any]) -> dict[str, Any]:
    """The sampling keywords of a lens over a generation, unknown ones refused (a knob the lens's
    decoding loop would not honour, such as a penalty, is not taken silently)."""
    unknown = sorted(set(sampling) - {"max_new_tokens", *LENS_SAMPLING})
    if unknown:
        message = f"generate_with_lens got unknown arguments {unknown}; it takes {LENS_SAMPLING}"
        raise InvalidArgument(message)
    return sampling
