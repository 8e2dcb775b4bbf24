"""Are a call's inputs sound for this model, before any forward pass starts?

Token ids, attention masks, `generate`'s keywords and the memory a capture would hold: each is
checked in full here and refused with a library error, so a refusal never leaves the model
half-hooked. Sampling values and steering specs are checked by the core and interp-torch, the
same way on every backend.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.shapes import point_shape

__all__ = [
    "DEFAULT_BUDGET_SHARE",
    "available_memory",
    "capture_budget",
    "check_budget_option",
    "check_capture_budget",
    "check_mask",
    "check_tokens",
    "gen_defaults",
    "position_ids",
    "size_text",
]

_TOKEN_DTYPES = (torch.int64, torch.int32)  # what an embedding lookup takes
# Without capture_budget_bytes, a capture may take this share of the memory available on the
# model's device when the call starts.
DEFAULT_BUDGET_SHARE = 0.5


def check_tokens(tokens: Any, facts: ModelFacts) -> torch.Tensor:
    """`tokens` as `[batch, seq]` integer ids this model can embed (on their own device)."""
    if isinstance(tokens, str):
        message = (
            "tokens must be token ids, not text; call model.to_tokens(text) first "
            "(it adds the BOS token the model expects)"
        )
        raise CapabilityUnsupported(message)
    ids = tokens if isinstance(tokens, torch.Tensor) else _as_ids(tokens)
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    # Checked first: `[]` becomes a float tensor, and "empty" is the fix to name.
    if ids.dim() == 2 and (ids.shape[1] == 0 or ids.shape[0] == 0):
        message = "the prompt is empty: there is no token to run the model on; pass at least one"
        raise CapabilityUnsupported(message)
    if ids.dim() != 2 or ids.dtype not in _TOKEN_DTYPES:
        message = (
            f"tokens must be integer ids (int64 or int32) shaped [seq] or [batch, seq], got "
            f"{tuple(ids.shape)} of {ids.dtype}; call model.to_tokens(text) to make them, "
            f"or convert integer ids with .long()"
        )
        raise CapabilityUnsupported(message)
    limit = facts.max_position_embeddings
    if limit is not None and ids.shape[1] > limit:
        message = (
            f"the prompt has {ids.shape[1]} tokens but this model's context is {limit}; "
            f"truncate it (e.g. tokens[:, -{limit}:])"
        )
        raise CapabilityUnsupported(message)
    vocab = facts.vocab_size
    if int(ids.min()) < 0 or int(ids.max()) >= vocab:
        message = f"token ids must lie in 0..{vocab - 1} (this model's vocabulary)"
        raise CapabilityUnsupported(message)
    return ids


def check_mask(mask: Any, ids: torch.Tensor) -> torch.Tensor:
    """`mask` as a `[batch, seq]` long tensor of 0 and 1 matching `ids` (all ones if None)."""
    if mask is None:
        return torch.ones_like(ids)
    try:
        mask = torch.as_tensor(mask, device=ids.device)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        message = (
            f"attention_mask could not be read as a [batch, seq] array of 0 and 1 ({error}); "
            f"pass one row per prompt, each as long as the padded tokens"
        )
        raise CapabilityUnsupported(message) from error
    if mask.dim() == 1:
        mask = mask.unsqueeze(0)
    if tuple(mask.shape) != tuple(ids.shape):
        message = f"attention_mask has shape {tuple(mask.shape)}; tokens are {tuple(ids.shape)}"
        raise CapabilityUnsupported(message)
    if not bool(((mask == 0) | (mask == 1)).all()):
        odd = mask[(mask != 0) & (mask != 1)].unique()[:5].tolist()
        message = (
            f"attention_mask holds {odd}: a mask is 1 for a real token and 0 for padding, "
            f"and any other value would be read as one of them silently; pass 0 and 1 only"
        )
        raise CapabilityUnsupported(message)
    if bool((mask.sum(dim=1) == 0).any()):
        message = "a row of attention_mask is all zeros: that row has no token to run"
        raise CapabilityUnsupported(message)
    return mask.to(torch.long)


def check_padded_positions(mask: torch.Tensor, config: Any) -> None:
    """Refuse left padding where the modelling code counts positions by padded index.

    Llama-4 scales the queries of its NoPE layers by a temperature that steps up every
    `floor_scale` positions, counted from the start of the padded tensor rather than from the
    row's first real token (transformers ignores the position ids there). A left-padded row is
    then tempered as if it stood further right, unless the padded width stays below the first
    step.
    """
    config = getattr(config, "text_config", config)
    _check_compressed_left_padding(mask, config)
    if not getattr(config, "attn_temperature_tuning", False):
        return
    if 0 not in (getattr(config, "no_rope_layers", None) or ()):
        return
    step = int(getattr(config, "floor_scale", 0) or 0)
    width = mask.shape[1]
    if step < 1 or width < step or not bool((mask[:, 0] == 0).any()):
        return
    message = (
        f"a left-padded batch {width} tokens wide cannot run on this Llama-4: its NoPE layers "
        f"scale queries by a temperature that steps every {step} positions counted from the "
        f"padded tensor's first column (transformers ignores the position ids there), so a "
        f"padded row would differ from the same row alone; pad on the right "
        f"(padding_side='right'), or run the prompts one at a time"
    )
    raise CapabilityUnsupported(message)


_COMPRESSED_LAYER_TYPES = ("compressed_sparse_attention", "heavily_compressed_attention")


def _check_compressed_left_padding(mask: torch.Tensor, config: Any) -> None:
    """DeepSeek-V4's compressed layers pool tokens in windows counted from the padded tensor's
    first column, pads included (their compressors take no mask), so left padding shifts every
    window and pools pads into the entries a row's queries read: refuse it. Right padding leaves
    a row's closed windows all real tokens, and measures equal to the row alone."""
    kinds = set(getattr(config, "layer_types", None) or ()) & set(_COMPRESSED_LAYER_TYPES)
    if not kinds or not bool((mask[:, 0] == 0).any()):
        return
    rates = getattr(config, "compress_rates", None) or {}
    pooled = ", ".join(f"{kind} every {rates.get(kind, '?')}" for kind in sorted(kinds))
    message = (
        f"a left-padded batch cannot run on this DeepSeek-V4: its compressed layers pool tokens "
        f"into entries ({pooled} tokens) in windows counted from the padded tensor's first "
        f"column, pad tokens included (transformers gives the compressors no mask), so a padded "
        f"row would differ from the same row alone; pad on the right (padding_side='right'), or "
        f"run the prompts one at a time"
    )
    raise CapabilityUnsupported(message)


