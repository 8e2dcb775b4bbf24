"""A request's prompt embeddings and LoRA adapter, in the forms vLLM takes them.

vLLM runs a prompt given as embeddings (an `EmbedsPrompt`, `{"prompt_embeds": [seq, d]}`) when
the engine was started with `enable_prompt_embeds=True`, and a LoRA adapter per request (a
`LoRARequest`) when started with `enable_lora=True` and a `max_lora_rank` at least the adapter's
rank: both are engine settings (`extra_vllm_kwargs`), so a call that needs one the engine lacks
is refused before anything is sent, naming the setting.

Replacing some token slots (`{position: row}`) sends the whole prompt as embeddings: the
tokens' own rows are read from the workers (`embed_rows`) and the given rows spliced in. A model
that scales its embeddings (Gemma's sqrt(d_model), Granite's multiplier) is refused there: the
stored rows are not what its embedding step outputs, and guessing where vLLM applies the scale
would give plausible wrong activations. vLLM then sees no token ids, so options that count them
(penalties, prompt logprobs) are refused too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from interp_core.adapters import LoraConfig, check_lora
from interp_core.errors import CapabilityUnsupported
from interp_core.facts import ModelFacts
from interp_core.results import Generation

__all__ = ["CallInputs", "RequestInputs"]

_COUNTS_PROMPT_IDS = ("presence_penalty", "frequency_penalty", "repetition_penalty")
_DEFAULT_MAX_LORA_RANK = 16  # vLLM's default when max_lora_rank is not set


@dataclasses.dataclass(frozen=True)
class RequestInputs:
    """What one request sends besides its sampling: the prompt fields and the adapter."""

    fields: dict[str, Any] | None = None  # replaces {"prompt_token_ids": ...} when set
    lora_request: Any = None
    whole_embeds: bool = False

    def finish(self, generation: Generation) -> Generation:
        """A whole-embeds prompt has no token ids; its placeholders are never reported."""
        if self.whole_embeds:
            return dataclasses.replace(generation, prompt_token_ids=())
        return generation


class CallInputs:
    """Checks `prompt_embeds=` / `lora=` against the engine's settings and builds the request."""

    def __init__(self, facts: ModelFacts, extra: dict[str, Any]) -> None:
        self._facts = facts
        self._extra = extra
        self._lora_ids: dict[str, int] = {}

    def _refuse_setting(self, what: str, setting: str) -> CapabilityUnsupported:
        return CapabilityUnsupported.build(
            f"{what} on vLLM needs an engine started with {setting}",
            "vLLM fixes it when the engine starts",
            f"load_model(..., extra_vllm_kwargs={{{setting}}})",
        )

    def check(
        self, tokens: Any, prompt_embeds: Any, lora: Any, options: dict[str, Any] | None = None
    ) -> tuple[Any, LoraConfig | None]:
        """Refuse, before any work, what this engine cannot serve; the checked adapter."""
        config = check_lora(lora)
        if config is not None:
            if not self._extra.get("enable_lora"):
                msg = "lora="
                raise self._refuse_setting(msg, "'enable_lora': True")
            limit = self._extra.get("max_lora_rank", _DEFAULT_MAX_LORA_RANK)
            if config.rank > limit:
                msg = f"the LoRA adapter {config.name} has rank {config.rank}"
                raise CapabilityUnsupported.build(
                    msg,
                    f"this engine was started with max_lora_rank={limit}",
                    f"load with extra_vllm_kwargs={{'max_lora_rank': {config.rank}}} or more",
                )
        if prompt_embeds is None:
            return None, config
        if not self._extra.get("enable_prompt_embeds"):
            msg = "prompt_embeds="
            raise self._refuse_setting(msg, "'enable_prompt_embeds': True")
        if tokens is not None and (self._facts.embedding_multiplier or 1.0) != 1.0:
            msg = f"prompt_embeds={{position: row}} on vLLM for {self._facts.model_type}"
            raise CapabilityUnsupported.build(
                msg,
                "this model scales its embeddings, so its stored rows are not what its "
                "embedding step outputs",
                "pass the whole prompt as a [seq, d_model] tensor, or use the eager backend",
            )
        for key in _COUNTS_PROMPT_IDS:
            if (options or {}).get(key) not in (None, 0, 0.0, 1, 1.0):
                msg = f"{key} with prompt_embeds on vLLM"
                raise CapabilityUnsupported.build(
                    msg,
                    "vLLM runs an embeddings prompt without token ids to count",
                    f"leave {key} unset",
                )
        if (options or {}).get("prompt_logprobs") is not None:
            msg = "prompt_logprobs with prompt_embeds on vLLM"
            raise CapabilityUnsupported.build(
                msg,
                "an embeddings prompt has no token ids to score",
                "leave prompt_logprobs unset",
            )
        return prompt_embeds, config

    def check_points(self, addresses: Sequence[Any], injection: Any) -> None:
        """Refuse `embeddings` where vLLM reads it off the token table's output: with
        prompt embeds that module still runs, on the placeholder ids, for the whole batch."""
        if injection is None or not self._facts.learned_positions:
            return
        if any(getattr(a, "name", None) == "embeddings" for a in addresses):
            msg = "capturing embeddings with prompt_embeds on vLLM for this model"
            raise CapabilityUnsupported.build(
                msg,
                "its embeddings are read at the token table's output, which vLLM runs on "
                "placeholder ids for an embeddings prompt",
                "capture resid_pre.0 (it adds the position embeddings), or use the eager backend",
            )

    def prompts(
        self, tokens: Any, prompt_embeds: Any, checked_prompts: Callable[[Any], list[list[int]]]
    ) -> tuple[list[list[int]], Any]:
        """The call's prompts (placeholder ids for a whole-embeds prompt) and its `Injection`."""
        from interp_torch.embeds import check_prompt_embeds

        if prompt_embeds is None:
            return checked_prompts(tokens), None
        if tokens is None:
            injection = check_prompt_embeds(prompt_embeds, self._facts.d_model, None)
            assert injection is not None
            return [[0] * injection.length], injection
        prompts = checked_prompts(tokens)
        if len(prompts) != 1:
            msg = f"prompt_embeds with a batch of {len(prompts)} prompts"
            raise CapabilityUnsupported.build(
                msg,
                "the rows replace slots of one prompt",
                "call once per prompt (the calls run concurrently on vLLM)",
            )
        return prompts, check_prompt_embeds(prompt_embeds, self._facts.d_model, prompts[0])

    async def request(
        self,
        prompt: Sequence[int],
        injection: Any,
        config: LoraConfig | None,
        embed_rows: Callable[[Sequence[int]], Awaitable[Any]],
        dtype: Any,
    ) -> RequestInputs | None:
        """The request's fields: the embeddings tensor (spliced when slots are replaced)."""
        if injection is None and config is None:
            return None
        fields = None
        if injection is not None:
            from interp_torch.embeds import splice_rows

            if injection.whole:
                rows = injection.rows
            else:
                rows = splice_rows(await embed_rows(list(prompt)), injection)
            fields = {"prompt_embeds": rows.to("cpu", dtype).contiguous()}
        whole = injection is not None and injection.whole
        return RequestInputs(fields, self._lora_request(config), whole)

    def _lora_request(self, config: LoraConfig | None) -> Any:
        if config is None:
            return None
        from vllm.lora.request import LoRARequest

        # One id per folder for the engine's life: vLLM caches adapters by id.
        lora_id = self._lora_ids.setdefault(config.path, len(self._lora_ids) + 1)
        return LoRARequest(config.name, lora_id, config.path)
