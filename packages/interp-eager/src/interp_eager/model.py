"""The eager model: HF transformers in-process, every point exact.

`EagerModel` satisfies `interp_core.protocol.InterpModel`. Construction reads only the config (so
facts, points and refusals are answerable at once); the weights load on `warmup()` or on the
first call that needs them. Every work method validates all of its arguments before the forward
pass starts, so a refusal never leaves the model half-hooked.

One model serves one call at a time. Hooks live on the model's modules, so two forward passes
running at once would share them; every call that runs the model (capture, generation, the lens,
`decode_residuals`) therefore holds the model's lock (`threading.RLock`) for its forward passes,
and calls from several threads queue. A stream holds the lock and its steering only while it
runs the forward pass of one step, never between yields. After `shutdown()` every such call is
refused until `warmup()` loads the weights again.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from interp_core.address import Address, to_address, to_addresses
from interp_core.cache import ActivationCache
from interp_core.compat import known_issues_for
from interp_core.errors import (
    CapabilityUnsupported,
    GradientsUnsupported,
    InterpError,
    PointNotWritable,
    PointUnsupported,
)
from interp_core.facts import ModelFacts
from interp_core.model_base import CaptureCall, ModelBase, generation_reach
from interp_core.points import PointSpec, absence_reason, points_for
from interp_core.results import (
    Generation,
    LensPrediction,
    LensResult,
    Support,
    TokenLogprobs,
)
from interp_core.sampling import Sampling, check_lens_top_k
from interp_core.steering import SteeringSpec
from interp_core.steering_lens import special_token_ids
from interp_core.writes import admit_writes
from interp_eager import call_inputs, lens_generation
from interp_eager.allocator import keep_freed_memory
from interp_eager.arguments import (
    capture_budget,
    check_budget_option,
    check_capture_budget,
    check_mask,
    check_padded_positions,
    check_tokens,
    gen_defaults,
    position_ids,
)
from interp_eager.capture_stream import capture_rows, stream_capture, stream_generation
from interp_eager.decoding import decode_through_head
from interp_eager.generation import Step, decode_steps
from interp_eager.generation import prompt_logprobs as prompt_logprobs_of
from interp_eager.hooks import HookSession, Write
from interp_eager.loading import (
    bnb_config,
    check_gpus,
    check_hub_kernels_here,
    check_quantization,
    read_config,
    torch_dtype,
    transformers_version,
)
from interp_eager.readouts import EagerReadouts
from interp_eager.taps import Tap, resolve_tap, write_site
from interp_eager.tree import ModelTree, bind_tree
from interp_torch import readouts
from interp_torch.lens import top_tokens
from interp_torch.steering import check_steering_fits, steering_vector

__all__ = ["EagerModel"]

# from_pretrained arguments the backend derives from its own keywords (see _load_weights).
_OWN_FROM_PRETRAINED = frozenset(
    {
        "dtype",
        "torch_dtype",
        "attn_implementation",
        "trust_remote_code",
        "quantization_config",
        "device_map",
    }
)

_ATTENTION_MATRICES = {"attn_scores", "attn_probs"}


class EagerModel(ModelBase):
    """A HF causal LM served in-process; see `interp_core.protocol.InterpModel`.

    One model serves one call at a time: every call that runs the model holds its lock for its
    forward passes, so calls from several threads queue rather than share hooks, and nothing is
    patched process-wide. A `generate_stream` holds the lock and its steering only while it runs
    the forward pass of one step; between yields nothing of it is installed. After `shutdown()`
    calls are refused until `warmup()`.

    `capture_budget_bytes` bounds the memory one capture may take (the captured tensors, priced
    from `interp_core.shapes` before any work); None allows `DEFAULT_BUDGET_SHARE` of the memory
    available on the model's device when the call starts.
    """

    backend_name = "eager"
    binds_event_loop = False
    graph_refusal = None  # capture(detach=False) keeps the graph (with requires_grad=True)

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
        capture_budget_bytes: int | None = None,
        from_pretrained_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self._model_id = str(model_id)
        self._config = read_config(self._model_id, trust_remote_code)
        self._facts = ModelFacts.from_config(self._config)
        self._device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._dtype = torch_dtype(dtype, self._facts.torch_dtype)
        self.attn_implementation = attn_implementation
        self.requires_grad = bool(requires_grad)
        self.quantization = check_quantization(quantization)
        if not isinstance(num_gpus, int) or isinstance(num_gpus, bool) or num_gpus < 1:
            message = f"num_gpus={num_gpus!r} must be a positive int (it is never inferred)"
            raise CapabilityUnsupported(message)
        self.num_gpus = num_gpus
        self.trust_remote_code = trust_remote_code
        # Arguments for from_pretrained travel in one explicit dict; bare keywords are refused.
        self._model_kwargs = dict(from_pretrained_kwargs or {})
        owned = sorted(set(self._model_kwargs) & _OWN_FROM_PRETRAINED)
        if owned:
            message = (
                f"from_pretrained_kwargs sets {', '.join(owned)}, which the eager backend sets "
                f"from its own keywords; pass dtype=, attn_implementation=, trust_remote_code=, "
                f"quantization= or num_gpus= to load_model instead"
            )
            raise CapabilityUnsupported(message)
        self._hf_model = hf_model
        self._tokenizer = tokenizer
        self._tree: ModelTree | None = None
        self._taps: dict[Address, Tap] = {}
        self.capture_budget_bytes = check_budget_option(capture_budget_bytes)
        self._lock = threading.RLock()
        self._shut_down = False
        # Weight rows, probes and fitted lenses (interp_eager.readouts): given what they use.
        self._readouts = EagerReadouts(
            self._facts, tree=lambda: self.tree, serving=self._serving, capture=self.capture
        )
        for issue in known_issues_for(
            self._facts.model_type, transformers_version(), backend="eager"
        ):
            warnings.warn(issue.message(), stacklevel=2)

    # --- identity and facts (model_id, facts, n_layers, d_model: ModelBase) ----------------------
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
        self._refuse_if_shut_down()
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
            kwargs["quantization_config"] = bnb_config(self.quantization, self._dtype)
        if self.num_gpus > 1:
            check_gpus(self.num_gpus)
            kwargs["device_map"] = "auto"
        check_hub_kernels_here(self._config, kwargs, self._device, self.num_gpus)
        model = AutoModelForCausalLM.from_pretrained(self._model_id, **kwargs)
        if self.num_gpus == 1 and self.quantization is None:
            model = model.to(self._device)
        return model

    async def warmup(self) -> None:
        """Load the weights now; after `shutdown()`, load them again and serve calls again."""
        with self._lock:
            self._shut_down = False
            self._ensure_loaded()

    async def shutdown(self) -> None:
        """Release the weights; later calls are refused until `warmup()` (idempotent)."""
        with self._lock:
            self._hf_model = None
            self._tree = None
            self._taps.clear()
            self._shut_down = True

    def _refuse_if_shut_down(self) -> None:
        if self._shut_down:
            error = CapabilityUnsupported.build(
                f"{self._model_id} was shut down",
                "shutdown() released its weights, and a call would silently load them again",
                "call warmup() (interp_core.sync.warmup(model)) to load them and serve again",
            )
            raise error

    @contextmanager
    def _serving(self) -> Iterator[None]:
        """Hold the model for one call's forward passes (re-entrant within a thread)."""
        with self._lock:
            self._refuse_if_shut_down()
            yield

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
        return check_tokens(tokens, self._facts).to(self.device)

    def _mask(self, mask: Any, ids: torch.Tensor) -> torch.Tensor:
        checked = check_mask(mask, ids)
        check_padded_positions(checked, self.hf_model.config)
        return checked

    def _writes(
        self,
        steering: Any,
        reach: tuple[int, str] | None = None,
        prompts: list[list[int]] | None = None,
        scope: tuple[int, str] | None = None,
    ) -> list[Write]:
        """Checked writes for `steering` plus the active `steer()` specs.

        `reach` is (how many positions the call's forward passes run, the call in words), or
        None not to check: a position beyond them would steer nothing, silently, and is refused
        as an empty positions list is (`interp_core.steering.check_positions_within`).
        """
        # Scopes resolve against the call's prompt; the special ids are read only for a
        # skip_special spec (a model folder without a tokenizer needs none otherwise).
        special = lambda: special_token_ids(self.tokenizer)  # noqa: E731
        specs = admit_writes(
            self, steering, self._facts, reach, self._write_refusal, prompts, special, scope
        )
        writes = []
        for spec in specs:
            vector = self._vector(spec)
            check_steering_fits(spec, self._dtype, vector)
            writes.append(Write(write_site(self.tap(spec.address)), spec, vector))
        return writes

    def _write_refusal(self, spec: SteeringSpec, _specs: Any) -> PointNotWritable | None:
        """Eager's one per-point refusal: a point read where no tensor can be replaced."""
        if self.tap(spec.address).put is not None:
            return None
        message = (
            f"cannot steer at {spec.address}: it is read where no tensor can be "
            f"replaced; steer at {_write_hint(spec.address)} instead"
        )
        return PointNotWritable(message)

    def _vector(self, spec: SteeringSpec) -> torch.Tensor:
        # The values are checked as every backend checks them (interp_torch, through the core's
        # refusals); the width against the point was checked by validate_for, and a path
        # address's width is known only to the hook that meets the tensor.
        return steering_vector(spec).to(self.device)

    def _check_budget(self, addresses: Sequence[Address], batch: int, seq: int) -> None:
        """Refuse, before any work, a capture whose tensors would exceed the memory budget."""
        check_capture_budget(
            addresses,
            self._facts,
            self._dtype,
            (batch, seq),
            capture_budget(self.capture_budget_bytes, self.device),
        )

    # --- the forward pass -----------------------------------------------------------------------
    def run_with_cache(
        self,
        tokens: Any,
        points: Sequence[Any],
        *,
        attention_mask: Any = None,
        steering: Any = None,
        detach: bool = True,
        prompt_embeds: Any = None,
        lora: Any = None,
    ) -> ActivationCache:
        """One forward pass with captures (sync; the async `capture` wraps it).

        `prompt_embeds` and `lora`: see `interp_eager.call_inputs`.
        """
        if prompt_embeds is not None or lora is not None:
            args = (points, attention_mask, steering, detach, True)
            return call_inputs.run(self, tokens, prompt_embeds, lora, self._run_with_cache, *args)
        with self._serving():
            return self._run_with_cache(tokens, points, attention_mask, steering, detach, True)

    def _run_with_cache(
        self,
        tokens: Any,
        points: Any,
        attention_mask: Any,
        steering: Any,
        detach: bool,
        check_reach: bool,
        prompt_rows: list[list[int]] | None = None,
    ) -> ActivationCache:
        if not detach and not self.requires_grad:
            message = (
                "detach=False keeps the autograd graph through the forward pass, but this model "
                "was loaded without gradients; load with requires_grad=True"
            )
            raise GradientsUnsupported(message)
        addresses = [self._check_address(a) for a in to_addresses(points)]
        ids = self._tokens(tokens)
        # Without padding the model runs exactly as a plain HF call does (its own causal mask and
        # positions), so a capture costs only its hooks; with a mask, positions follow it.
        inputs: dict[str, Any] = {"input_ids": ids, "use_cache": False}
        if attention_mask is None:
            positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        else:
            mask = self._mask(attention_mask, ids)
            positions = position_ids(mask)
            inputs.update(attention_mask=mask, position_ids=positions)
        reads = [self.tap(a) for a in dict.fromkeys(addresses)]
        length = int(positions.max()) + 1
        call = (length, f"this capture's {length}-token prompt")
        reach = call if check_reach else None
        if prompt_rows is None:
            real = (
                ids
                if attention_mask is None
                else [r[m.bool()] for r, m in zip(ids, mask, strict=True)]
            )
            prompt_rows = [row.tolist() for row in real]
        writes = self._writes(steering, reach, prompt_rows, call)
        self._check_budget(addresses, ids.shape[0], ids.shape[1])
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
        prompt_embeds: Any = None,
        lora: Any = None,
        rows: Sequence[int] | None = None,
    ) -> ActivationCache:
        return capture_rows(
            self,
            tokens,
            rows,
            lambda: self.run_with_cache(
                tokens,
                points,
                attention_mask=attention_mask,
                steering=steering,
                detach=detach,
                prompt_embeds=prompt_embeds,
                lora=lora,
            ),
        )

    # Rows per decode step as they are computed (`interp_eager.capture_stream`); the keywords
    # of capture_generation_stream are read by ModelBase.
    _stream_capture = stream_capture

    # --- generation -----------------------------------------------------------------------------
    def _decode_steps(self, tokens: Any, **arguments: Any) -> tuple[Sampling, Iterator[Step]]:
        """The decided sampling and the checked decoding steps (see `_prepare_decoding`);
        checking holds the model."""
        with self._serving():
            return self._prepare_decoding(tokens, **arguments)

    def _prepare_decoding(
        self,
        tokens: Any,
        *,
        steering: Any,
        on_prompt: Any = None,
        guard: Any = None,
        reads: Any = None,
        **arguments: Any,
    ) -> tuple[Sampling, Iterator[Step]]:
        sampling = self.resolve_sampling(**arguments)
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
        reach = generation_reach(int(ids.shape[1]), sampling.max_new_tokens)
        writes = self._writes(steering, reach, ids.tolist())
        steps = decode_steps(
            self.hf_model,
            ids,
            writes,
            sampling,
            eos=self._eos_ids(),
            context=limit,
            guard=guard or self._serving,
            on_prompt=on_prompt,
            reads=reads,
        )
        return sampling, steps

    def generate_sync(
        self, tokens: Any, *, prompt_embeds: Any = None, lora: Any = None, **kwargs: Any
    ) -> Generation:
        """Generate from `tokens`; `prompt_embeds` / `lora`: see `interp_eager.call_inputs`."""
        if prompt_embeds is None and lora is None:
            return self._generate_sync(tokens, **kwargs)
        return call_inputs.generate(self, tokens, prompt_embeds, lora, self._generate_sync, kwargs)

    def _generate_sync(self, tokens: Any, **kwargs: Any) -> Generation:
        prompt_rows: list[Any] = []
        with self._serving():
            ids = self._tokens(tokens)
            sampling, steps_iter = self._decode_steps(
                ids, on_prompt=prompt_rows.append, **gen_defaults(kwargs)
            )
            steps = list(steps_iter)
        generated = [step.token for step in steps]
        eos = self._eos_ids()
        finish = "stop" if generated and generated[-1] in eos else "length"
        logprobs = None
        if sampling.n_logprobs:
            # The sampled token's entry is its raw logprob, as the alternatives are.
            logprobs = tuple(TokenLogprobs(s.token, s.raw_logprob, s.top) for s in steps)
        prompt_logprobs = None
        if sampling.prompt_logprobs is not None and prompt_rows:
            prompt_logprobs = prompt_logprobs_of(
                prompt_rows[0], ids[0].tolist(), sampling.prompt_logprobs
            )
        return Generation(
            text=self.tokenizer.decode(generated, skip_special_tokens=True),
            token_ids=generated,
            prompt_token_ids=ids[0].tolist(),
            finish_reason=finish,
            sampling=sampling,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
        )

    async def generate(self, tokens: Any, **kwargs: Any) -> Generation:
        return self.generate_sync(tokens, **kwargs)

    # One step per generated token, texts joining to generate's (`interp_eager.capture_stream`).
    generate_stream = stream_generation

    # capture_generation and logit_lens take their keywords in ModelBase (capture keeps its own
    # signature here: it adds detach=), which hands these hooks a CaptureCall / the lens's.
    async def _capture_generation(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> tuple[Generation, ActivationCache]:
        steering, sampling = call.steering, call.sampling
        embeds, lora = call.prompt_embeds, call.lora
        if embeds is not None or lora is not None:
            run = self.capture_generation  # again on the ids, inside the inputs
            return await call_inputs.capture_generation(
                self, tokens, points, embeds, lora, run, steering=steering, **sampling
            )
        with self._serving():
            addresses = [self._check_address(a) for a in points]
            ids = self._tokens(tokens)
            max_new_tokens = sampling["max_new_tokens"]
            if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool):
                # Priced at the longest the generation can run, before it runs.
                self._check_budget(addresses, 1, ids.shape[1] + max(max_new_tokens, 1) - 1)
            generation = self.generate_sync(ids, steering=steering, **sampling)
            # The last sampled token is never fed back, so captures cover prompt + generated - 1.
            # Positions were checked against the longest run; an early end-of-sequence may
            # leave some of them unreached, as it would in any generation.
            full = [*generation.prompt_token_ids, *generation.token_ids[:-1]]
            prompt = [list(generation.prompt_token_ids)]  # scopes: the generation's prompt
            cache = self._run_with_cache([full], addresses, None, steering, True, False, prompt)
        return generation, cache

    def _eos_ids(self) -> set[int]:
        eos = getattr(self.hf_model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = self.tokenizer.eos_token_id
        if eos is None:
            return set()
        return set(eos) if isinstance(eos, list | tuple) else {int(eos)}

    # --- logit lens -----------------------------------------------------------------------------
    def decode_residuals_sync(
        self, residuals: torch.Tensor, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        """final_norm -> lm_head on residuals; the model's multiplier and softcap unless raw;
        with `top_k`, `TopTokens(ids, probs)` of the k most probable tokens per row instead.

        On a multi-stream trunk a stream stack `[batch, seq, n_streams, d_model]` is first
        collapsed by the model's own hyper head (AltUp: its unembed projections and average),
        exactly as the model does before its final norm.
        """
        if top_k is not None:
            top_k = check_lens_top_k(top_k)
        with self._serving():
            # Rows from elsewhere (another device, a client over HTTP) go where the head is.
            weight = getattr(self.tree.lm_head, "weight", None)
            if isinstance(weight, torch.Tensor) and isinstance(residuals, torch.Tensor):
                residuals = residuals.to(device=weight.device, dtype=weight.dtype)
            logits = self._decode_residuals(residuals, raw=raw)
        if top_k is None:
            return logits
        with torch.no_grad():
            return top_tokens(logits, top_k)

    def _decode_residuals(self, residuals: torch.Tensor, *, raw: bool) -> torch.Tensor:
        return decode_through_head(self, residuals, raw=raw)

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
        with self._serving():
            return self._logit_lens(tokens, layers, top_k=top_k, point=point)

    def _logit_lens(
        self, tokens: Any, layers: Sequence[int] | None, *, top_k: int, point: str
    ) -> LensResult:
        ids = self._tokens(tokens)
        if ids.shape[0] != 1:
            message = (
                f"the logit lens reads one prompt at a time; got a batch of {ids.shape[0]}; "
                f"call it once per row (tokens[i])"
            )
            raise CapabilityUnsupported(message)
        chosen, fitted, top_k, point = self._lens_arguments(layers, top_k, point)
        self._readouts.check_fitted(fitted, chosen)
        read = point
        if self._facts.n_streams > 1 and point == "resid_post":
            read = "resid_streams"
        addresses = [self._check_address(Address(read, layer)) for layer in chosen]
        cache = self.run_with_cache(ids, addresses)
        predictions: dict[int, tuple[tuple[LensPrediction, ...], ...]] = {}
        rows = []
        with torch.no_grad():
            for layer, address in zip(chosen, addresses, strict=True):
                residual = self._readouts.fitted_rows(fitted, address, cache[address])
                logits = self._decode_residuals(residual, raw=False)[0]
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

    async def _prompt_lens(self, tokens: Any, layers: Any, top_k: Any, point: Any) -> LensResult:
        return self.logit_lens_sync(tokens, layers, top_k=top_k, point=point)

    async def decode_residuals(
        self, residuals: Any, *, raw: bool = False, top_k: int | None = None
    ) -> Any:
        return self.decode_residuals_sync(residuals, raw=raw, top_k=top_k)

    # --- read-outs (generate_text, capture_residuals, chat spans: ModelBase) --------------------
    async def capture_attention(
        self, tokens: Any, layers: Sequence[int]
    ) -> dict[int, dict[str, torch.Tensor]]:
        return await readouts.capture_attention(self, tokens, layers)

    # --- weight rows, probes, fitted lenses: delegated to interp_eager.readouts ---------------
    async def unembed_rows(self, token_ids: Sequence[int]) -> torch.Tensor:
        """`W_U[token_ids]`: the `[k, d_model]` rows of the unembedding (lm_head's weight)."""
        return await self._readouts.unembed_rows(token_ids)

    async def embed_rows(self, token_ids: Sequence[int]) -> torch.Tensor:
        """`W_E[token_ids]`: the `[k, d_model]` token-embedding rows, as stored."""
        return await self._readouts.embed_rows(token_ids)

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[torch.Tensor]:
        """Per `DirectionSet`, `[batch, seq, k]` float32 values at its point."""
        return await self._readouts.project(tokens, directions, steering=steering)

    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens set `name` on the model's device (None removes it); its bytes."""
        return await self._readouts.set_lens_jacobians(jacobians, name=name)

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted-lens sets: name -> the layers it holds a `J_bar` for."""
        return self._readouts.lens_sets()

    # The lens over a generation, a step per forward (`interp_eager.lens_generation`); the
    # keywords of generate_with_lens are read by ModelBase.
    _lens_stream = lens_generation.lens_stream

    def __repr__(self) -> str:
        state = "loaded" if self._tree is not None else "not loaded"
        return f"EagerModel({self._model_id!r}, {self._facts.architecture}, {state})"


# --- helpers --------------------------------------------------------------------------------------
def _write_hint(address: Address) -> str:
    if address.name in _ATTENTION_MATRICES:
        return "z (the attention result) or attn_out"
    if address.name in {"expert_weights", "expert_indices"}:
        return "router_logits"
    return "a writable point (`interp points` marks them)"
