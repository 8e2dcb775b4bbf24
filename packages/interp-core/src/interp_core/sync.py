"""How does code without an event loop call the async model API?

Every async method of `InterpModel` has a blocking twin here taking the model as first argument:
`capture` (alias `run_with_cache`), `capture_generation`, `capture_attention`,
`capture_residuals`, `generate`, `generate_samples`, `generate_text`, `generate_stream`,
`generate_with_lens` and `capture_generation_stream` (plain iterators),
`logit_lens`, `decode_residuals`, `unembed_rows`, `embed_rows`, `project`,
`set_lens_jacobians`, `warmup` and `shutdown`. `sync_model(model)` returns the same
twins as methods of one object (`SyncModel`), cached per model. `steer` and `active_steering`
are re-exported from `interp_core.steering` so sync code finds everything in one module.

Where the coroutine runs:

* Most models (eager) are not tied to an event loop, so each call runs on a fresh loop in the
  calling thread (`asyncio.Runner`). Thread-local state such as torch's grad mode therefore
  applies as the caller set it.
* A model with `binds_event_loop = True` (vLLM: its engine belongs to the loop that built it)
  runs every call on ONE background event-loop thread per process, started on first use and
  stopped at interpreter exit. All such models share it, so a model built through the sync API
  is always awaited on the loop that built it. Do not mix: a loop-bound model first awaited in
  your own loop cannot then be used through these functions.

The `points` of `capture`, `run_with_cache` and `capture_generation` are read here, before the
model is called (`interp_core.address.to_addresses`): a bare string, a single address or None is
refused naming the list form, whatever the backend.

Both paths copy the caller's `contextvars` into the call, so `with steer(model, spec):` around a
sync call steers it exactly as it would an `await`.

Inside a running event loop (Jupyter, an async web handler, pytest-asyncio) every function here
refuses with `NestedEventLoop`: blocking there would stall every other task on that loop or
deadlock it. Await the model's method instead.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from interp_core.address import to_addresses
from interp_core.errors import NestedEventLoop
from interp_core.steering import active_steering, steer

if TYPE_CHECKING:
    from interp_core.address import AddressLike
    from interp_core.cache import ActivationCache
    from interp_core.capture_stream import CaptureChunk
    from interp_core.protocol import InterpModel, ReadoutModel, Steering, Tensor, Tokens
    from interp_core.results import Generation, GenerationStep, LensResult

__all__ = [
    "SyncModel",
    "active_steering",
    "capture",
    "capture_attention",
    "capture_generation",
    "capture_generation_stream",
    "capture_residuals",
    "decode_residuals",
    "embed_rows",
    "generate",
    "generate_samples",
    "generate_stream",
    "generate_text",
    "generate_with_lens",
    "logit_lens",
    "project",
    "run",
    "run_with_cache",
    "set_lens_jacobians",
    "shutdown",
    "steer",
    "sync_model",
    "unembed_rows",
    "warmup",
]

T = TypeVar("T")


# --- refusing inside a loop ---------------------------------------------------------------------
def _refuse_inside_loop(function: str, method: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    error = NestedEventLoop.build(
        f"interp_core.sync.{function}(...) was called inside a running event loop",
        "it would block that loop while waiting for the model, stalling every other task on it "
        "(or deadlocking, if the model needs this loop to make progress); this happens in "
        "Jupyter, async web handlers and async tests",
        f"use `await model.{method}(...)` instead",
    )
    raise error


# --- the shared background loop for loop-bound models -------------------------------------------
class _BackgroundLoop:
    """One daemon thread running one event loop, shared by every loop-bound model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="interp-core-loop", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._start()
        context = contextvars.copy_context()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def settle(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                future.cancel()
            elif (error := task.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(task.result())

        tasks: list[asyncio.Task[T]] = []

        def submit() -> None:
            if not future.set_running_or_notify_cancel():
                coro.close()  # the caller gave up before the loop got to it
                return
            try:
                # create_task(context=...) runs the coroutine with the *caller's* context vars.
                task = loop.create_task(coro, context=context)
            except BaseException as exc:  # never leave the caller waiting on a dead future
                future.set_exception(exc)
                return
            tasks.append(task)
            task.add_done_callback(settle)

        loop.call_soon_threadsafe(submit)
        try:
            return future.result()
        except BaseException:
            # Interrupted (Ctrl-C) or failed: do not leave the request running on the loop.
            if not future.done():
                future.cancel()
                for task in tasks:
                    loop.call_soon_threadsafe(task.cancel)
            raise

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


_BACKGROUND = _BackgroundLoop()
atexit.register(_BACKGROUND.stop)


def _binds_loop(model: object) -> bool:
    return bool(getattr(model, "binds_event_loop", False))


def _run(model: object, coro: Coroutine[Any, Any, T]) -> T:
    if _binds_loop(model):
        return _BACKGROUND.run(coro)
    with asyncio.Runner() as runner:  # copies the caller's context into the task
        return runner.run(coro)


def _guarded(function: str, method: str, model: object, make: Any) -> Any:
    # The refusal must come before the coroutine exists: an un-awaited coroutine warns.
    _refuse_inside_loop(function, method)
    return _run(model, make())


# --- the twins ----------------------------------------------------------------------------------
def capture(
    model: InterpModel,
    tokens: Tokens,
    points: Sequence[AddressLike],
    *,
    steering: Steering = None,
    attention_mask: Tensor | None = None,
    prompt_embeds: Any = None,
    lora: Any = None,
    rows: Sequence[int] | None = None,
) -> ActivationCache:
    """Blocking `model.capture(...)`: one forward, a cache of `[batch, seq, ...]` tensors
    (`[batch, len(rows), ...]` with `rows=`).

    `prompt_embeds` / `lora` (a prompt given as embedding rows, a LoRA adapter) and `rows` travel
    only when set, so a backend that does not take them still serves every other call."""
    points = to_addresses(points)
    extra = _call_inputs(prompt_embeds, lora, rows)
    return cast(
        "ActivationCache",
        _guarded(
            "capture",
            "capture",
            model,
            lambda: model.capture(
                tokens, points, steering=steering, attention_mask=attention_mask, **extra
            ),
        ),
    )


def _call_inputs(prompt_embeds: Any, lora: Any, rows: Any = None) -> dict[str, Any]:
    inputs = {"prompt_embeds": prompt_embeds, "lora": lora, "rows": rows}
    return {key: value for key, value in inputs.items() if value is not None}


def run_with_cache(
    model: InterpModel,
    tokens: Tokens,
    points: Sequence[AddressLike],
    *,
    attention_mask: Tensor | None = None,
    steering: Steering = None,
    prompt_embeds: Any = None,
    lora: Any = None,
    rows: Sequence[int] | None = None,
) -> ActivationCache:
    """TransformerLens-style name for `capture`."""
    points = to_addresses(points)
    extra = _call_inputs(prompt_embeds, lora, rows)
    return cast(
        "ActivationCache",
        _guarded(
            "run_with_cache",
            "capture",
            model,
            lambda: model.capture(
                tokens, points, steering=steering, attention_mask=attention_mask, **extra
            ),
        ),
    )


def capture_generation(
    model: InterpModel,
    tokens: Tokens,
    points: Sequence[AddressLike],
    *,
    max_new_tokens: int = 8,
    temperature: float = 0.0,
    seed: int | None = None,
    steering: Steering = None,
    prompt_embeds: Any = None,
    lora: Any = None,
) -> tuple[Generation, ActivationCache]:
    """Blocking `model.capture_generation(...)`."""
    points = to_addresses(points)
    extra = _call_inputs(prompt_embeds, lora)
    return cast(
        "tuple[Generation, ActivationCache]",
        _guarded(
            "capture_generation",
            "capture_generation",
            model,
            lambda: model.capture_generation(
                tokens,
                points,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                seed=seed,
                steering=steering,
                **extra,
            ),
        ),
    )


def generate(
    model: InterpModel,
    tokens: Tokens,
    *,
    max_new_tokens: int = 64,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    steering: Steering = None,
    min_p: float | None = None,
    presence_penalty: float | None = None,
    frequency_penalty: float | None = None,
    repetition_penalty: float | None = None,
    n_logprobs: int = 0,
    prompt_logprobs: int | None = None,
    use_generation_config: bool = True,
    prompt_embeds: Any = None,
    lora: Any = None,
) -> Generation:
    """Blocking `model.generate(...)`."""
    extra = _call_inputs(prompt_embeds, lora)
    return cast(
        "Generation",
        _guarded(
            "generate",
            "generate",
            model,
            lambda: model.generate(
                tokens,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                steering=steering,
                min_p=min_p,
                presence_penalty=presence_penalty,
                frequency_penalty=frequency_penalty,
                repetition_penalty=repetition_penalty,
                n_logprobs=n_logprobs,
                prompt_logprobs=prompt_logprobs,
                use_generation_config=use_generation_config,
                **extra,
            ),
        ),
    )


def generate_stream(
    model: InterpModel,
    tokens: Tokens,
    *,
    max_new_tokens: int = 64,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    steering: Steering = None,
    min_p: float | None = None,
    presence_penalty: float | None = None,
    frequency_penalty: float | None = None,
    repetition_penalty: float | None = None,
    n_logprobs: int = 0,
    prompt_logprobs: int | None = None,
    use_generation_config: bool = True,
    prompt_embeds: Any = None,
    lora: Any = None,
) -> Iterator[GenerationStep]:
    """Blocking iterator over `model.generate_stream(...)`.

    The refusal inside a running loop happens at the call, not at the first `next()`. One event
    loop serves the whole stream (the background loop for a loop-bound model), because an async
    generator must be resumed on the loop it started on.
    """
    _refuse_inside_loop("generate_stream", "generate_stream")
    # Capture the caller's context now, so a `steer` block around the call applies to the
    # stream even if iteration happens after the block has exited.
    context = contextvars.copy_context()
    stream = context.run(
        model.generate_stream,
        tokens,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        steering=steering,
        min_p=min_p,
        presence_penalty=presence_penalty,
        frequency_penalty=frequency_penalty,
        repetition_penalty=repetition_penalty,
        n_logprobs=n_logprobs,
        prompt_logprobs=prompt_logprobs,
        use_generation_config=use_generation_config,
        **_call_inputs(prompt_embeds, lora),
    )
    return _iterate(model, stream, context)


def _iterate(
    model: object, stream: AsyncIterator[GenerationStep], context: contextvars.Context
) -> Iterator[GenerationStep]:
    async def step() -> tuple[bool, GenerationStep | None]:
        try:
            return True, await anext(stream)
        except StopAsyncIteration:
            return False, None

    async def close() -> None:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()

    if _binds_loop(model):

        def advance() -> tuple[bool, GenerationStep | None]:
            return context.run(_BACKGROUND.run, step())

        def finish() -> None:
            context.run(_BACKGROUND.run, close())

        try:
            while True:
                more, item = advance()
                if not more:
                    return
                yield cast("GenerationStep", item)
        finally:
            finish()
    else:
        with asyncio.Runner() as runner:
            try:
                while True:
                    more, item = runner.run(step(), context=context)
                    if not more:
                        return
                    yield cast("GenerationStep", item)
            finally:
                runner.run(close(), context=context)


def capture_generation_stream(
    model: InterpModel,
    tokens: Tokens,
    points: Sequence[AddressLike],
    *,
    max_new_tokens: int = 8,
    temperature: float = 0.0,
    seed: int | None = None,
    steering: Steering = None,
    **knobs: Any,
) -> Iterator[CaptureChunk]:
    """Blocking iterator over `model.capture_generation_stream(...)` (`knobs`: the other
    sampling keywords of `generate`); one loop serves the stream, as in `generate_stream`."""
    _refuse_inside_loop("capture_generation_stream", "capture_generation_stream")
    points = to_addresses(points)
    context = contextvars.copy_context()
    stream = context.run(
        model.capture_generation_stream,
        tokens,
        points,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        steering=steering,
        **knobs,
    )
    return cast("Iterator[CaptureChunk]", _iterate(model, stream, context))


def generate_samples(
    model: InterpModel, tokens: Tokens, *, n: int, seed: int | None = None, **knobs: Any
) -> tuple[Generation, ...]:
    """Blocking `n` samples of one prompt, sample i with `seed + i` (`interp_core.samples`)."""
    from interp_core.samples import generate_samples as samples

    return cast(
        "tuple[Generation, ...]",
        _guarded(
            "generate_samples",
            "generate_samples",
            model,
            lambda: samples(model, tokens, n=n, seed=seed, **knobs),
        ),
    )


def logit_lens(
    model: InterpModel,
    tokens: Tokens,
    layers: Sequence[int] | None = None,
    *,
    top_k: int = 10,
    point: str = "resid_post",
) -> LensResult:
    """Blocking `model.logit_lens(...)`."""
    return cast(
        "LensResult",
        _guarded(
            "logit_lens",
            "logit_lens",
            model,
            lambda: model.logit_lens(tokens, layers, top_k=top_k, point=point),
        ),
    )


def warmup(model: InterpModel) -> None:
    """Blocking `model.warmup()`."""
    _guarded("warmup", "warmup", model, model.warmup)


def shutdown(model: InterpModel) -> None:
    """Blocking `model.shutdown()`."""
    _guarded("shutdown", "shutdown", model, model.shutdown)


def run(model: InterpModel, make: Callable[[], Awaitable[T]]) -> T:
    """Blocking run of `make()`, a coroutine built from `model`'s async methods, on the loop the
    model belongs to; how sync code runs several requests of a vLLM model concurrently:

        both = sync.run(model, lambda: asyncio.gather(model.capture(a, p), model.capture(b, p)))

    `make` is a callable so that nothing is created when the call is refused inside a loop.
    """

    async def body() -> T:
        return await make()

    return _guarded("run", "...", model, body)


def capture_attention(
    model: InterpModel, tokens: Tokens, layers: Sequence[int]
) -> dict[int, dict[str, Tensor]]:
    """Blocking `model.capture_attention(...)`: one prompt's scores, probs and per-kv-head
    values per layer."""
    return cast(
        "dict[int, dict[str, Tensor]]",
        _guarded(
            "capture_attention",
            "capture_attention",
            model,
            lambda: model.capture_attention(tokens, layers),
        ),
    )


def capture_residuals(
    model: InterpModel,
    tokens: Tokens,
    layers: Sequence[int] | None = None,
    *,
    detach: bool = True,
) -> dict[int, Tensor]:
    """Blocking `model.capture_residuals(...)`: one prompt's `{layer: resid_post [seq, d]}`."""
    return cast(
        "dict[int, Tensor]",
        _guarded(
            "capture_residuals",
            "capture_residuals",
            model,
            lambda: model.capture_residuals(tokens, layers, detach=detach),
        ),
    )


def generate_text(
    model: InterpModel,
    prompt: str | Tokens,
    *,
    max_tokens: int = 200,
    temperature: float | None = None,
    seed: int | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    steering: Steering = None,
) -> str:
    """Blocking `model.generate_text(...)`: the generated text of a string or token prompt."""
    return cast(
        "str",
        _guarded(
            "generate_text",
            "generate_text",
            model,
            lambda: model.generate_text(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                top_k=top_k,
                top_p=top_p,
                steering=steering,
            ),
        ),
    )


def decode_residuals(
    model: InterpModel, residuals: Tensor, *, raw: bool = False, top_k: int | None = None
) -> Any:
    """Blocking `model.decode_residuals(...)`: logits of residuals through norm and unembedding
    (with `top_k`, their `TopTokens(ids, probs)`)."""
    if top_k is None:  # a backend written before top_k existed still serves the plain call
        return _guarded(
            "decode_residuals",
            "decode_residuals",
            model,
            lambda: model.decode_residuals(residuals, raw=raw),
        )
    return _guarded(
        "decode_residuals",
        "decode_residuals",
        model,
        lambda: model.decode_residuals(residuals, raw=raw, top_k=top_k),
    )


def unembed_rows(model: ReadoutModel, token_ids: Sequence[int]) -> Tensor:
    """Blocking `model.unembed_rows(...)`: `W_U[token_ids]`, `[k, d_model]`."""
    return _guarded("unembed_rows", "unembed_rows", model, lambda: model.unembed_rows(token_ids))


def embed_rows(model: ReadoutModel, token_ids: Sequence[int]) -> Tensor:
    """Blocking `model.embed_rows(...)`: `W_E[token_ids]`, `[k, d_model]`."""
    return _guarded("embed_rows", "embed_rows", model, lambda: model.embed_rows(token_ids))


def project(
    model: ReadoutModel, tokens: Tokens, directions: Sequence[Any], *, steering: Steering = None
) -> list[Tensor]:
    """Blocking `model.project(...)`: per DirectionSet, `[batch, seq, k]` float32 values."""
    return cast(
        "list[Tensor]",
        _guarded(
            "project",
            "project",
            model,
            lambda: model.project(tokens, directions, steering=steering),
        ),
    )


def set_lens_jacobians(model: ReadoutModel, jacobians: Any, *, name: str = "default") -> int:
    """Blocking `model.set_lens_jacobians(...)`: install (or, with None, remove) a fitted lens."""
    return cast(
        "int",
        _guarded(
            "set_lens_jacobians",
            "set_lens_jacobians",
            model,
            lambda: model.set_lens_jacobians(jacobians, name=name),
        ),
    )


def generate_with_lens(
    model: ReadoutModel, tokens: Tokens, lenses: Sequence[Any], **options: Any
) -> Iterator[Any]:
    """Blocking iterator over `model.generate_with_lens(...)`: one `LensStep` per position as
    the model produces it (`interp_core.lens_generation`); one event loop serves the stream."""
    _refuse_inside_loop("generate_with_lens", "generate_with_lens")
    context = contextvars.copy_context()
    stream = context.run(model.generate_with_lens, tokens, lenses, **options)
    return _iterate(model, stream, context)


# --- the facade ---------------------------------------------------------------------------------
_TWINS: dict[str, Callable[..., Any]] = {
    "capture": capture,
    "run_with_cache": run_with_cache,
    "capture_generation": capture_generation,
    "capture_generation_stream": capture_generation_stream,
    "generate_samples": generate_samples,
    "capture_attention": capture_attention,
    "capture_residuals": capture_residuals,
    "generate": generate,
    "generate_text": generate_text,
    "generate_stream": generate_stream,
    "generate_with_lens": generate_with_lens,
    "logit_lens": logit_lens,
    "decode_residuals": decode_residuals,
    "unembed_rows": unembed_rows,
    "embed_rows": embed_rows,
    "project": project,
    "set_lens_jacobians": set_lens_jacobians,
    "warmup": warmup,
    "shutdown": shutdown,
}


class SyncModel:
    """A model whose work methods block: each is the free function of the same name with the
    model bound (so `sync_model(m).capture(tokens, points)` is `capture(m, tokens, points)`).
    Every other attribute (`to_tokens`, `facts`, `n_layers`, ...) is the model's own."""

    def __init__(self, model: InterpModel) -> None:
        self._model = model

    @property
    def model(self) -> InterpModel:
        """The async model behind the facade."""
        return self._model

    def __getattr__(self, name: str) -> Any:
        twin = _TWINS.get(name)
        if twin is not None:
            bound = _bind(twin, self._model)
            self.__dict__[name] = bound
            return bound
        return getattr(self._model, name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *_TWINS, *dir(self._model)})

    def __repr__(self) -> str:
        return f"SyncModel({self._model!r})"


def _bind(twin: Callable[..., Any], model: InterpModel) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        return twin(model, *args, **kwargs)

    method.__name__ = twin.__name__
    method.__doc__ = twin.__doc__
    return method


_FACADE_ATTRIBUTE = "_interp_sync_model"
_FACADES_LOCK = threading.Lock()


def sync_model(model: InterpModel) -> SyncModel:
    """The blocking facade of `model`; the same object on every call for the same model.

    The facade is kept on the model itself (a reference cycle the collector frees with the model),
    so caching it never keeps a model alive.
    """
    if isinstance(model, SyncModel):
        return model
    with _FACADES_LOCK:
        facade = getattr(model, _FACADE_ATTRIBUTE, None)
        if not isinstance(facade, SyncModel) or facade.model is not model:
            facade = SyncModel(model)
            with contextlib.suppress(AttributeError, TypeError):
                setattr(model, _FACADE_ATTRIBUTE, facade)
        return facade
