"""The eager model: HF transformers in-process, every point exact.

`EagerModel` satisfies `interp_core.protocol.InterpModel`. Construction reads only the config (so
facts, points and refusals are answerable at once); the weights load on `warmup()` or on the
first call that needs them. Every work method validates all of its arguments before the forward
pass starts, so a refusal never leaves the model half-hooked.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import torch

from interp_core.address import Address, to_address
from interp_core.cache import ActivationCache
from interp_core.compat import known_issues_for
from interp_core.configs import model_config
from interp_core.dtypes import accepted_dtype_names, resolve_dtype
from interp_core.errors import (
    CapabilityUnsupported,
    InterpError,
    PointUnsupported,
    SteeringSpecError,
)
from interp_core.facts import ModelFacts
from interp_core.points import PointSpec, absence_reason, points_for
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult, Support
from interp_core.sampling import check_lens_top_k, check_sampling
from interp_core.steering import SteeringSpec, active_steering, as_specs
from interp_eager.allocator import keep_freed_memory
from interp_eager.generation import decode_steps
from interp_eager.hooks import HookSession, Write
from interp_eager.taps import Tap, resolve_tap, write_site
from interp_eager.tree import STREAM_HEADS, ModelTree, bind_tree
from interp_torch.steering import steering_vector

__all__ = ["EagerModel"]

# The canonical dtype names of interp_core.dtypes (which also holds their aliases and "auto").
_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_ATTENTION_MATRICES = {"attn_scores", "attn_probs"}
# The module a multi-stream trunk collapses its streams with before the final norm (DeepSeek-V4).


def _read_config(model_id: str, trust_remote_code: bool) -> dict[str, Any]:
    def fetch(name: str) -> dict[str, Any]:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code).to_dict()

    return model_config(model_id, fetch=fetch)


def _dtype(dtype: Any, stated: str | None) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    name = resolve_dtype(dtype, stated)
    if name is not None:
        return _TORCH_DTYPES[name]
    message = (
        f"dtype={dtype!r} is not a dtype the eager backend loads; use one of "
        f"{', '.join(accepted_dtype_names())}"
    )
    raise CapabilityUnsupported(message)


class EagerModel:
    """A HF causal LM served in-process; see `interp_core.protocol.InterpModel`."""

    backend_name = "eager"
    binds_event_loop = False

    def __init__(
        self,
        model_id: str,
        *,
        device: str | None = None,
        dtype: Any = "float32",
        attn_implementation: str = "eager",
        requires_grad: bool = False,
        quantization: str | None = None,
        num_gpus: int = 1,
        trust_remote_code: bool = False,
        hf_model: Any = None,
        tokenizer: Any = None,
        **model_kwargs: Any,
    ) -> None:
        self._model_id = str(model_id)
        self._config = _read_config(self._model_id, trust_remote_code)
        self._facts = ModelFacts.from_config(self._config)
        self._device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._dtype = _dtype(dtype, self._facts.torch_dtype)
        self.attn_implementation = attn_implementation
        self.requires_grad = bool(requires_grad)
        self.quantization = _check_quantization(quantization)
        if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
            message = f"num_gpus={num_gpus!r} must be a positive int (it is never inferred)"
            raise CapabilityUnsupported(message)
        self.num_gpus = num_gpus
        self.trust_remote_code = trust_remote_code
        self._model_kwargs = model_kwargs
        self._hf_model = hf_model
        self._tokenizer = tokenizer
        self._tree: ModelTree | None = None
        self._taps: dict[Address, Tap] = {}
        for issue in known_issues_for(self._facts.model_type, _transformers_version()):
            warnings.warn(issue.message(), stacklevel=2)

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
    def config(self) -> dict[str, Any]:
        return self._config

    @property
    def device(self) -> torch.device:
        return next(self.hf_model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def hf_model(self) -> Any:
        self._ensure_loaded()
        return self._hf_model

    @property
    def tree(self) -> ModelTree:
        self._ensure_loaded()
        assert self._tree is not None
        return self._tree

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(
                self._model_id, trust_remote_code=self.trust_remote_code
            )
        return self._tokenizer

    # --- loading --------------------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._tree is not None:
            return
        if self._hf_model is None:
            self._hf_model = self._load_weights()
        self._hf_model.eval()
        if not self.requires_grad:
            self._hf_model.requires_grad_(False)
        self._tree = bind_tree(self._hf_model, self._facts)

    def _load_weights(self) -> Any:
        from transformers import AutoModelForCausalLM

        if str(self._device).startswith("cpu") and self.num_gpus == 1:
            keep_freed_memory()  # captures hold activations alive; see allocator.py

        kwargs: dict[str, Any] = {
            "dtype": self._dtype,
            "attn_implementation": self.attn_implementation,
            "trust_remote_code": self.trust_remote_code,
            **self._model_kwargs,
        }
        if self.quantization is not None:
            kwargs["quantization_config"] = _bnb_config(self.quantization, self._dtype)
        if self.num_gpus > 1:
            _check_gpus(self.num_gpus)
            kwargs["device_map"] = "auto"
        model = AutoModelForCausalLM.from_pretrained(self._model_id, **kwargs)
        if self.num_gpus == 1 and self.quantization is None:
            model = model.to(self._device)
        return model

    async def warmup(self) -> None:
        self._ensure_loaded()

    async def shutdown(self) -> None:
        self._hf_model = None
        self._tree = None
        self._taps.clear()

    # --- tokens ---------------------------------------------------------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> torch.Tensor:
        from interp_eager.tokens import encode

        return encode(self.tokenizer, text, prepend_bos=prepend_bos)

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        from interp_eager.tokens import str_tokens

        return str_tokens(self.tokenizer, text, prepend_bos=prepend_bos)

    def to_string(self, tokens: Any) -> str | list[str]:
        from interp_eager.tokens import decode

        return decode(self.tokenizer, tokens)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], **kwargs: Any) -> Any:
        """Token ids of a chat and the token span of every message (see `tokens.chat_tokens`)."""
        from interp_eager.tokens import chat_tokens

        return chat_tokens(self.tokenizer, messages, **kwargs)

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        return points_for(self._facts)

    def supports(self, point: Any) -> Support:
        try:
            self._check_address(to_address(point))
        except InterpError as error:
            return Support.no(str(error))
        return Support.yes()

    def _check_address(self, address: Address) -> Address:
        if not address.is_path:
            try:
                reason = absence_reason(address.name, self._facts, address.layer, address.stream)
            except PointUnsupported as error:
                # A malformed coordinate (layer 7 of 2): the core's sentence names the layer
                # but not the point, and the caller may have asked for several.
                message = f"cannot capture {address}: {error}"
                raise PointUnsupported(message) from error
            if reason:
                message = f"cannot capture {address} on this {self._facts.architecture}: {reason}"
                raise PointUnsupported(message)
        if address.name in _ATTENTION_MATRICES and self.attn_implementation != "eager":
            message = (
                f"{address} needs the attention matrix, which attn_implementation="
                f"{self.attn_implementation!r} never materialises; load with "
                f"attn_implementation='eager' (the default)"
            )
            raise CapabilityUnsupported(message)
        return address

    def tap(self, address: Address) -> Tap:
        if address not in self._taps:
            self._taps[address] = resolve_tap(self._check_address(address), self.tree, self._facts)
        return self._taps[address]

    # --- argument checks ------------------------------------------------------------------------
    def _tokens(self, tokens: Any) -> torch.Tensor:
        if isinstance(tokens, str):
            message = (
                "tokens must be token ids, not text; call model.to_tokens(text) first "
                "(it adds the BOS token the model expects)"
            )
            raise CapabilityUnsupported(message)
        ids = torch.as_tensor(tokens) if not isinstance(tokens, torch.Tensor) else tokens
        if ids.dim() == 1:
            ids = ids.unsqueeze(0)
        # Checked first: `[]` becomes a float tensor, and "empty" is the fix to name.
        if ids.dim() == 2 and (ids.shape[1] == 0 or ids.shape[0] == 0):
            message = (
                "the prompt is empty: there is no token to run the model on; pass at least one"
            )
            raise CapabilityUnsupported(message)
        if ids.dim() != 2 or ids.is_floating_point():
            message = (
                f"tokens must be integer ids shaped [seq] or [batch, seq], got "
                f"{tuple(ids.shape)} of {ids.dtype}; call model.to_tokens(text) to make them"
            )
            raise CapabilityUnsupported(message)
        limit = self._facts.max_position_embeddings
        if limit is not None and ids.shape[1] > limit:
            message = (
                f"the prompt has {ids.shape[1]} tokens but this model's context is {limit}; "
                f"truncate it (e.g. tokens[:, -{limit}:])"
            )
            raise CapabilityUnsupported(message)
        vocab = self._facts.vocab_size
        if int(ids.min()) < 0 or int(ids.max()) >= vocab:
            message = f"token ids must lie in 0..{vocab - 1} (this model's vocabulary)"
            raise CapabilityUnsupported(message)
        return ids.to(self.device)

    def _mask(self, mask: Any, ids: torch.Tensor) -> torch.Tensor:
        if mask is None:
            return torch.ones_like(ids)
        mask = torch.as_tensor(mask, device=ids.device)
        if mask.dim() == 1:
            mask = mask.unsqueeze(0)
        if tuple(mask.shape) != tuple(ids.shape):
            message = f"attention_mask has shape {tuple(mask.shape)}; tokens are {tuple(ids.shape)}"
            raise CapabilityUnsupported(message)
        if bool((mask.sum(dim=1) == 0).any()):
            message = "a row of attention_mask is all zeros: that row has no token to run"
            raise CapabilityUnsupported(message)
        return mask.to(torch.long)

    def _writes(self, steering: Any) -> list[Write]:
        specs = (*active_steering(self), *as_specs(steering))
        writes = []
        for spec in specs:
            spec.validate_for(self._facts)
            tap = self.tap(spec.address)
            if tap.put is None:
                message = (
                    f"cannot steer at {spec.address}: it is read where no tensor can be "
                    f"replaced; steer at {_write_hint(spec.address)} instead"
                )
                raise SteeringSpecError(message)
            writes.append(Write(write_site(tap), spec, self._vector(spec)))
        return writes

    def _vector(self, spec: SteeringSpec) -> torch.Tensor:
        # The values are checked as every backend checks them (interp_torch, through the core's
        # refusals); the width against the point was checked by validate_for, and a path
        # address's width is known only to the hook that meets the tensor.
        return steering_vector(spec).to(self.device)

    # --- the forward pass -----------------------------------------------------------------------
    def run_with_cache(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        attention_mask: Any = None,
        steering: Any = None,
        detach: bool = True,
    ) -> ActivationCache:
        """One forward pass with captures (sync; the async `capture` wraps it)."""
        if not detach and not self.requires_grad:
            message = (
                "detach=False keeps the autograd graph through the forward pass, but this model "
                "was loaded without gradients; load with requires_grad=True"
            )
            raise CapabilityUnsupported(message)
        addresses = [self._check_address(to_address(p)) for p in points]
        ids = self._tokens(tokens)
        # Without padding the model runs exactly as a plain HF call does (its own causal mask and
        # positions), so a capture costs only its hooks; with a mask, positions follow it.
        inputs: dict[str, Any] = {"input_ids": ids, "use_cache": False}
        if attention_mask is None:
            positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        else:
            mask = self._mask(attention_mask, ids)
            positions = _position_ids(mask)
            inputs.update(attention_mask=mask, position_ids=positions)
        reads = [self.tap(a) for a in dict.fromkeys(addresses)]
        writes = self._writes(steering)
        for copy in (False, True):
            session = HookSession(reads, writes, detach=detach, copy=copy)
            with session, torch.set_grad_enabled(not detach):
                session.start_forward(positions)
                output = self.hf_model(**inputs)
                session.check_fired_once()
                session.check_writes_applied()
            if not session.mutated():
                break
            # The model changed a captured tensor in place after reading it: run again, copying.
        tensors = {tap.address: session.result(tap.address) for tap in reads}
        return ActivationCache(tensors, output=output)

    def forward_logits(self, tokens: Any, *, steering: Any = None) -> torch.Tensor:
        """The model's logits for `tokens` (its own multiplier and softcap applied)."""
        return self.run_with_cache(tokens, [], steering=steering).output.logits

    async def capture(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        steering: Any = None,
        attention_mask: Any = None,
        detach: bool = True,
    ) -> ActivationCache:
        return self.run_with_cache(
            tokens, points, attention_mask=attention_mask, steering=steering, detach=detach
        )

    # --- generation -----------------------------------------------------------------------------
    def _decode_steps(
        self,
        tokens: Any,
        *,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
        steering: Any,
    ) -> Iterator[tuple[int, float, bool]]:
        sampling = check_sampling(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
        )
        ids = self._tokens(tokens)
        if ids.shape[0] != 1:
            message = (
                f"generation takes one prompt at a time; got a batch of {ids.shape[0]}; "
                f"call generate once per row (tokens[i])"
            )
            raise CapabilityUnsupported(message)
        limit = self._facts.max_position_embeddings
        if limit is not None and ids.shape[1] >= limit:
            message = (
                f"the prompt has {ids.shape[1]} tokens and fills this model's context of {limit}, "
                f"leaving no position for a generated token; shorten it to at most {limit - 1} "
                f"tokens (e.g. tokens[:, -{limit - 1}:])"
            )
            raise CapabilityUnsupported(message)
        writes = self._writes(steering)
        return decode_steps(
            self.hf_model,
            ids,
            writes,
            sampling,
            eos=self._eos_ids(),
            context=limit,
        )

    def generate_sync(self, tokens: Any, **kwargs: Any) -> Generation:
        ids = self._tokens(tokens)
        steps = list(self._decode_steps(ids, **_gen_defaults(kwargs)))
        generated = [token for token, _, _ in steps]
        eos = self._eos_ids()
        finish = "stop" if generated and generated[-1] in eos else "length"
        return Generation(
            text=self.tokenizer.decode(generated, skip_special_tokens=True),
            token_ids=generated,
            prompt_token_ids=ids[0].tolist(),
            finish_reason=finish,
        )

    async def generate(self, tokens: Any, **kwargs: Any) -> Generation:
        return self.generate_sync(tokens, **kwargs)

    async def generate_stream(self, tokens: Any, **kwargs: Any) -> AsyncIterator[GenerationStep]:
        """One step per generated token; the last one is marked finished with its reason.

        Step texts concatenate to `generate`'s text. A token that ends inside a multi-byte
        character emits no text yet (decoding it alone gives U+FFFD); its characters arrive
        with the token that completes them, or with the last step.
        """
        steps = self._decode_steps(tokens, **_gen_defaults(kwargs))
        eos = self._eos_ids()
        generated: list[int] = []
        emitted = ""
        for index, (token, logprob, last) in enumerate(steps):
            generated.append(token)
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            if last:
                finish = "stop" if token in eos else "length"
                yield GenerationStep(index, token, text[len(emitted) :], logprob, True, finish)
                return
            delta = "" if text.endswith("\ufffd") else text[len(emitted) :]
            emitted += delta
            yield GenerationStep(index, token, delta, logprob)
            await asyncio.sleep(0)

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
        addresses = [self._check_address(to_address(p)) for p in points]
        generation = self.generate_sync(
            tokens,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            steering=steering,
        )
        # The last sampled token is never fed back, so captures cover prompt + generated - 1.
        full = [*generation.prompt_token_ids, *generation.token_ids[:-1]]
        cache = self.run_with_cache([full], addresses, steering=steering)
        return generation, cache

    def _eos_ids(self) -> set[int]:
        eos = getattr(self.hf_model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if eos is None:
            return set()
        return set(eos) if isinstance(eos, list | tuple) else {int(eos)}

    # --- logit lens -----------------------------------------------------------------------------
    def decode_residuals(self, residuals: torch.Tensor, *, raw: bool = False) -> torch.Tensor:
        """final_norm -> lm_head on residuals; the model's multiplier and softcap unless raw.

        On a multi-stream trunk a stream stack `[batch, seq, n_streams, d_model]` is first
        collapsed by the model's own hyper head, exactly as the model does before its final norm.
        """
        tree = self.tree
        facts = self._facts
        if facts.n_streams > 1 and tuple(residuals.shape[-2:]) == (facts.n_streams, self.d_model):
            if residuals.dim() != 4:
                message = (
                    f"a stream stack must be [batch, seq, {facts.n_streams}, {self.d_model}] to "
                    f"be collapsed by the hyper head; got {tuple(residuals.shape)}"
                )
                raise CapabilityUnsupported(message)
            residuals = self._stream_head()(residuals)
        logits = tree.lm_head(tree.final_norm(residuals))
        if raw:
            return logits
        if facts.logit_multiplier not in (None, 1.0):
            logits = logits * facts.logit_multiplier
        if facts.final_logit_softcap:
            cap = facts.final_logit_softcap
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _stream_head(self) -> Any:
        head = self.tree.stream_head
        if head is not None:
            return head
        message = (
            f"this {self._facts.architecture} carries {self._facts.n_streams} residual streams "
            f"but its trunk has no module named {' / '.join(STREAM_HEADS)} to collapse them "
            f"before the final norm; decode one stream (resid_post.L.stream-K) with raw=True"
        )
        raise PointUnsupported(message)

    def logit_lens_sync(
        self,
        tokens: Any,
        layers: Sequence[int] | None = None,
        *,
        top_k: int = 10,
        point: str = "resid_post",
    ) -> LensResult:
        """Decode `point` at each layer; see `interp_core.protocol.InterpModel.logit_lens`.

        On a multi-stream trunk resid_post is the stream stack (resid_streams), decoded through
        the model's hyper head: the same read-out the model applies after its last layer.
        """
        ids = self._tokens(tokens)
        if ids.shape[0] != 1:
            message = (
                f"the logit lens reads one prompt at a time; got a batch of {ids.shape[0]}; "
                f"call it once per row (tokens[i])"
            )
            raise CapabilityUnsupported(message)
        top_k = check_lens_top_k(top_k)
        chosen = list(range(self.n_layers)) if layers is None else [int(x) for x in layers]
        read = point
        if self._facts.n_streams > 1 and point == "resid_post":
            read = "resid_streams"
        addresses = [self._check_address(Address(read, layer)) for layer in chosen]
        cache = self.run_with_cache(ids, addresses)
        predictions: dict[int, tuple[tuple[LensPrediction, ...], ...]] = {}
        rows = []
        with torch.no_grad():
            for layer, address in zip(chosen, addresses, strict=True):
                logits = self.decode_residuals(cache[address])[0]
                rows.append(logits)
                probs = torch.softmax(logits.float(), dim=-1)
                values, indices = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
                predictions[layer] = tuple(
                    tuple(
                        LensPrediction(int(i), self.tokenizer.decode([int(i)]), float(p))
                        for p, i in zip(vals.tolist(), idx.tolist(), strict=True)
                    )
                    for vals, idx in zip(values, indices, strict=True)
                )
        return LensResult(point, chosen, top_k, predictions, logits=torch.stack(rows))

    async def logit_lens(
        self, tokens: Any, layers: Sequence[int] | None = None, **kw: Any
    ) -> LensResult:
        return self.logit_lens_sync(tokens, layers, **kw)

    def __repr__(self) -> str:
        state = "loaded" if self._tree is not None else "not loaded"
        return f"EagerModel({self._model_id!r}, {self._facts.architecture}, {state})"


# --- helpers --------------------------------------------------------------------------------------
def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _position_ids(mask: torch.Tensor) -> torch.Tensor:
    # Positions follow the mask, so a left-padded row numbers its real tokens from 0.
    return (mask.cumsum(dim=-1) - 1).clamp(min=0)


def _write_hint(address: Address) -> str:
    if address.name in _ATTENTION_MATRICES:
        return "z (the attention result) or attn_out"
    if address.name in {"expert_weights", "expert_indices"}:
        return "router_logits"
    return "a writable point (`interp points` marks them)"


def _check_quantization(quantization: str | None) -> str | None:
    if quantization in (None, "bnb-4bit", "bnb-8bit"):
        return quantization
    if quantization == "fp8":
        message = (
            "quantization='fp8' is not something the eager backend can apply on load; use a vLLM "
            "backend (load_model(..., backend='vllm', quantization='fp8')) or a checkpoint "
            "shipped in FP8"
        )
        raise CapabilityUnsupported(message)
    message = f"quantization={quantization!r} is unknown; use 'bnb-4bit', 'bnb-8bit' or None"
    raise CapabilityUnsupported(message)


def _bnb_config(quantization: str, dtype: torch.dtype) -> Any:
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as error:
        message = (
            f"quantization={quantization!r} needs bitsandbytes; "
            f"pip install 'interp-eager[quant]' (CUDA only)"
        )
        raise CapabilityUnsupported(message) from error
    if quantization == "bnb-4bit":
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype)
    return BitsAndBytesConfig(load_in_8bit=True)


def _check_gpus(num_gpus: int) -> None:
    available = torch.cuda.device_count()
    if available < num_gpus:
        message = (
            f"num_gpus={num_gpus} but this machine has {available} CUDA device(s); pass "
            f"num_gpus={max(available, 1)}"
        )
        raise CapabilityUnsupported(message)


def _gen_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    allowed = {"max_new_tokens", "temperature", "top_k", "top_p", "seed", "steering"}
    unknown = set(kwargs) - allowed
    if unknown:
        message = f"generate() got unknown arguments {sorted(unknown)}; it takes {sorted(allowed)}"
        raise CapabilityUnsupported(message)
    return {
        "max_new_tokens": kwargs.get("max_new_tokens", 64),
        "temperature": kwargs.get("temperature", 1.0),
        "top_k": kwargs.get("top_k"),
        "top_p": kwargs.get("top_p"),
        "seed": kwargs.get("seed"),
        "steering": kwargs.get("steering"),
    }
