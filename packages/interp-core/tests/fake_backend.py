"""What does a complete backend look like when there is no tensor library at all?

A deterministic toy transformer over nested Python lists, served through the real protocol:
embeddings → per layer (causal-mean "attention", tanh MLP, residual adds) → RMS final norm →
unembedding. It exists so the core's registry, sync layer, steering contract and conformance kit
can be tested end to end without torch. `flaw=` switches on one deliberate defect, so tests can
prove each conformance check is able to fail.
"""

from __future__ import annotations

import asyncio
import copy
import math
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

from interp_core.address import Address, to_address
from interp_core.cache import ActivationCache
from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.model_base import CaptureCall, ModelBase
from interp_core.points import PointSpec, absence_reason, get_point
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult, Support
from interp_core.sampling import Sampling, check_lens_top_k
from interp_core.steering import (
    SteeringSpec,
    active_steering,
    apply_reference_rows,
    as_specs,
    check_vector_values,
)

SERVED = (
    "embeddings",
    "resid_pre",
    "attn_out",
    "resid_mid",
    "mlp_act",
    "mlp_out",
    "resid_post",
    "final_norm",
    "lm_head",
)

FAMILIES = {
    "tiny": {"n_layers": 3, "d_model": 6, "d_mlp": 8, "vocab_size": 16},
    "wide": {"n_layers": 2, "d_model": 10, "d_mlp": 12, "vocab_size": 20},
}

# InterpModel.generate's sampling defaults, which the fake's generations start from.
GENERATE_DEFAULTS = {
    "max_new_tokens": 64,
    "temperature": None,  # unset: resolve_sampling decides (checkpoint, else library default)
    "top_k": None,
    "top_p": None,
    "seed": None,
}

FLAWS = (
    "shape",  # embeddings lose their batch axis
    "logits",  # capturing more points nudges lm_head
    "zero_steer",  # any steering, even a zero vector, shifts the steered point
    "nondeterministic",  # every capture drifts a little
    "silent_absent",  # unsupported points come back as zeros instead of a refusal
    "mute_refusal",  # refusals say nothing useful
    "ignores_context",  # steer() blocks are not read
    "wrong_orthogonal",  # orthogonal uses the wrong coefficient
    "stream_text",  # generate_stream's texts do not join to generate's text
    "own_refusals",  # refuses a negative temperature in its own words, with its own class
)


def facts_for(family: str) -> ModelFacts:
    dims = FAMILIES[family]
    return ModelFacts(
        architecture="FakeForCausalLM",
        model_type="fake",
        n_layers=dims["n_layers"],
        d_model=dims["d_model"],
        n_heads=2,
        n_kv_heads=2,
        head_dim=dims["d_model"] // 2,
        d_mlp=dims["d_mlp"],
        vocab_size=dims["vocab_size"],
    )


class FakeTensor:
    """Nested lists with a `.shape` and `.tolist()`: all the kit may assume of a tensor."""

    def __init__(self, data: Any) -> None:
        self._data = data
        shape: list[int] = []
        level = data
        while isinstance(level, list):
            shape.append(len(level))
            level = level[0] if level else None
        self.shape = tuple(shape)

    def tolist(self) -> Any:
        return copy.deepcopy(self._data)

    def __getitem__(self, index: int) -> FakeTensor:
        return FakeTensor(copy.deepcopy(self._data[index]))

    def __repr__(self) -> str:
        return f"FakeTensor(shape={self.shape})"


def _supports(point: Any, facts: ModelFacts) -> Support:
    try:
        address = to_address(point)
    except Exception as exc:
        return Support.no(str(exc))
    if address.is_path:
        return Support.no("the fake backend has no module tree", "use a standardized point")
    try:
        reason = absence_reason(address.name, facts, address.layer, address.stream)
    except PointUnsupported as exc:
        return Support.no(str(exc))
    if reason:
        return Support.no(reason)
    if address.name not in SERVED:
        return Support.no(
            f"the fake backend does not implement {address.name}",
            f"capture one of {', '.join(SERVED)}",
        )
    return Support.yes()


class FakeBackend:
    name = "fake"

    def probe(self) -> str | None:
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return _supports(point, facts)

    def load(self, model_id: str, **kwargs: Any) -> FakeModel:
        return FakeModel(model_id, **kwargs)


