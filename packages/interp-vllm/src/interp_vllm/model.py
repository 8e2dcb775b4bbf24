"""What does a model served by a vLLM backend answer, and how does each request reach the workers?

`VLLMModel` implements `interp_core.protocol.InterpModel` on vLLM's `AsyncLLM`, so many requests
are in flight at once, each with its own points, steering and lens. A request's wishes travel
inside its own `SamplingParams.extra_args` (see `interp_vllm.worker`), its rows come back through
one `collective_rpc("interp_collect", request_id)` after it finishes, and every request that
captures, steers or reads the lens carries a unique `cache_salt`: with prefix caching on, a
salted request can neither reuse another request's KV blocks (which would skip the rows it must
capture, or carry someone else's steering) nor lend its own.

How a request is packed for the workers and its rows reassembled is `interp_vllm.wire`; how the
engine is configured, started and stopped, `interp_vllm.engine`; what vLLM serves per family,
`interp_vllm.support`. The identity and the read-outs over `capture` and `generate` are
`interp_core.model_base.ModelBase`'s; the static tier, SAE features, decoding in the workers, the
tokenizer conveniences and the weight rows, probes and fitted lenses are collaborators that
receive the model's `ModelCalls` (`interp_vllm.calls`), and the model delegates its public
methods to them.

Three modes share this class (`interp_vllm.backend` registers one backend per mode):

* `hooked` (`vllm`) — hooks installed per step on exactly the sites the step's requests need.
* `static` (`vllm-static`) — the tap set is declared at load and hooked for good; requests may
  only filter it; warmup proves every tap is live.
* `generate` (`vllm-generate`) — plain vLLM, no extension: generation only.

Every argument is checked here, before anything reaches a worker: a hook that raised would kill
the engine for every request in flight. That includes every value a steering spec carries: its
positions must lie within the forward passes of the call (`check_positions_within`: a capture's
prompt; a generation's prompt plus `max_new_tokens - 1`), and a spec whose result must overflow
the model dtype is refused (`interp_torch.steering.check_steering_fits`). What the workers still
cannot handle fails that request alone (see `interp_vllm.worker`).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Sequence
from typing import Any

from interp_core.address import Address, to_address, to_addresses
from interp_core.backends import cuda_available, model_config
from interp_core.cache import ActivationCache
from interp_core.dtypes import canonical_dtype
from interp_core.errors import (
    CapabilityUnsupported,
    InvalidArgument,
    PointUnsupported,
)
from interp_core.facts import ModelFacts
from interp_core.known_models import bundled_first
from interp_core.model_base import CaptureCall, ModelBase, StreamCall, generation_reach
from interp_core.points import PointSpec, get_point, point_names
from interp_core.results import Generation, GenerationStep, LensResult, Support
from interp_core.sampling import check_sampling
from interp_core.steering import active_steering
from interp_core.steering_lens import special_token_ids
from interp_core.write_indices import wire_for_row
from interp_core.writes import admit_writes, spec_to_wire
from interp_vllm import sampling_params
from interp_vllm.call_inputs import CallInputs
from interp_vllm.calls import Installed, ModelCalls
from interp_vllm.capture_stream import check_capture_rows, rows_cache, stream_capture
from interp_vllm.decoding import WorkerDecoding, lens_predictions
from interp_vllm.engine import QUANTIZATION, EngineSettings, shutdown_engine
from interp_vllm.layout import check_layout
from interp_vllm.padding import split_rows
from interp_vllm.prompts import check_prompts
from interp_vllm.readouts_client import VLLMReadouts
from interp_vllm.reduce_client import WorkerReductions
from interp_vllm.sae_client import WorkerSAEs
from interp_vllm.static_client import StaticTier
from interp_vllm.support import (
    INSTEAD,
    MODES,
    RECOMPUTED,
    WriteSite,
    check_dtype,
    point_support,
    write_refusal,
)
from interp_vllm.tokens import PromptTokens
from interp_vllm.wire import (
    address_key,
    as_generation,
    cache,
    collect,
    engine_death,
    engine_errors,
    needed_keys,
    request_spec,
    run_request,
    stream_steps,
    submission,
)

__all__ = ["VLLMModel"]


def _read_config(model_id: str) -> dict[str, Any]:
    def fetch(name: str) -> dict[str, Any]:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name).to_dict()

    return model_config(model_id, fetch=bundled_first(fetch))  # known ids work offline


class VLLMModel(ModelBase):
    """A causal LM served by a vLLM engine; see `InterpModel` and the module docstring."""

    binds_event_loop = True  # AsyncLLM's output handler belongs to the loop that started it
    graph_refusal = "vLLM runs its forward without autograd"

    def __init__(
        self,
        model_id: str,
        *,
        mode: str = "hooked",
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        num_gpus: int = 1,
        pipeline_parallel: int = 1,
        distributed: str = "mp",
        quantization: str | None = None,
        kv_cache_dtype: str | None = None,
        static_points: Any = None,
        static_writes: Any = None,
        static_write_slots: int | None = None,
        device: Any = None,
        extra_vllm_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            msg = f"mode={mode!r} is not a vLLM backend mode; choose one of {', '.join(MODES)}"
            raise InvalidArgument(msg)
        if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
            msg = f"num_gpus={num_gpus!r} must be a positive int (the number of vLLM workers)"
            raise InvalidArgument(msg)
        if quantization not in QUANTIZATION:
            msg = (
                f"quantization={quantization!r} is not one this backend passes to vLLM; choose "
                f"None, 'fp8' or 'bnb-4bit' (anything else vLLM takes: extra_vllm_kwargs)"
            )
            raise InvalidArgument(msg)
        if device is not None and str(device) not in ("auto", "cuda", "cpu"):
            msg = (
                f"device={device!r}: vLLM places the model itself (all visible GPUs, or the CPU "
                f"build); choose GPUs with CUDA_VISIBLE_DEVICES and num_gpus"
            )
            raise InvalidArgument(msg)
        self._mode = mode
        self._model_id = str(model_id)
        self._config = _read_config(self._model_id)
        self._facts = ModelFacts.from_config(self._config)
        # One alias table (interp_core.dtypes): vLLM itself knows no 'bf16' or 'fp32'; a name
        # outside the table goes to vLLM as given, for vLLM to accept or refuse.
        dtype = canonical_dtype(dtype) or dtype
        check_dtype(self._facts, dtype, cuda=cuda_available())
        limit = self._facts.max_position_embeddings
        self._max_model_len = max_model_len or (min(limit, 4096) if limit else 4096)
        self._num_gpus = num_gpus
        self._pipeline = check_layout(num_gpus, pipeline_parallel, distributed, self._facts)
        self._tensor_parallel = num_gpus // self._pipeline  # GPUs each layer is split across
        self._installed: Installed | None = None
        self._calls = ModelCalls(
            facts=self._facts,
            config=self._config,
            tokenizer=lambda: self.tokenizer,
            ready=self._ready,
            installed=lambda: self._installed,
            request=self._request,
            sampling=self._sampling,
            prompts=self._prompts,
            one_prompt=self._one_prompt,
            require_hooks=self._require_hooks,
            may_write=self._may_write,
            addresses=self._addresses,
            writes=self._writes,
            has_site=self._has_site,
            pipeline=self._pipeline,
        )
        self._tokens = PromptTokens(self._calls.tokenizer, self._prompts)
        self._saes = WorkerSAEs(self._calls)
        self.worker_reductions = WorkerReductions(self._calls)
        self._decoding = WorkerDecoding(self._calls)
        self._readouts = VLLMReadouts(self._calls)
        self._static = StaticTier()  # none declared yet: supports() below reads it
        self._static = StaticTier.declare(
            mode,
            self.n_layers,
            self.supports,
            static_points,
            static_writes,
            static_write_slots,
        )
        self._settings = EngineSettings(
            model_id=self._model_id,
            mode=mode,
            dtype=dtype,
            max_model_len=self._max_model_len,
            num_gpus=num_gpus,
            pipeline_parallel=self._pipeline,
            distributed=distributed,
            gpu_memory_utilization=gpu_memory_utilization,
            quantization=quantization,
            kv_cache_dtype=kv_cache_dtype,
            extra=dict(extra_vllm_kwargs or {}),
            static=self._static.taps(self._config) if mode == "static" else None,
        )
        self._inputs = CallInputs(self._facts, dict(extra_vllm_kwargs or {}))
        self._engine: Any = None
        self._model_dtype: Any = None  # the torch dtype the engine runs (known once started)
        self._children: list[Any] = []
        self._starting: asyncio.Lock | None = None
        self._shut_down = False  # set by shutdown(), cleared by warmup()
        self._tokenizer: Any = None

    # --- identity and facts (model_id, facts, n_layers, d_model: ModelBase) ----------------------
    @property
    def backend_name(self) -> str:
        return {"hooked": "vllm", "static": "vllm-static", "generate": "vllm-generate"}[self._mode]

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    @property
    def hooks_available(self) -> bool:
        return self._mode != "generate"

    @property
    def static_points(self) -> tuple[str, ...] | None:
        return None if self._mode != "static" else tuple(sorted(self._static.reads))

    @property
    def static_writes(self) -> tuple[str, ...] | None:
        return None if self._mode != "static" else tuple(sorted(self._static.writes))

    @property
    def execution(self) -> str:
        """How this backend runs the forward: "eager" (the hooked backend: Python hooks),
        "compiled" (torch.compile, the default on vLLM's CPU build) or "cuda-graphs" (compiled
        and replayed as CUDA graphs, vLLM's default on GPUs). `vllm-static` and `vllm-generate`
        run as vanilla vLLM does unless extra_vllm_kwargs say enforce_eager=True."""
        return self._settings.execution

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._model_id)
        return self._tokenizer

    @property
    def engine(self) -> Any:
        """The running `AsyncLLM` (None until `warmup()` or the first call)."""
        return self._engine

    # --- static declaration ---------------------------------------------------------------------
    # --- engine ---------------------------------------------------------------------------------
    @property
    def dead(self) -> str | None:
        """Why the engine died under this model (every call is then refused), or None."""
        died = None if self._engine is None else engine_death(self._engine)
        return None if died is None else str(died)

    async def _ready(self) -> Any:
        if self._engine is not None:
            died = engine_death(self._engine)
            if died is not None:
                raise died
            return self._engine
        if self._shut_down:
            # Starting again here would silently spend a minute and the memory shutdown() freed.
            error = CapabilityUnsupported.build(
                f"{self._model_id} was shut down",
                "shutdown() stopped its engine, and a call would silently start a new one",
                "call warmup() (interp_core.sync.warmup(model)) to start it and serve again",
            )
            raise error
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._engine is None:
                engine, children = await asyncio.to_thread(
                    self._settings.start, self._facts.model_type
                )
                self._children = children
                self._model_dtype = engine.model_config.dtype
                try:
                    if self._mode != "generate":
                        self._installed = await self._install(engine)
                except BaseException:
                    shutdown_engine(engine, children)
                    self._children = []
                    raise
                self._engine = engine
        return self._engine

    async def _install(self, engine: Any) -> Installed:
        answers = await engine.collective_rpc("interp_install", args=(self._config, None))
        return Installed.from_answers(answers, static=self._mode == "static", model=self._model_id)

    async def warmup(self) -> None:
        self._shut_down = False
        await self._ready()
        if self._mode == "static":
            await self._static.self_test(self._calls)

    async def shutdown(self) -> None:
        """Stop the engine; later calls are refused until `warmup()` (idempotent)."""
        self._shut_down = True
        engine, self._engine = self._engine, None
        children, self._children = self._children, []
        self._installed = None
        if engine is not None:
            # Stop the output handler first, on its own loop: otherwise it outlives the engine
            # core for a moment and logs the core's exit as an engine failure.
            handler = getattr(engine, "output_handler", None)
            if handler is not None:
                handler.cancel()
            await asyncio.to_thread(shutdown_engine, engine, children)
            from interp_vllm.row_transfer import remove_leftovers

            remove_leftovers(engine)
            # Let the cancelled handler finish and collect the engine now: vLLM's __del__ shuts
            # down again, which fails noisily if it only runs at interpreter exit.
            await asyncio.sleep(0)
            del engine, handler
            gc.collect()

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        names = {name for name in point_names() if self.supports_name(name)}
        return tuple(get_point(name) for name in sorted(names))

    def supports_name(self, name: str) -> bool:
        layers = range(self.n_layers) if get_point(name).is_layer_point else [None]
        return any(self.supports(Address(name, layer)) for layer in layers)

    def supports(self, point: Any) -> Support:
        verdict = point_support(point, self._facts, mode=self._mode, num_gpus=self._tensor_parallel)
        if not verdict:
            return verdict
        address = to_address(point)
        reads = self._static.reads
        if self._mode == "static" and reads and address_key(address) not in reads:
            return Support.no(
                f"{address} is not in this vllm-static model's declared tap set "
                f"({', '.join(sorted(reads))})",
                f"load with static_points=[..., {str(address)!r}], or use backend='vllm'",
            )
        if address.name in RECOMPUTED:
            from interp_vllm.attention import unsupported_reason

            why = unsupported_reason(self._config)
            if why:
                return Support.no(f"cannot rebuild {address} on vLLM: {why}", INSTEAD)
        installed = self._installed
        if installed is None:
            return verdict
        needed = needed_keys([address], self._has_site)
        missing = [k for k in needed if k not in installed.sites]
        if missing:
            why = installed.refused.get(address.name)
            reason = why or f"the worker found no site for {', '.join(missing)} in this model"
            return Support.no(f"cannot capture {address} on vLLM: {reason}", INSTEAD)
        return verdict

    # --- checks before anything reaches a worker ------------------------------------------------
    def _prompts(self, tokens: Any) -> list[list[int]]:
        return check_prompts(tokens, self._facts.vocab_size, self._max_model_len)

    def _require_hooks(self, what: str) -> None:
        if self._mode == "generate":
            msg = f"{what} needs activation hooks, which backend='vllm-generate' does not install"
            raise CapabilityUnsupported.build(
                msg,
                "the generate-only backend runs plain vLLM for the fastest generation",
                "load with backend='vllm' (hooked) or backend='vllm-static'",
            )

    def _addresses(self, points: Sequence[Any]) -> list[Address]:
        addresses = []
        for point in to_addresses(points):
            verdict = self.supports(point)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            addresses.append(to_address(point))
        return addresses

    def _may_write(self, steering: Any) -> None:
        """Refuse steering up front, before any engine starts, on the backend without hooks."""
        if steering is not None or active_steering(self):
            self._require_hooks("steering")

    def _writes(
        self, steering: Any, length: int, call: str, prompts: Any = None
    ) -> list[dict[str, Any]]:
        """The call's writes (active, then explicit) admitted and in their wire form; `length`
        positions are run by `call`, whose prompt rows (`prompts`) resolve the specs' scopes.
        vLLM's own refusals are the rows of `WRITE_REFUSALS`; one prompt's batch_rows cleared."""
        from interp_torch.steering import check_steering_fits

        installed = self._installed
        site = WriteSite(
            mode=self._mode,
            num_gpus=self._tensor_parallel,
            static_writes=self._static.writes,
            writable=None if installed is None else installed.writable,
            refusals={} if installed is None else installed.write_refusals,
            supports=self.supports,
            entries=self._static.entries,
        )
        facts = self._facts
        specs = admit_writes(
            self,
            steering,
            facts,
            (length, call),
            lambda spec, specs: write_refusal(spec, specs, site, facts),
            prompts,
            (lambda: special_token_ids(self.tokenizer)) if prompts is not None else (),
        )
        wire = [spec_to_wire(spec) for spec in specs]  # reads and checks the values
        for spec in specs:
            check_steering_fits(spec, self._model_dtype)
        return wire_for_row(wire, 0) if prompts is not None and len(prompts) == 1 else wire

    # --- the request path -----------------------------------------------------------------------
    def _sampling(
        self,
        max_tokens: int,
        temperature: float,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        *,
        stream: bool = False,
    ) -> Any:
        """The params of an internal request (a capture's one token), decided as given: the
        checkpoint's recommendations are for generations a caller asks for, not for these."""
        checked = check_sampling(
            max_new_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed
        )
        return sampling_params.params(checked, stream=stream)

    async def _request(
        self,
        prompt: list[int],
        params: Any,
        spec: dict[str, Any] | None,
        *,
        lens_top_k: int | None = None,
        inputs: Any = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Run one request to the end; with a spec, collect what its hooks produced."""
        engine = await self._ready()
        return await run_request(
            engine, prompt, params, spec, self._facts, lens_top_k=lens_top_k, inputs=inputs
        )

    async def _request_inputs(self, prompt: list[int], injection: Any, lora: Any) -> Any:
        """The request fields of `prompt_embeds=` / `lora=` (`interp_vllm.call_inputs`)."""
        return await self._inputs.request(
            prompt, injection, lora, self.embed_rows, self._model_dtype
        )

    def _spec(
        self, addresses: Sequence[Address], writes: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        return request_spec(needed_keys(addresses, self._has_site), writes)

    def _cache(self, addresses: Sequence[Address], payload: dict[str, Any], length: int) -> Any:
        return cache(addresses, payload, length, self._config, self._has_site)

    def _has_site(self, key: str) -> bool:
        return self._installed is not None and key in self._installed.sites

    # --- work -----------------------------------------------------------------------------------
    # capture, capture_generation and logit_lens take their keywords in ModelBase, which
    # hands the hooks below a CaptureCall (the lens: its arguments).
    async def _capture(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> ActivationCache:
        self._require_hooks("capture")
        prompt_embeds, adapter = self._inputs.check(tokens, call.prompt_embeds, call.lora)
        prompts, injection = self._inputs.prompts(tokens, prompt_embeds, self._prompts)
        attention_mask, rows, steering = call.attention_mask, call.rows, call.steering
        if prompt_embeds is not None and attention_mask is not None:
            msg = "capture with both prompt_embeds= and attention_mask= is not served"
            raise InvalidArgument.build(
                msg,
                "injected rows are placed by their positions in one unpadded prompt",
                "send one prompt's embeddings without a mask (one capture per prompt)",
            )
        chosen = None if rows is None else check_capture_rows(rows, len(prompts[0]), points)
        batch = split_rows(prompts, attention_mask)  # a padded batch: one request per row
        if chosen is not None and batch.columns is not None:
            msg = "capture with both rows= and a padding attention_mask= is not served by vLLM"
            raise InvalidArgument.build(
                msg,
                "rows= names positions of the padded batch, which each row's request does not have",
                "capture the padded batch and index its rows, or pass unpadded prompts",
            )
        self._may_write(steering)
        await self._ready()
        addresses = self._addresses(points)
        self._inputs.check_points(addresses, injection)
        # One admission for the whole batch, as eager's: positions count each row's real tokens
        # from 0 (a write past a short row's end applies to none of its tokens); then each
        # row's request carries only its row's writes (`batch_rows`, a per-row patch).
        runs = [list(row) for row in batch.rows]
        length = max(len(row) for row in runs)
        writes = self._writes(steering, length, f"this capture's {length}-token prompt", runs)
        specs = [self._spec(addresses, wire_for_row(writes, r)) for r in range(len(runs))]
        for spec in (s for s in specs if s is not None and chosen is not None):
            spec["rows"] = sorted(chosen)  # only these rows leave the workers
        # An adapter applies to every row alike; injected rows come with one unpadded prompt.
        inputs = await self._request_inputs(runs[0], injection, adapter)
        requests = zip(runs, specs, strict=True)  # each its own params: they carry its spec
        results = await asyncio.gather(
            *(self._request(r, self._sampling(1, 0.0), s, inputs=inputs) for r, s in requests)
        )
        per_row = [
            self._cache(addresses, payload, len(row))
            if chosen is None
            else rows_cache(addresses, payload, chosen)
            for row, (_, payload) in zip(batch.rows, results, strict=True)
        ]
        tensors = batch.stack(addresses, per_row)
        return ActivationCache(tensors, output=[final for final, _ in results])

    async def generate(
        self,
        tokens: Any,
        *,
        max_new_tokens: int = 64,
        steering: Any = None,
        prompt_embeds: Any = None,
        lora: Any = None,
        **options: Any,
    ) -> Generation:
        """One generation; unset knobs follow the checkpoint (`ModelBase.resolve_sampling`)."""
        prompt_embeds, adapter = self._inputs.check(tokens, prompt_embeds, lora, options)
        prompts, injection = self._inputs.prompts(tokens, prompt_embeds, self._prompts)
        prompt = self._one_prompt(prompts, "generate")
        sampling = self.resolve_sampling(max_new_tokens=max_new_tokens, **options)
        params = sampling_params.params(sampling)
        self._may_write(steering)
        engine = await self._ready()
        writes = self._writes(steering, *generation_reach(len(prompt), params.max_tokens), [prompt])
        inputs = await self._request_inputs(prompt, injection, adapter)
        # Straight to the wire: the admitted writes leave this module once, as the request.
        spec = request_spec([], writes)
        final, _ = await run_request(engine, prompt, params, spec, self._facts, inputs=inputs)
        generation = as_generation(final, prompt, sampling)
        return generation if inputs is None else inputs.finish(generation)

    def _one_prompt(self, tokens: Any, what: str) -> list[int]:
        prompts = self._prompts(tokens)
        if len(prompts) != 1:
            msg = (
                f"{what} takes one prompt at a time; got a batch of {len(prompts)}; call it once "
                f"per row (they run concurrently on vLLM)"
            )
            raise CapabilityUnsupported(msg)
        return prompts[0]

    async def generate_stream(
        self,
        tokens: Any,
        *,
        max_new_tokens: int = 64,
        steering: Any = None,
        **options: Any,
    ) -> AsyncIterator[GenerationStep]:
        """One step per generated token, texts as vLLM's incremental detokenizer emits them;
        the first step carries the sampling used, each its `n_logprobs` alternatives."""
        prompt_embeds, lora = options.pop("prompt_embeds", None), options.pop("lora", None)
        prompt_embeds, adapter = self._inputs.check(tokens, prompt_embeds, lora, options)
        prompts, injection = self._inputs.prompts(tokens, prompt_embeds, self._prompts)
        prompt = self._one_prompt(prompts, "generate_stream")
        sampling = self.resolve_sampling(max_new_tokens=max_new_tokens, **options)
        params = sampling_params.params(sampling, stream=True)
        self._may_write(steering)
        engine = await self._ready()
        writes = self._writes(steering, *generation_reach(len(prompt), params.max_tokens), [prompt])
        spec = self._spec([], writes)
        inputs = await self._request_inputs(prompt, injection, adapter)
        fields, adapter_request = (
            (None, None) if inputs is None else (inputs.fields, inputs.lora_request)
        )
        rid, request = submission(prompt, params, spec, fields)
        index = 0
        try:
            with engine_errors(engine):
                async for output in engine.generate(
                    request, params, rid, lora_request=adapter_request
                ):
                    if output.finished and spec:
                        # Before the last step: a refusal the workers recorded (a steering write
                        # that overflowed, say) is raised instead of ending the stream as if sound.
                        await collect(engine, rid, self._facts)
                    completion = output.outputs[0]
                    alternatives = sampling_params.token_logprobs(completion, sampling.n_logprobs)
                    for step in stream_steps(
                        completion, output.finished, index, sampling, alternatives
                    ):
                        yield step
                        index += 1
        finally:
            if spec and engine_death(engine) is None:
                await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))

    async def _capture_generation(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> tuple[Generation, ActivationCache]:
        """Generate and capture in the same pass: prompt rows, then one row per decode step."""
        self._require_hooks("capture_generation")
        prompt_embeds, adapter = self._inputs.check(tokens, call.prompt_embeds, call.lora)
        prompts, injection = self._inputs.prompts(tokens, prompt_embeds, self._prompts)
        prompt = self._one_prompt(prompts, "capture_generation")
        # Unset knobs follow the checkpoint, as in generate (and as eager's capture_generation).
        sampling = self.resolve_sampling(**call.sampling)
        params = sampling_params.params(sampling)
        steering = call.steering
        self._may_write(steering)
        await self._ready()
        addresses = self._addresses(points)
        self._inputs.check_points(addresses, injection)
        writes = self._writes(steering, *generation_reach(len(prompt), params.max_tokens), [prompt])
        spec = self._spec(addresses, writes) or {"capture": [], "steer": []}
        inputs = await self._request_inputs(prompt, injection, adapter)
        final, payload = await self._request(prompt, params, spec, inputs=inputs)
        generation = as_generation(final, prompt, sampling)
        if inputs is not None:
            generation = inputs.finish(generation)
        # The last sampled token is never fed back, so rows cover prompt + generated - 1.
        length = len(prompt) + len(generation.token_ids) - 1
        return generation, ActivationCache(self._cache(addresses, payload, length), output=final)

    # Rows drained from the workers as outputs arrive (`interp_vllm.capture_stream`); the
    # keywords of capture_generation_stream are read by ModelBase.
    _stream_capture = stream_capture

    async def _prompt_lens(self, tokens: Any, layers: Any, top_k: Any, point: Any) -> LensResult:
        """Decode `point` per layer inside the workers; only the top-k ids and probabilities
        travel back (never a vocabulary-wide tensor)."""
        self._require_hooks("logit_lens")
        prompt = self._one_prompt(tokens, "logit_lens")
        chosen, fitted, top_k, point = self._lens_arguments(layers, top_k, point)
        await self._ready()
        if fitted is not None:  # readouts_client: each layer through its J_bar in the workers
            return await self._readouts.fitted_logit_lens(prompt, chosen, fitted, top_k, point)
        addresses = self._addresses([Address(point, layer) for layer in chosen])
        if self._installed is None or "final_norm" not in self._installed.sites:
            msg = "the logit lens on this model is not served by vLLM"
            raise CapabilityUnsupported.build(
                msg,
                "the workers found no final norm to decode through",
                INSTEAD,
            )
        keys = [address_key(a) for a in addresses]
        steer = self._writes(None, len(prompt), f"this lens's {len(prompt)}-token prompt", [prompt])
        if self._pipeline > 1:
            # The rows live on their layers' stages and the final norm on the last: capture them,
            # then the last stage decodes them (top-k only comes back).
            spec = {"capture": keys, "steer": steer}
            _, captured = await self._request(prompt, self._sampling(1, 0.0), spec)
            payload = {"lens": await self._decoding.top_k(captured, keys, top_k)}
        else:
            spec = {"capture": [], "steer": steer, "lens": keys}
            _, payload = await self._request(prompt, self._sampling(1, 0.0), spec, lens_top_k=top_k)
        predictions = lens_predictions(payload["lens"], chosen, addresses, prompt, self.tokenizer)
        return LensResult(point, chosen, top_k, predictions)

    # --- delegated to the collaborators (interp_vllm.calls) ----------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Any:
        return self._tokens.to_tokens(text, prepend_bos=prepend_bos)

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        return self._tokens.to_str_tokens(text, prepend_bos=prepend_bos)

    def to_string(self, tokens: Any) -> str | list[str]:
        return self._tokens.to_string(tokens)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> Any:
        return self._tokens.apply_chat_template(messages, **kwargs)

    async def capture_attention(self, tokens: Any, layers: Sequence[int]) -> dict[int, Any]:
        from interp_torch import readouts  # on call: importing this package stays torch-free

        return await readouts.capture_attention(self, tokens, layers)

    async def decode_residuals(
        self, residuals: Any, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        return await self._decoding.decode_residuals(residuals, raw=raw, top_k=top_k)

    async def worker_features(
        self, tokens: Any, saes: Sequence[dict[str, Any]], *, top_k: int, steering: Any = None
    ) -> list[dict[str, Any]]:
        """Top-k features per token of each SAE, encoded in the workers (`WorkerSAEs`)."""
        return await self._saes.features(tokens, saes, top_k=top_k, steering=steering)

    async def unembed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_U[token_ids]` `[k, d_model]`, gathered in the workers (`VLLMReadouts`)."""
        return await self._readouts.unembed_rows(token_ids)

    async def embed_rows(self, token_ids: Sequence[int]) -> Any:
        """`W_E[token_ids]` `[k, d_model]` as stored, gathered in the workers."""
        return await self._readouts.embed_rows(token_ids)

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[Any]:
        """Per `DirectionSet`, `[batch, seq, k]` float32 values, computed in the workers."""
        return await self._readouts.project(tokens, directions, steering=steering)

    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens set in the workers (None removes it); the bytes per rank."""
        return await self._readouts.set_lens_jacobians(jacobians, name=name)

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted-lens sets: name -> the layers it holds a `J_bar` for."""
        return self._readouts.lens_sets()

    def _lens_stream(self, tokens: Any, lenses: Any, call: StreamCall) -> AsyncIterator[Any]:
        """The lens over a generation, decoded in the workers as the engine steps
        (`interp_vllm.lens_stream`); the keywords of generate_with_lens are read by ModelBase."""
        from interp_vllm.lens_stream import WorkerLensStream

        stream = WorkerLensStream(self._calls, self.resolve_sampling, self.lens_sets)
        return stream.generate_with_lens(tokens, lenses, call)

    async def pending_requests(self) -> list[str]:
        """Request ids whose rows the workers still hold (should be empty when idle)."""
        engine = await self._ready()
        answers = await engine.collective_rpc("interp_pending")
        return sorted({rid for answer in answers for rid in answer})

    def __repr__(self) -> str:
        state = "running" if self._engine is not None else "not started"
        return f"VLLMModel({self._model_id!r}, {self.backend_name}, {state})"
