"""A call's prompt embeddings and LoRA adapter, applied to the eager model for that call only.

Both are hooks installed for the call and removed after it, under the model's lock, so no other
call ever sees them:

- `prompt_embeds` replaces rows of the input-embedding module's output (exactly what HF's
  `inputs_embeds` feeds the trunk), so every point — `embeddings` included — steering and the
  KV-cached decode steps see the injected prompt. The splice fires only on a forward that starts
  a sequence (no past key values): decode steps embed their new token untouched.
- `lora` adds PEFT's unmerged update `scaling * B(A(x))` to each target linear module's output:
  the weights are never modified, so nothing needs restoring if the call fails.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from interp_core.adapters import LoraConfig, check_lora
from interp_core.errors import CapabilityUnsupported
from interp_core.results import Generation
from interp_torch.embeds import Injection, check_prompt_embeds, splice_rows
from interp_torch.lora import lora_delta, read_lora_weights, targets_module

__all__ = [
    "CallInputs",
    "call_inputs",
    "capture_generation",
    "for_stream",
    "generate",
    "refuse_for_embeds_prompt",
    "run",
]

# Sampling options that read the prompt's token ids, which a whole-embeddings prompt has none of.
_READS_PROMPT_IDS = ("presence_penalty", "frequency_penalty", "repetition_penalty")


@dataclasses.dataclass
class CallInputs:
    """What the call runs on: `ids` (the tokens, or placeholders under a whole-embeds prompt)."""

    ids: torch.Tensor
    injection: Injection | None
    lora: LoraConfig | None

    def finish(self, generation: Generation) -> Generation:
        """A whole-embeds prompt has no token ids; the placeholders are never reported."""
        if self.injection is not None and self.injection.whole:
            return dataclasses.replace(generation, prompt_token_ids=[])
        return generation


def refuse_for_embeds_prompt(kwargs: dict[str, Any]) -> None:
    """Refuse the sampling options that would read a whole-embeds prompt's (absent) tokens."""
    for key in _READS_PROMPT_IDS:
        if kwargs.get(key) not in (None, 0, 0.0, 1, 1.0):
            msg = (
                f"{key}={kwargs[key]!r} counts the prompt's tokens, and a prompt given as "
                f"embeddings has none; leave {key} unset, or pass tokens with "
                f"prompt_embeds={{position: row}}"
            )
            raise CapabilityUnsupported(msg)
    if kwargs.get("prompt_logprobs") is not None:
        msg = (
            "prompt_logprobs scores the prompt's tokens, and a prompt given as embeddings has "
            "none; leave prompt_logprobs unset"
        )
        raise CapabilityUnsupported(msg)


def _one_prompt(model: Any, tokens: Any) -> list[int] | None:
    if tokens is None:
        return None
    ids = model._tokens(tokens)
    if ids.shape[0] != 1:
        msg = (
            f"prompt_embeds applies to one prompt; got a batch of {ids.shape[0]}; call once per row"
        )
        raise CapabilityUnsupported(msg)
    return ids[0].tolist()


_LORA_CACHE: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _lora_weights(model: Any, config: LoraConfig) -> dict[str, Any]:
    """The adapter's (A, B) per module of this model, read once per model and folder."""
    hf = model.hf_model
    # Keyed by the loaded HF model: a reload (shutdown, warmup) holds other modules.
    cache = _LORA_CACHE.setdefault(hf, {})
    if config.path not in cache:
        weights = read_lora_weights(config)
        resolved = {}
        for name, (a, b) in weights.items():
            try:
                module = hf.get_submodule(name)
            except AttributeError:
                module = None
            if not isinstance(module, torch.nn.Linear) or not targets_module(config, name):
                msg = (
                    f"the LoRA adapter {config.name} updates {name}, which is not a linear "
                    f"module of {model.model_id} it targets; use an adapter trained on this "
                    f"model's architecture"
                )
                raise CapabilityUnsupported(msg)
            if (b.shape[0], a.shape[1]) != tuple(module.weight.shape):
                msg = (
                    f"the LoRA adapter {config.name} has a {b.shape[0]}x{a.shape[1]} update for "
                    f"{name}, whose weight is {tuple(module.weight.shape)}; it was trained on "
                    f"another model"
                )
                raise CapabilityUnsupported(msg)
            dtype, device = module.weight.dtype, module.weight.device
            resolved[name] = (module, a.to(device, dtype), b.to(device, dtype))
        cache[config.path] = resolved
    return cache[config.path]