class FakeModel(ModelBase):
    backend_name = "fake"

    def __init__(
        self, model_id: str = "tiny", *, flaw: str | None = None, num_gpus: int = 1, **kwargs: Any
    ) -> None:
        if flaw is not None and flaw not in FLAWS:
            raise ValueError(f"unknown flaw {flaw!r}")
        self._model_id = model_id
        self._facts = facts_for(model_id if model_id in FAMILIES else "tiny")
        self.flaw = flaw
        self.load_kwargs = {"num_gpus": num_gpus, **kwargs}
        self.warmed = False
        self.shut_down = False
        self._calls = 0
        rng = random.Random(1234)
        f = self._facts
        self._embed = [[rng.uniform(-1, 1) for _ in range(f.d_model)] for _ in range(f.vocab_size)]
        self._attn = [[rng.uniform(0.2, 1.0) for _ in range(f.d_model)] for _ in range(f.n_layers)]
        self._w_in = [
            [[rng.uniform(-0.5, 0.5) for _ in range(f.d_model)] for _ in range(f.d_mlp)]
            for _ in range(f.n_layers)
        ]
        self._w_out = [
            [[rng.uniform(-0.5, 0.5) for _ in range(f.d_mlp)] for _ in range(f.d_model)]
            for _ in range(f.n_layers)
        ]
        self._unembed = [
            [rng.uniform(-1, 1) for _ in range(f.d_model)] for _ in range(f.vocab_size)
        ]

    # --- identity (model_id, facts, n_layers, d_model, the read-outs: ModelBase) ----------------
    @property
    def tokenizer(self) -> Any:
        return self

    # --- tokens ---------------------------------------------------------------------------------
    def _word_id(self, word: str) -> int:
        return 1 + sum(map(ord, word)) % (self._facts.vocab_size - 1)

    def _ids(self, text: str, prepend_bos: bool) -> list[int]:
        return ([0] if prepend_bos else []) + [self._word_id(w) for w in text.split()]

    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> FakeTensor:
        texts = [text] if isinstance(text, str) else list(text)
        rows = [self._ids(t, prepend_bos) for t in texts]
        if len({len(r) for r in rows}) > 1:
            raise CapabilityUnsupported.build(
                "the fake backend cannot pad", "prompts differ in length", "pass equal lengths"
            )
        return FakeTensor(rows)

    def to_str_tokens(self, text: Any, *, prepend_bos: bool = True) -> list[str]:
        ids = self._ids(text, prepend_bos) if isinstance(text, str) else self._rows(text)[0]
        return [self._piece(i) for i in ids]

    def _piece(self, token_id: int) -> str:
        return "<bos>" if token_id == 0 else f" t{token_id}"

    def to_string(self, tokens: Any) -> str | list[str]:
        rows = self._rows(tokens)
        texts = ["".join(self._piece(i) for i in row if i != 0) for row in rows]
        return texts[0] if len(texts) == 1 else texts

    def _rows(self, tokens: Any) -> list[list[int]]:
        data = tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)
        if data and not isinstance(data[0], list):
            data = [data]
        return [[int(t) for t in row] for row in data]

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        return tuple(get_point(name) for name in SERVED)

    def supports(self, point: Any) -> Support:
        if self.flaw == "silent_absent":
            return Support.yes() if to_address(point).name in SERVED else Support.no("absent")
        return _supports(point, self._facts)

    def _refuse(self, address: Address) -> None:
        verdict = self.supports(address)
        if verdict:
            return
        if self.flaw == "mute_refusal":
            raise PointUnsupported("no")
        raise PointUnsupported.build(
            f"{address} cannot be captured on the fake backend", verdict.reason, verdict.instead
        )

    def _specs(self, steering: Any) -> tuple[SteeringSpec, ...]:
        specs = as_specs(steering)
        if self.flaw != "ignores_context":
            specs = active_steering(self) + specs
        for spec in specs:
            spec.validate_for(self._facts)
            self._refuse(spec.address)
            check_vector_values(spec)
        return specs

    def _sampling(self, **arguments: Any) -> Sampling:
        temperature = arguments["temperature"]
        if self.flaw == "own_refusals" and isinstance(temperature, int | float) and temperature < 0:
            raise CapabilityUnsupported("the fake backend samples only at temperature >= 0")
        sampling = self.resolve_sampling(**arguments)
        unserved = sampling.n_logprobs or sampling.prompt_logprobs is not None
        neutral = (sampling.presence_penalty, sampling.frequency_penalty) == (0.0, 0.0)
        if unserved or not neutral or sampling.repetition_penalty != 1.0 or sampling.min_p:
            # The fake samples from its own scores only; it refuses what it would ignore.
            message = "the fake backend serves no logprobs, penalties or min_p"
            raise CapabilityUnsupported(message)
        return sampling

    # --- the forward pass -----------------------------------------------------------------------
    def _forward(
        self, ids: list[int], specs: Sequence[SteeringSpec], want: set[Address]
    ) -> dict[Address, list[list[float]]]:
        f = self._facts
        record: dict[Address, list[list[float]]] = {}

        def site(address: Address, rows: list[list[float]]) -> list[list[float]]:
            here = [s for s in specs if s.address == address]
            if self.flaw == "wrong_orthogonal":
                here = [
                    SteeringSpec(s.address, s.vector, op=s.op, scale=s.scale + 0.5)
                    if s.op == "orthogonal"
                    else s
                    for s in here
                ]
            if here:
                rows = apply_reference_rows(here, rows)
                if self.flaw == "zero_steer":
                    rows = [[x + 1e-3 for x in row] for row in rows]
            if address in want:
                record[address] = [list(r) for r in rows]
            return rows

        h = site(Address("embeddings"), [list(self._embed[t]) for t in ids])
        for layer in range(f.n_layers):
            h = site(Address("resid_pre", layer), h)
            attn = []
            for p in range(len(h)):
                means = [sum(h[q][j] for q in range(p + 1)) / (p + 1) for j in range(f.d_model)]
                attn.append([w * m for w, m in zip(self._attn[layer], means, strict=True)])
            attn = site(Address("attn_out", layer), attn)
            mid = [[a + b for a, b in zip(x, y, strict=True)] for x, y in zip(h, attn, strict=True)]
            mid = site(Address("resid_mid", layer), mid)
            act = [
                [
                    math.tanh(sum(w * x for w, x in zip(row, m, strict=True)))
                    for row in self._w_in[layer]
                ]
                for m in mid
            ]
            act = site(Address("mlp_act", layer), act)
            out = [
                [sum(w * a for w, a in zip(row, x, strict=True)) for row in self._w_out[layer]]
                for x in act
            ]
            out = site(Address("mlp_out", layer), out)
            h = [[a + b for a, b in zip(x, y, strict=True)] for x, y in zip(mid, out, strict=True)]
            h = site(Address("resid_post", layer), h)
        normed = site(Address("final_norm"), [self._norm(row) for row in h])
        site(Address("lm_head"), [self._unembed_row(row) for row in normed])
        return record

    def _norm(self, row: list[float]) -> list[float]:
        scale = math.sqrt(sum(x * x for x in row) / len(row) + 1e-6)
        return [x / scale for x in row]

    def _unembed_row(self, row: list[float]) -> list[float]:
        return [sum(u * x for u, x in zip(urow, row, strict=True)) for urow in self._unembed]

    def _capture_now(
        self, tokens: Any, points: Sequence[Any], specs: tuple[SteeringSpec, ...]
    ) -> ActivationCache:
        addresses = [to_address(p) for p in points]
        for address in addresses:
            if self.flaw == "silent_absent" and address.name not in SERVED:
                continue
            self._refuse(address)
        self._calls += 1
        rows = self._rows(tokens)
        per_row = [self._forward(ids, specs, set(addresses)) for ids in rows]
        tensors: dict[Address, Any] = {}
        for address in addresses:
            if address.name not in SERVED:  # only reachable with the silent_absent flaw
                tensors[address] = FakeTensor(
                    [[[0.0] * self._facts.d_model for _ in r] for r in rows]
                )
                continue
            data = [record[address] for record in per_row]
            if address.name == "lm_head" and self.flaw == "logits" and len(addresses) > 1:
                data = [[[x + 1e-3 for x in pos] for pos in row] for row in data]
            if self.flaw == "nondeterministic":
                data = [[[x + 1e-7 * self._calls for x in pos] for pos in row] for row in data]
            if address.name == "embeddings" and self.flaw == "shape":
                data = data[0]
            tensors[address] = FakeTensor(data)
        return ActivationCache(tensors, output={"calls": self._calls})

    # --- async API ------------------------------------------------------------------------------
    async def _capture(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> ActivationCache:
        if call.attention_mask is not None:
            raise CapabilityUnsupported.build(
                "the fake backend got an attention_mask",
                "it never pads, so it has no use for one",
                "pass prompts of equal length without a mask",
            )
        self._refuse_inputs(call)
        if call.rows is not None:
            raise CapabilityUnsupported("the fake backend captures whole prompts (no rows=)")
        specs = self._specs(call.steering)
        await asyncio.sleep(0)
        return self._capture_now(tokens, points, specs)

    def _next_token(
        self,
        ids: list[int],
        specs: tuple[SteeringSpec, ...],
        rng: random.Random,
        temperature: float,
    ) -> int:
        logits = self._forward(ids, specs, {Address("lm_head")})[Address("lm_head")][-1]
        if temperature <= 0:
            return max(range(len(logits)), key=lambda i: (logits[i], -i))
        top = max(logits)
        weights = [math.exp((x - top) / temperature) for x in logits]
        return rng.choices(range(len(logits)), weights=weights)[0]

    async def _steps(
        self, tokens: Any, sampling: Sampling, specs: tuple[SteeringSpec, ...]
    ) -> AsyncIterator[tuple[int, list[int]]]:
        ids = self._rows(tokens)[0]
        rng = random.Random(sampling.seed)
        for _ in range(sampling.max_new_tokens):
            token = self._next_token(ids, specs, rng, sampling.temperature)
            ids = [*ids, token]
            await asyncio.sleep(0)
            yield token, ids

    def _generation(
        self, steering: Any, arguments: dict[str, Any]
    ) -> tuple[Sampling, tuple[SteeringSpec, ...]]:
        """The checked sampling arguments (the protocol's defaults under the caller's) and the
        specs of one generation; the signatures are the protocol's (InterpModel.generate)."""
        sampling = self._sampling(**{**GENERATE_DEFAULTS, **arguments})
        return sampling, self._specs(steering)

    async def generate(self, tokens: Any, *, steering: Any = None, **arguments: Any) -> Generation:
        sampling, specs = self._generation(steering, arguments)
        prompt = self._rows(tokens)[0]
        generated = [t async for t, _ in self._steps(tokens, sampling, specs)]
        text = "".join(self._piece(t) for t in generated)
        return Generation(text, generated, prompt, "length", sampling=sampling)

    async def generate_stream(
        self, tokens: Any, *, steering: Any = None, **arguments: Any
    ) -> AsyncIterator[GenerationStep]:
        sampling, specs = self._generation(steering, arguments)
        index = 0
        async for token, _ in self._steps(tokens, sampling, specs):
            text = self._piece(token)
            if self.flaw == "stream_text":
                text = text.upper()
            last = index == sampling.max_new_tokens - 1
            yield GenerationStep(
                index, token, text, finished=last, finish_reason="length" if last else None
            )
            index += 1

    async def _capture_generation(
        self, tokens: Any, points: list[Address], call: CaptureCall
    ) -> tuple[Generation, ActivationCache]:
        self._refuse_inputs(call)
        generation = await self.generate(tokens, steering=call.steering, **call.sampling)
        fed = [*generation.prompt_token_ids, *generation.token_ids[:-1]]
        cache = await self.capture([fed], points, steering=call.steering)
        return generation, cache

    def _refuse_inputs(self, call: CaptureCall) -> None:
        if call.prompt_embeds is not None or call.lora is not None:
            raise CapabilityUnsupported("the fake backend serves no prompt_embeds or lora")

    async def _prompt_lens(self, tokens: Any, layers: Any, top_k: Any, point: Any) -> LensResult:
        top_k = check_lens_top_k(top_k)
        chosen = tuple(range(self.n_layers)) if layers is None else tuple(layers)
        cache = await self.capture(tokens, [Address(point, layer) for layer in chosen])
        predictions = {}
        for layer in chosen:
            rows = cache[Address(point, layer)].tolist()[0]
            per_position = []
            for row in rows:
                logits = self._unembed_row(self._norm(row))
                top = max(logits)
                exps = [math.exp(x - top) for x in logits]
                total = sum(exps)
                order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:top_k]
                per_position.append(
                    tuple(LensPrediction(i, self._piece(i), exps[i] / total) for i in order)
                )
            predictions[layer] = tuple(per_position)
        return LensResult(point, chosen, top_k, predictions)

    async def decode_residuals(self, residuals: Any, *, raw: bool = False) -> Any:
        rows = residuals.tolist()
        return FakeTensor([self._unembed_row(self._norm(row)) for row in rows])

    async def warmup(self) -> None:
        self.warmed = True

    async def shutdown(self) -> None:
        self.shut_down = True


class LoopBoundFakeModel(FakeModel):
    """A fake that, like vLLM, must always be awaited on the loop that first awaited it."""

    binds_event_loop = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loop: asyncio.AbstractEventLoop | None = None

    def _check_loop(self) -> None:
        running = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = running
        elif self.loop is not running:
            raise RuntimeError("awaited on a foreign event loop")

    async def capture(self, tokens: Any, points: Sequence[Any], **kwargs: Any) -> ActivationCache:
        self._check_loop()
        return await super().capture(tokens, points, **kwargs)

    async def generate_stream(self, tokens: Any, **kwargs: Any) -> AsyncIterator[GenerationStep]:
        self._check_loop()
        async for step in super().generate_stream(tokens, **kwargs):
            self._check_loop()
            yield step