def position_ids(mask: torch.Tensor) -> torch.Tensor:
    # Positions follow the mask, so a left-padded row numbers its real tokens from 0.
    return (mask.cumsum(dim=-1) - 1).clamp(min=0)


# generate()'s keywords beyond the tokens; None for a knob means "unset": the checkpoint's
# generation_config.json decides it, else the library default (interp_core.sampling).
GENERATE_KEYWORDS = (
    "max_new_tokens",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "n_logprobs",
    "prompt_logprobs",
    "use_generation_config",
    "steering",
)


def gen_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    unknown = set(kwargs) - set(GENERATE_KEYWORDS)
    if unknown:
        message = (
            f"generate() got unknown arguments {sorted(unknown)}; it takes "
            f"{sorted(GENERATE_KEYWORDS)}"
        )
        raise CapabilityUnsupported(message)
    chosen = {key: kwargs.get(key) for key in GENERATE_KEYWORDS}
    chosen["max_new_tokens"] = kwargs.get("max_new_tokens", 64)
    chosen["n_logprobs"] = kwargs.get("n_logprobs", 0)
    chosen["use_generation_config"] = kwargs.get("use_generation_config", True)
    return chosen


def _as_ids(tokens: Any) -> torch.Tensor:
    try:
        return torch.as_tensor(tokens)
    except (TypeError, ValueError, RuntimeError, OverflowError) as error:
        message = (
            f"tokens could not be read as integer ids shaped [seq] or [batch, seq] ({error}); "
            f"the rows of a batch must be equally long: pad them and pass attention_mask, or "
            f"call once per prompt"
        )
        raise CapabilityUnsupported(message) from error


# --- the capture budget --------------------------------------------------------------------------
def check_budget_option(budget: object) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        error = InvalidArgument.build(
            f"capture_budget_bytes={budget!r} is not a positive int",
            "it bounds the bytes one capture may hold",
            "pass a number of bytes such as 8 * 2**30, or None for the default share of "
            "available memory",
        )
        raise error
    return budget


def capture_budget(option: int | None, device: torch.device) -> tuple[int | None, str]:
    """(bytes one capture may hold, where that figure comes from); None bytes: no limit known."""
    if option is not None:
        return option, "capture_budget_bytes"
    available = available_memory(device)
    if available is None:
        return None, ""
    share = f"{DEFAULT_BUDGET_SHARE:.0%} of the {size_text(available)} available on {device}"
    return int(available * DEFAULT_BUDGET_SHARE), share


def check_capture_budget(
    addresses: Sequence[Address],
    facts: ModelFacts,
    dtype: torch.dtype,
    batch_seq: tuple[int, int],
    budget: tuple[int | None, str],
) -> None:
    """Refuse, before any work, a capture whose tensors would exceed `budget`."""
    batch, seq = batch_seq
    sizes = {}
    itemsize = torch.empty((), dtype=dtype).element_size()
    for address in dict.fromkeys(addresses):
        if not address.is_path:  # a raw module's output has no registry shape
            sizes[address] = math.prod(point_shape(address, facts, batch, seq)) * itemsize
    total = sum(sizes.values())
    limit, source = budget
    if not total or limit is None or total <= limit:
        return
    largest = max(sizes, key=sizes.__getitem__)
    error = CapabilityUnsupported.build(
        f"this capture would hold {size_text(total)} of activations ({len(sizes)} point(s) over "
        f"batch {batch} x {seq} tokens; the largest, {largest}, is {size_text(sizes[largest])})",
        f"that exceeds the capture budget of {size_text(limit)} ({source})",
        "capture fewer points or layers, a shorter prompt or a smaller batch (attention "
        "matrices grow with the square of the prompt), or raise capture_budget_bytes when "
        "loading the model",
    )
    raise error


def available_memory(device: torch.device) -> int | None:
    """Bytes a capture can still take on `device` (None when it cannot be told)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        # Blocks torch's caching allocator holds but no tensor uses are reusable too.
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free + cached)
    if device.type != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def size_text(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
