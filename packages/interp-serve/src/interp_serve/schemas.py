"""The request bodies the server accepts, as pydantic models (they also make the OpenAPI schema).

Unknown fields are refused, not ignored: a client asking for something the server does not do
(`n: 4`, `stop`, a misspelt option) is told so. Sampling arguments are typed loosely here on
purpose: the core's own checks (`interp_core.sampling`) refuse bad values with the same words
the library uses, so a request over HTTP and a call in-process fail alike.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CaptureRequest",
    "ChatRequest",
    "CompletionRequest",
    "DetokenizeRequest",
    "FeatureAdd",
    "FeatureClamp",
    "FeaturesRequest",
    "GenerateOptions",
    "InterpOptions",
    "LensOptions",
    "LensRequest",
    "SupportsRequest",
    "TokenizeRequest",
]

# Unknown fields refused; declared types strict (`true` is no int, `"yes"` no bool).
_STRICT = ConfigDict(extra="forbid", strict=True)
_TOKENS = "token ids: one prompt `[seq]` or a batch `[[...], ...]`"
_EMBEDS = (
    "base64 safetensors: `rows` [k, d_model] (the input-embedding module's output) and, to "
    "replace token slots, int64 `positions` [k]; without positions the rows are the whole prompt"
)
_LORA = "a LoRA adapter this server serves, by name (`interp serve --lora NAME=PATH`)"
_STEERING = (
    "steering specs: {address, vector (list of numbers), op (add|orthogonal|projection_cap|"
    "clamp|norm_add|ablate|swap|set), scale, positions, min, max, encoder, bias, threshold, "
    "normalize, max_fraction, target, generated, skip_special, channels, batch_rows (the "
    "batch's rows it applies to; all when null)}; a set (patch) "
    'vector may be {"safetensors": base64} holding one 1-D F32/F64 tensor named vector'
)


class LensOptions(BaseModel):
    model_config = _STRICT
    top_k: Any = Field(10, description="guesses per layer and position (int >= 1)")
    layers: list[int] | None = Field(None, description="layers to read (default: all)")
    point: str = Field("resid_post", description="the point decoded at each layer")


class _Feature(BaseModel):
    """One feature of a served SAE, which FeatureAdd and FeatureClamp steer."""

    model_config = _STRICT
    sae: str = Field(description="the SAE's name on this server (GET /v1/saes)")
    feature: int = Field(description="feature index, 0 to d_sae - 1")


class FeatureAdd(_Feature):
    """Steer by a feature: add `strength` × its decoder row where the SAE writes."""

    strength: float = Field(description="the multiple of the feature's decoder row added")
    positions: list[int] | None = Field(None, description="token positions (default: all)")


class FeatureClamp(_Feature):
    """Clamp a feature to `value`, keeping the rest of the row and the reconstruction error."""

    value: float = Field(description="the feature's activation after the clamp")
    positions: list[int] | None = Field(None, description="token positions (default: all)")


class InterpOptions(BaseModel):
    """The `interp` extension of the OpenAI-compatible requests."""

    model_config = _STRICT
    capture: list[str] = Field(
        default_factory=list,
        description="addresses to capture over the prompt and the generated tokens",
    )
    steering: list[dict[str, Any]] = Field(default_factory=list, description=_STEERING)
    features: list[FeatureAdd] = Field(
        default_factory=list, description="steer by SAE features (applied after `steering`)"
    )
    clamp: list[FeatureClamp] = Field(
        default_factory=list, description="clamp SAE features (applied after `features`)"
    )
    lens: LensOptions | None = Field(None, description="a logit lens over the prompt")
    inline: bool = Field(False, description="also return small captures as nested lists")
    n_logprobs: Any = Field(
        0, description="alternatives per generated token, by id, in interp.logprobs (0 to 20)"
    )
    prompt_logprobs: Any = Field(
        None, description="alternatives per prompt token, in interp.prompt_logprobs (0 to 20)"
    )
    prompt_embeds: str | None = Field(None, description=_EMBEDS + " (then `prompt` is `[]`)")
    lora: str | None = Field(None, description=_LORA)


class _Sampling(BaseModel):
    model_config = _STRICT
    model: str = Field(description="the served model name (GET /v1/models)")
    max_tokens: Any = Field(16, description="tokens to generate at most")
    temperature: Any = Field(
        None, description="0 is greedy; unset: the checkpoint's generation_config.json, else 1"
    )
    top_p: Any = None
    top_k: Any = None
    min_p: Any = None
    repetition_penalty: Any = Field(
        None, description="HF's and vLLM's: seen tokens' logits divided (>0) or multiplied (<0)"
    )
    use_generation_config: Any = Field(
        True, description="unset knobs follow the checkpoint's generation_config.json"
    )
    seed: Any = None
    stream: bool = Field(False, description="answer as server-sent events")
    n: Any = Field(1, description="completions per prompt (1 to 16; 1 with stream or capture)")
    stop: str | list[str] | None = Field(None, description="not served: must be absent")
    logprobs: Any = Field(
        None, description="completions: alternatives per token (int); chat: true for logprobs"
    )
    top_logprobs: Any = Field(None, description="chat: alternatives per token (0 to 20)")
    echo: bool = Field(False, description="not served: must be false")
    presence_penalty: Any = Field(None, description="minus this once per generated token id")
    frequency_penalty: Any = Field(None, description="minus this times its count so far")
    user: str | None = Field(None, description="accepted for compatibility; not used")
    stream_options: dict[str, Any] | None = Field(None, description="accepted; not used")
    interp: InterpOptions | None = Field(None, description="capture, steering and lens")


class CompletionRequest(_Sampling):
    prompt: str | list[int] = Field(description="text (tokenized with BOS) or token ids")


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: str
    content: str


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(
        min_length=1, description="rendered with the model's chat template"
    )


class GenerateOptions(BaseModel):
    """What a captured generation samples with (steering is the request's own `steering`)."""

    model_config = _STRICT
    max_new_tokens: Any = Field(8, description="tokens to generate at most")
    temperature: Any = Field(0.0, description="0 is greedy")
    seed: Any = Field(None, description="the sampler's seed")


class CaptureRequest(BaseModel):
    model_config = _STRICT
    tokens: list[Any] | None = Field(None, description=_TOKENS + "; none with whole prompt_embeds")
    points: list[str] = Field(description="addresses to capture, e.g. resid_post.3")
    prompt_embeds: str | None = Field(None, description=_EMBEDS)
    lora: str | None = Field(None, description=_LORA)
    steering: list[dict[str, Any]] = Field(default_factory=list, description=_STEERING)
    attention_mask: list[Any] | None = Field(None, description="same shape as tokens")
    generate: GenerateOptions | None = Field(
        None, description="capture_generation instead: {max_new_tokens, temperature, seed}"
    )
    rows: list[Any] | None = Field(
        None, description="only these token positions (negative from the end); not with generate"
    )
    inline: bool = Field(False, description="also return the tensors as nested lists")
    direct: bool = Field(
        False,
        description="answer with the safetensors bytes themselves (no handle; the JSON answer "
        "travels in the safetensors metadata under `interp`)",
    )


class FeaturesRequest(BaseModel):
    model_config = _STRICT
    tokens: list[Any] | None = Field(None, description=_TOKENS + "; or give text")
    text: str | list[str] | None = Field(None, description="tokenized with BOS, as to_tokens")
    saes: list[str] | None = Field(None, description="SAE names (default: every loaded SAE)")
    top_k: Any = Field(description="features per token, largest first (int, 1 to the cap)")
    steering: list[dict[str, Any]] = Field(default_factory=list, description=_STEERING)
    features: list[FeatureAdd] = Field(default_factory=list, description="steer by features")
    clamp: list[FeatureClamp] = Field(default_factory=list, description="clamp features")
    inline: bool = Field(
        True, description="return indices and values as nested lists (else a handle only)"
    )
    direct: bool = Field(
        False, description="answer with the safetensors bytes themselves, as /v1/capture"
    )


class LensRequest(BaseModel):
    model_config = _STRICT
    tokens: list[Any] = Field(description=_TOKENS)
    layers: list[Any] | None = None
    top_k: Any = 10
    point: Any = "resid_post"


class TokenizeRequest(BaseModel):
    model_config = _STRICT
    text: str | list[str] | None = None
    tokens: list[Any] | None = Field(None, description="ids to split into token strings")
    prepend_bos: bool = True
    str_tokens: bool = Field(False, description="also return one string per token")


class DetokenizeRequest(BaseModel):
    model_config = _STRICT
    tokens: list[Any] = Field(description=_TOKENS)


class SupportsRequest(BaseModel):
    model_config = _STRICT
    points: list[str] = Field(description="addresses to ask about")
