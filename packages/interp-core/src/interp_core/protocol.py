"""What must a backend's model object, and a backend itself, provide?

Two protocols. `InterpModel` is what `load_model` returns on every backend: config-derived facts
answerable before any weights are touched, tokenizer helpers, a capability question
(`supports`) that answers with a reason, and the async work methods. `Backend` is what an
`interp.backends` entry point names: a class with a `name`, a `probe()` that says whether it can
run on this machine, a per-point verdict, and `load`.

Why async: a serving backend (vLLM) runs many requests concurrently on one engine; an awaitable
API lets a caller overlap them. The eager backend is async too, so code written against the
protocol runs on either. Sync callers use the free functions in `interp_core.sync`.

Tensors are opaque here. The core never reads their values, so the protocol types them as
`Tensor` (an alias of `Any`): whatever the backend's library uses (a torch tensor on both
first-party backends). A tensor must expose `.shape`; the conformance kit also reads values
through `.tolist()`.

Steering: every work method takes `steering=` (a `SteeringSpec` or a sequence of them). A backend
MUST also apply the specs made active for it by `interp_core.steering.steer(model, ...)`, read with
`interp_core.steering.active_steering(self)` at the start of each call: active specs first, then
the explicit ones. Captures at a steered point return the post-intervention activation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from interp_core.address import Address, AddressLike
    from interp_core.cache import ActivationCache
    from interp_core.capture_stream import CaptureChunk
    from interp_core.facts import ModelFacts
    from interp_core.points import PointSpec
    from interp_core.results import Generation, GenerationStep, LensResult, Support
    from interp_core.steering import SteeringSpec

__all__ = ["Backend", "InterpModel", "ReadoutModel", "Steering", "Tensor", "Tokens"]

# The backend's array type; the core only ever passes it through or reads `.shape`.
Tensor: TypeAlias = Any
# Token ids as the backend accepts them: a [batch, seq] or [seq] tensor, or a list of ints.
Tokens: TypeAlias = Any
# What `steering=` accepts: nothing, one spec, or several applied in order.
Steering: TypeAlias = "SteeringSpec | Sequence[SteeringSpec] | None"


@runtime_checkable
class InterpModel(Protocol):
    """A loaded (or lazily loadable) model every backend returns from `Backend.load`.

    Properties are answerable from the config alone, before `warmup()`. Optional, not part of the
    protocol: `binds_event_loop` (bool) — True when the model's async resources belong to the
    event loop that first awaited it (vLLM); the sync free functions then run every call on one
    background loop thread instead of a fresh loop per call.
    """

    # --- identity and facts ---------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        """The HF repo id or local folder the model was loaded from."""
        ...

    @property
    def backend_name(self) -> str:
        """The registry name of the backend serving it ("eager", "vllm", ...)."""
        ...

    @property
    def facts(self) -> ModelFacts: ...

    @property
    def n_layers(self) -> int: ...

    @property
    def d_model(self) -> int:
        """Residual width (not necessarily the width of `z`)."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The backend's tokenizer object (an HF tokenizer on first-party backends)."""
        ...

    # --- tokens (sync: pure CPU work) -----------------------------------------------------------
    def to_tokens(self, text: str | list[str], *, prepend_bos: bool = True) -> Tensor:
        """Token ids `[batch, seq]` for a string or a list of strings."""
        ...

    def to_str_tokens(self, text: str | Tokens, *, prepend_bos: bool = True) -> list[str]:
        """One string per token of a string or of token ids."""
        ...

    def to_string(self, tokens: Tokens) -> str | list[str]:
        """Decode token ids back to text (a list for a batch)."""
        ...

    # --- capabilities ---------------------------------------------------------------------------
    def points(self) -> tuple[PointSpec, ...]:
        """The standardized points this model serves on this backend (at some layer)."""
        ...

    def supports(self, point: AddressLike) -> Support:
        """Whether this exact address can be captured here; a refusal says why and what instead."""
        ...

    # --- work -----------------------------------------------------------------------------------
    async def capture(
        self,
        tokens: Tokens,
        points: Sequence[AddressLike],
        *,
        steering: Steering = None,
        attention_mask: Tensor | None = None,
        prompt_embeds: Any = None,
        lora: Any = None,
        rows: Sequence[int] | None = None,
    ) -> ActivationCache:
        """One forward pass; the cache holds `[batch, seq, ...]` tensors keyed by `Address`.

        Refuses (`PointUnsupported`) any point `supports` refuses, before any work; a backend that
        cannot honour an argument (e.g. `attention_mask`) raises `CapabilityUnsupported`.
        `prompt_embeds` (a `[seq, d_model]` prompt with `tokens=None`, or `{position: row}` slots
        of the tokens) and `lora` (a PEFT folder or `interp_core.adapters.LoraConfig`) apply to
        this call only.
        `rows` (token positions, negative from the end; `interp_core.capture_stream.check_rows`)
        returns only those positions, in that order: `[batch, len(rows), ...]`.
        """
        ...

    def capture_generation_stream(
        self,
        tokens: Tokens,
        points: Sequence[AddressLike],
        *,
        max_new_tokens: int = 8,
        temperature: float = 0.0,
        seed: int | None = None,
        steering: Steering = None,
        **knobs: Any,
    ) -> AsyncIterator[CaptureChunk]:
        """`capture_generation` whose rows arrive while it runs: `CaptureChunk`s whose tensors,
        joined (`interp_core.capture_stream.join_chunks`), are its cache, the last one carrying
        the `Generation`. `knobs`: the other sampling keywords of `generate`. A backend that
        returns captures only at the end refuses it (`ModelBase`)."""
        ...

    async def generate_samples(
        self, tokens: Tokens, *, n: int, seed: int | None = None, **knobs: Any
    ) -> tuple[Generation, ...]:
        """`n` generations of one prompt, sample i with `seed + i` (`interp_core.samples`);
        `knobs` are `generate`'s."""
        ...

    async def capture_generation(
        self,
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
        """Generate, and capture over prompt + generated tokens minus the last one.

        The last sampled token is never fed back through the model, so captured tensors cover
        `len(prompt) + len(generation.token_ids) - 1` positions.
        """
        ...

    async def generate(
        self,
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
        """One completion. A sampling knob left None takes the checkpoint's generation_config.json
        value unless `use_generation_config=False`, else the library default
        (`interp_core.sampling.resolve_sampling`); the result's `.sampling` reports the settings
        used. `n_logprobs` alternatives per generated token, `prompt_logprobs` per prompt token."""
        ...

    def generate_stream(
        self,
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
    ) -> AsyncIterator[GenerationStep]:
        """Async iterator of steps whose texts concatenate to what `generate` returns."""
        ...

    async def logit_lens(
        self,
        tokens: Tokens,
        layers: Sequence[int] | None = None,
        *,
        top_k: int = 10,
        point: str = "resid_post",
    ) -> LensResult:
        """Decode `point` at each layer (default: all) through final norm and unembedding."""
        ...

    async def capture_attention(
        self, tokens: Tokens, layers: Sequence[int]
    ) -> dict[int, dict[str, Tensor]]:
        """One prompt (`[seq]` or `[1, seq]`; a batch is refused): per layer `{"scores",
        "probs", "value"}` with attention logits and weights `[heads, query, key]` and the values
        per kv head `[pos, kv_heads, v_head_dim]`, such that for query head `h` and group size
        `g = heads // kv_heads`, `z[q, h] == probs[h, q, :] @ value[:, h // g]`; a family where
        that identity fails (an output gate) is refused."""
        ...

    async def capture_residuals(
        self, tokens: Tokens, layers: Sequence[int] | None = None, *, detach: bool = True
    ) -> dict[int, Tensor]:
        """One prompt: `{layer: resid_post [seq, d_model]}` at `layers` (default: all);
        refused on multi-stream trunks."""
        ...

    async def generate_text(
        self,
        prompt: str | Tokens,
        *,
        max_tokens: int = 200,
        temperature: float | None = None,
        seed: int | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        steering: Steering = None,
    ) -> str:
        """The text of one generation of up to `max_tokens` tokens (the leading engine's
        spelling); a string prompt is tokenized first (with BOS)."""
        ...

    async def decode_residuals(
        self, residuals: Tensor, *, raw: bool = False, top_k: int | None = None
    ) -> Tensor:
        """Logits of residuals `[..., d_model]` through the final norm and the unembedding, with
        the model's logit multiplier and final softcap applied unless `raw` (a backend that can
        only decode the normalized way refuses `raw=True`). With `top_k`, an
        `interp_core.readouts.TopTokens(ids, probs)` of the k most probable tokens per row
        (probabilities over the full vocabulary), so only `[..., k]` leaves the backend."""
        ...

    async def warmup(self) -> None:
        """Do the expensive part of loading now (weights, engine start, kernel JIT)."""
        ...

    async def shutdown(self) -> None:
        """Release the model's resources; idempotent."""
        ...


@runtime_checkable
class ReadoutModel(InterpModel, Protocol):
    """The read-outs beyond capture (`interp_core.readouts`): weight rows, probes and fitted
    lenses. The first-party backends (eager, vLLM, remote) serve them and pass the conformance
    kit's `ReadoutConformance`; a third-party `InterpModel` need not, and the sync twins then
    fail on the missing method by name.
    """

    async def unembed_rows(self, token_ids: Sequence[int]) -> Tensor:
        """`W_U[token_ids]`: the `[k, d_model]` rows of the unembedding (the tied embedding on a
        family without its own head); under tensor parallelism gathered from the vocab shards."""
        ...

    async def embed_rows(self, token_ids: Sequence[int]) -> Tensor:
        """`W_E[token_ids]`: the `[k, d_model]` rows of the token embedding as stored (no
        embedding multiplier, no position embedding)."""
        ...

    async def project(
        self, tokens: Tokens, directions: Sequence[Any], *, steering: Steering = None
    ) -> list[Tensor]:
        """Per `interp_core.readouts.DirectionSet`, `[batch, seq, k]` float32 values
        `act(rows @ vectors.T + bias)` of its point, computed where the activations are: only
        the k values per token leave the backend."""
        ...

    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens (`{layer: J_bar [d_model, d_model]}`, or a path to a lens file in
        one of the layouts of `interp_core.readouts`) where the lens is decoded, as the set
        `name`; None removes it. A lens for another model is refused before anything is held.
        Returns the bytes the set holds (per tensor-parallel rank)."""
        ...

    def generate_with_lens(
        self,
        tokens: Tokens,
        lenses: Sequence[Any],
        *,
        top_n: int = 10,
        point: str = "resid_post",
        max_new_tokens: int = 16,
        skip_before: int = 0,
        word_mask: Any = None,
        steering: Steering = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> AsyncIterator[Any]:
        """Generate one completion and stream an `interp_core.lens_generation.LensStep` per
        position from `skip_before` on (prompt positions, then each generated token fed back),
        as the forward passes produce them; each step holds, per lens (`LensSpec`, `"logit"`
        or an installed fitted set's name), the `[n_layers, top_n]` top tokens at `point`.
        Everything is refused before the first forward pass."""
        ...


@runtime_checkable
class Backend(Protocol):
    """What an `interp.backends` entry point loads: a class, constructible with no arguments.

    Construction must be cheap and must not import heavy libraries: the registry instantiates a
    backend to ask `probe()` even when it will not be used. `name` must equal the entry-point
    name. Optional: `supports_architecture(architecture: str) -> bool`, which `select_backend`
    consults for the "auto" ladder when present, and `known_issues`, a tuple of
    `interp_core.compat.KnownIssue` for the families its engine computes wrongly, which the
    docs' compatibility page lists (`interp_core.compat.all_known_issues`).
    """

    name: ClassVar[str]

    def probe(self) -> str | None:
        """None when the backend can run here; else why not, with the install command or fix."""
        ...

    def supports(self, point: AddressLike | Address, facts: ModelFacts) -> Support:
        """Whether this backend can serve `point` on a model with these facts, and why not."""
        ...

    def load(self, model_id: str, **kwargs: Any) -> InterpModel:
        """Return a model; construction may be lazy (cost lands in `warmup`)."""
        ...