def _lora_hook(a: torch.Tensor, b: torch.Tensor, scaling: float) -> Any:
    def hook(_module: Any, args: tuple[Any, ...], output: torch.Tensor) -> torch.Tensor:
        return output + lora_delta(args[0], a, b, scaling)

    return hook


def _splice_hooks(model: Any, injection: Injection, stack: ExitStack) -> None:
    hf = model.hf_model
    state = {"armed": False}

    def arm(_module: Any, _args: Any, kwargs: dict[str, Any]) -> None:
        past = kwargs.get("past_key_values")
        state["armed"] = past is None or past.get_seq_length() == 0

    def splice(_module: Any, _args: Any, output: torch.Tensor) -> torch.Tensor | None:
        if not state["armed"]:
            return None
        return splice_rows(output, injection)

    top = hf.register_forward_pre_hook(arm, with_kwargs=True)
    stack.callback(top.remove)
    # Prepended, so a capture of `embeddings` reads the spliced rows.
    embed = hf.get_input_embeddings().register_forward_hook(splice, prepend=True)
    stack.callback(embed.remove)


@contextmanager
def call_inputs(model: Any, tokens: Any, prompt_embeds: Any, lora: Any) -> Iterator[CallInputs]:
    """Hold the model and install the call's embeddings splice and adapter for its duration."""
    with model._serving(), ExitStack() as stack:
        config = check_lora(lora)
        prompt = _one_prompt(model, tokens) if prompt_embeds is not None else None
        injection = check_prompt_embeds(prompt_embeds, model.d_model, prompt)
        if injection is not None and injection.whole:
            # Placeholders: the embedding module runs on them and the splice replaces every row.
            ids = torch.zeros((1, injection.length), dtype=torch.long, device=model.device)
        else:
            ids = model._tokens(tokens)
        if config is not None:
            for module, a, b in _lora_weights(model, config).values():
                handle = module.register_forward_hook(_lora_hook(a, b, config.scaling))
                stack.callback(handle.remove)
        if injection is not None:
            _splice_hooks(model, injection, stack)
        yield CallInputs(ids, injection, config)


# --- the model's calls with their inputs (EagerModel delegates here when either is given) --------
def run(
    model: Any, tokens: Any, prompt_embeds: Any, lora: Any, forward: Callable[..., Any], *args: Any
) -> Any:
    """`forward(ids, points, attention_mask, ...)` (the model's capture) with the inputs on."""
    if prompt_embeds is not None and args[1] is not None:
        msg = (
            "prompt_embeds takes one unpadded prompt, so attention_mask has nothing to mask; "
            "leave attention_mask unset"
        )
        raise CapabilityUnsupported(msg)
    with call_inputs(model, tokens, prompt_embeds, lora) as inputs:
        return forward(inputs.ids, *args)


def generate(
    model: Any,
    tokens: Any,
    prompt_embeds: Any,
    lora: Any,
    generate_ids: Callable[..., Generation],
    kwargs: dict[str, Any],
) -> Generation:
    """`generate_ids(ids, **kwargs)` (the model's generation) with the inputs on."""
    if prompt_embeds is not None and tokens is None:
        refuse_for_embeds_prompt(kwargs)
    with call_inputs(model, tokens, prompt_embeds, lora) as inputs:
        return inputs.finish(generate_ids(inputs.ids, **kwargs))


async def capture_generation(
    model: Any,
    tokens: Any,
    points: Any,
    prompt_embeds: Any,
    lora: Any,
    capture: Callable[..., Any],
    **options: Any,
) -> tuple[Generation, Any]:
    """The model's `capture_generation` with the inputs on (its generation and its capture
    both run inside them: each starts a fresh sequence, so the splice fires for both)."""
    with call_inputs(model, tokens, prompt_embeds, lora) as inputs:
        generation, cache = await capture(inputs.ids, points, **options)
    return inputs.finish(generation), cache


def for_stream(
    model: Any, tokens: Any, kwargs: dict[str, Any]
) -> tuple[Any, dict[str, Any], Callable[[], Any] | None]:
    """A stream's ids, keywords and step guard: with embeddings or an adapter, each step's
    forward runs with them installed, and only then (a stream holds nothing between steps)."""
    kwargs = dict(kwargs)
    prompt_embeds, lora = kwargs.pop("prompt_embeds", None), kwargs.pop("lora", None)
    if prompt_embeds is None and lora is None:
        return tokens, kwargs, None
    if prompt_embeds is not None and tokens is None:
        refuse_for_embeds_prompt(kwargs)
    with call_inputs(model, tokens, prompt_embeds, lora) as inputs:  # checked once, up front
        ids = inputs.ids
    return ids, kwargs, lambda: call_inputs(model, tokens, prompt_embeds, lora)
