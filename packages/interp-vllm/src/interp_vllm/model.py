"""What does a model served by the hooked vLLM backend answer, and how does it reach the workers?

`VLLMModel` implements the part of `interp_core.protocol.InterpModel` this foundation serves:
facts from config.json, the tokenizer, `capture` of `resid_pre`/`resid_post` for one prompt
(optionally steered by `add` specs at `resid_post`), greedy or sampled `generate`, `warmup` and
`shutdown`.
Everything else raises `CapabilityUnsupported` naming backend='eager', which serves it.

The engine is vLLM's synchronous `LLM` with `InterpWorkerExtension` mixed into its workers; the
client arms the hooks by RPC, runs the request, and collects the rows. Every argument is checked
here, before it reaches a worker: a hook that raises would kill the engine.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from interp_core.address import Address, to_address
from interp_core.backends import model_config
from interp_core.cache import ActivationCache
from interp_core.errors import CapabilityUnsupported, InvalidArgument, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.points import PointSpec, get_point
from interp_core.results import Generation, Support
from interp_core.steering import SteeringSpec, active_steering, as_specs
from interp_vllm.backend import INSTEAD, SERVED_POINTS, point_support

__all__ = ["VLLMModel"]

_EXTENSION = "interp_vllm.worker.InterpWorkerExtension"
# vLLM's CPU backend needs its KV-cache size in GiB; 1 is plenty for the models tests use.
_CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"


def _unsupported(what: str) -> CapabilityUnsupported:
    error = CapabilityUnsupported.build(
        f"{what} is not yet served by the vLLM backend",
        "this backend so far serves resid_pre/resid_post capture, add-steering at resid_post "
        "and generate",
        INSTEAD,
    )
    return error  # type: ignore[return-value]


def _read_config(model_id: str) -> dict[str, Any]:
    def fetch(name: str) -> dict[str, Any]:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name).to_dict()

    return model_config(model_id, fetch=fetch)


class VLLMModel:
    """A causal LM served by a vLLM engine with interp hooks; see `InterpModel`."""

    backend_name = "vllm"
    binds_event_loop = False

    def __init__(
        self,
        model_id: str,
        *,
        dtype: str = "float32",
        max_model_len: int | None = None,
        gpu_memory_utilization: float | None = None,
        num_gpus: int = 1,
        device: Any = None,
        extra_vllm_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
            msg = f"num_gpus={num_gpus!r} must be a positive int"
            raise InvalidArgument(msg)
        self._model_id = str(model_id)
        self._config = _read_config(self._model_id)
        self._facts = ModelFacts.from_config(self._config)
        self._dtype = dtype
        limit = self._facts.max_position_embeddings
        self._max_model_len = max_model_len or (min(limit, 2048) if limit else 2048)
        self._gpu_memory_utilization = gpu_memory_utilization
        self._num_gpus = num_gpus
        self._device = device
        self._extra = dict(extra_vllm_kwargs or {})
        self._llm: Any = None
        self._children: list[Any] = []
        self._tokenizer: Any = None

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

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._model_id)
        return self._tokenizer

    @property
    def llm(self) -> Any:
        """The `vllm.LLM` engine, started on first use."""
        if self._llm is None:
            self._llm = self._start()
        return self._llm

    # --- engine ---------------------------------------------------------------------------------
    def _start(self) -> Any:
        from interp_core.backends import cuda_available

        if not cuda_available():
            os.environ.setdefault(_CPU_KV_ENV, "1")
        from vllm import LLM

        kwargs: dict[str, Any] = {
            "model": self._model_id,
            "dtype": self._dtype,
            "max_model_len": self._max_model_len,
            "enforce_eager": True,  # hooks never fire under CUDA-graph replay or torch.compile
            "enable_prefix_caching": False,  # a cached prefix would skip captured rows
            "tensor_parallel_size": self._num_gpus,
            "worker_extension_cls": _EXTENSION,
        }
        if self._gpu_memory_utilization is not None:
            kwargs["gpu_memory_utilization"] = self._gpu_memory_utilization
        kwargs.update(self._extra)
        before = {p.pid for p in multiprocessing.active_children()}
        llm = LLM(**kwargs)
        # The engine core is our child; its workers are its children and exit when it does.
        self._children = [p for p in multiprocessing.active_children() if p.pid not in before]
        failures = [r for r in llm.collective_rpc("interp_install", args=(self.n_layers,)) if r]
        if failures:
            _shutdown(llm, self._children)
            msg = f"cannot hook the decoder layers of {self._model_id} inside vLLM"
            raise CapabilityUnsupported.build(
                msg,
                failures[0],
                INSTEAD,
            )
        return llm

    async def warmup(self) -> None:
        _ = self.llm

    async def shutdown(self) -> None:
        llm, self._llm = self._llm, None
        children, self._children = self._children, []
        if llm is not None:
            _shutdown(llm, children)

    # --- tokens ---------------------------------------------------------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Any:
        import torch

        texts = [text] if isinstance(text, str) else list(text)
        rows = [self._encode(t, prepend_bos) for t in texts]
        if len({len(r) for r in rows}) > 1:
            msg = "to_tokens on strings of different token lengths (padding)"
            raise _unsupported(msg)
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
        ids = self._encode(text, prepend_bos) if isinstance(text, str) else self._prompt(text)
        return [self.tokenizer.decode([i]) for i in ids]

    def to_string(self, tokens: Any) -> str | list[str]:
        return self.tokenizer.decode(self._prompt(tokens))

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        return tuple(get_point(name) for name in sorted(SERVED_POINTS))

    def supports(self, point: Any) -> Support:
        return point_support(point, self._facts)

    # --- checks before anything reaches a worker ------------------------------------------------
    def _prompt(self, tokens: Any) -> list[int]:
        ids = tokens.tolist() if hasattr(tokens, "tolist") else tokens
        if isinstance(ids, (list, tuple)) and ids and isinstance(ids[0], (list, tuple)):
            if len(ids) != 1:
                msg = f"a batch of {len(ids)} prompts in one call"
                raise _unsupported(msg)
            ids = ids[0]
        if not isinstance(ids, (list, tuple)) or not ids:
            msg = "tokens must be a non-empty [seq] or [1, seq] list of token ids"
            raise InvalidArgument(msg)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            msg = "tokens must be ints"
            raise InvalidArgument(msg)
        vocab = self._facts.vocab_size
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            msg = f"token ids {bad[:5]} are outside the vocabulary [0, {vocab})"
            raise InvalidArgument(msg)
        if len(ids) >= self._max_model_len:
            msg = (
                f"the prompt has {len(ids)} tokens but max_model_len is {self._max_model_len}; "
                "shorten it or load with a larger max_model_len"
            )
            raise InvalidArgument(msg)
        return [int(i) for i in ids]

    def _addresses(self, points: Sequence[Any]) -> list[Address]:
        addresses = []
        for point in points:
            verdict = self.supports(point)
            if not verdict:
                raise PointUnsupported(verdict.explain())
            addresses.append(to_address(point))
        return addresses

    def _steering(self, steering: Any) -> list[tuple[int, list[float], list[int] | None]]:
        specs: list[SteeringSpec] = [*active_steering(self), *as_specs(steering)]
        wire: list[tuple[int, list[float], list[int] | None]] = []
        for spec in specs:
            spec.validate_for(self._facts)
            if spec.address.name != "resid_post" or spec.address.layer is None:
                msg = f"steering at {spec.address}"
                raise _unsupported(msg)
            if spec.op != "add":
                msg = f"the {spec.op!r} steering operation"
                raise _unsupported(msg)
            values = [float(x) * spec.scale for x in spec.values()]
            if len(values) != self.d_model or not all(math.isfinite(x) for x in values):
                msg = f"the steering vector at {spec.address} must be {self.d_model} finite numbers"
                raise InvalidArgument(msg)
            positions = None if spec.positions is None else [int(p) for p in spec.positions]
            wire.append((spec.address.layer, values, positions))
        return wire

    # --- work -----------------------------------------------------------------------------------
    async def capture(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        steering: Any = None,
        attention_mask: Any = None,
    ) -> ActivationCache:
        if attention_mask is not None:
            msg = "attention_mask"
            raise _unsupported(msg)
        prompt = self._prompt(tokens)
        addresses = self._addresses(points)
        wire = self._steering(steering)
        taps = sorted({(a.name, a.layer) for a in addresses if a.layer is not None})
        payload = self._run(prompt, taps, wire, self._sampling(1, 0.0, None, None, None))[1]
        tensors = {}
        for address in addresses:
            rows = payload.get(f"{address.name}.{address.layer}")
            if rows is None or rows.shape[0] != len(prompt):
                got = "nothing" if rows is None else f"{rows.shape[0]} rows"
                msg = (
                    f"the vLLM worker returned {got} for {address} on a {len(prompt)}-token prompt"
                )
                raise CapabilityUnsupported.build(
                    msg,
                    "the hook did not see exactly one prefill of the prompt",
                    INSTEAD,
                )
            tensors[address] = rows.unsqueeze(0)
        return ActivationCache(tensors)

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
        prompt = self._prompt(tokens)
        wire = self._steering(steering)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            msg = f"max_new_tokens={max_new_tokens!r} must be a positive int"
            raise InvalidArgument(msg)
        params = self._sampling(max_new_tokens, temperature, top_k, top_p, seed)
        output = self._run(prompt, [], wire, params)[0]
        completion = output.outputs[0]
        return Generation(
            text=completion.text,
            token_ids=tuple(completion.token_ids),
            prompt_token_ids=tuple(prompt),
            finish_reason=completion.finish_reason,
            output=output,
        )

    def _sampling(
        self,
        max_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
    ) -> Any:
        from vllm import SamplingParams

        kwargs: dict[str, Any] = {"max_tokens": max_tokens, "temperature": float(temperature)}
        if top_k is not None:
            kwargs["top_k"] = int(top_k)
        if top_p is not None:
            kwargs["top_p"] = float(top_p)
        if seed is not None:
            kwargs["seed"] = int(seed)
        return SamplingParams(**kwargs)

    def _run(
        self,
        prompt: list[int],
        taps: list[tuple[str, int]],
        wire: list[tuple[int, list[float], list[int] | None]],
        params: Any,
    ) -> tuple[Any, dict[str, Any]]:
        from interp_vllm.worker import decode_tensor

        llm = self.llm
        llm.collective_rpc("interp_arm", args=(taps, wire))
        try:
            outputs = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
        finally:
            llm.collective_rpc("interp_disarm")
        result = llm.collective_rpc("interp_collect")[0]  # rank 0 holds the full residual
        if result["errors"]:
            msg = "a vLLM worker hook failed; the request's captures and steering are unreliable"
            raise CapabilityUnsupported.build(
                msg,
                "; ".join(result["errors"]),
                INSTEAD,
            )
        payload = {k: decode_tensor(*v) for k, v in result["captured"].items()}
        return outputs[0], payload

    # --- not served yet -------------------------------------------------------------------------
    async def capture_generation(self, *args: Any, **kwargs: Any) -> Any:
        msg = "capture_generation"
        raise _unsupported(msg)

    def generate_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        msg = "generate_stream"
        raise _unsupported(msg)

    async def logit_lens(self, *args: Any, **kwargs: Any) -> Any:
        msg = "logit_lens"
        raise _unsupported(msg)

    def __repr__(self) -> str:
        state = "running" if self._llm is not None else "not started"
        return f"VLLMModel({self._model_id!r}, {self._facts.architecture}, {state})"


def _shutdown(llm: Any, children: list[Any]) -> None:
    """Stop the engine core, then reap the processes it started so none is left as a zombie.

    vLLM's own shutdown signals the engine core (and kills it after a grace period) but does not
    join it, so the process would linger as a zombie until this interpreter exits.
    """
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if core is not None:
        core.shutdown()
    for child in children:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
            child.join(timeout=5)
