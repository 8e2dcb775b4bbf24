"""Which `load_model` keyword belongs to which first-party backend: one table, read by all of them.

`load_model` passes every keyword it does not consume itself to the chosen backend's `load`, and
each backend's `load` calls `check_backend_keywords` before it builds anything, so a keyword given
to the wrong backend is refused when the model is constructed, naming the backend that takes it,
instead of surfacing later as a `TypeError` or as a transformers/vLLM error at warmup.

Only the first-party backends are checked here; a third-party backend validates its own keywords.
Arguments for the library underneath travel in one explicit dict per backend
(`from_pretrained_kwargs` on eager, `extra_vllm_kwargs` on vLLM), never as bare keywords.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from interp_core.errors import CapabilityUnsupported, GradientsUnsupported, InvalidArgument

__all__ = ["BACKEND_KEYWORDS", "PASS_THROUGH", "backend_keywords", "check_backend_keywords"]

_EAGER = ("eager",)
_VLLM = ("vllm", "vllm-static", "vllm-generate")
_STATIC = ("vllm-static",)
_EVERY = _EAGER + _VLLM

# keyword -> the first-party backends whose load() takes it.
BACKEND_KEYWORDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "device": _EVERY,
        "dtype": _EVERY,
        "num_gpus": _EVERY,
        "quantization": _EVERY,
        "requires_grad": _EAGER,
        "attn_implementation": _EAGER,
        "trust_remote_code": _EAGER,
        "hf_model": _EAGER,
        "tokenizer": _EAGER,
        "capture_budget_bytes": _EAGER,
        "from_pretrained_kwargs": _EAGER,
        "max_model_len": _VLLM,
        "gpu_memory_utilization": _VLLM,
        "kv_cache_dtype": _VLLM,
        "pipeline_parallel": _VLLM,
        "distributed": _VLLM,
        "extra_vllm_kwargs": _VLLM,
        "static_points": _STATIC,
        "static_writes": _STATIC,
        "static_write_slots": _STATIC,
    }
)

# backend -> the dict keyword that carries arguments for the library underneath it.
PASS_THROUGH: Mapping[str, str] = MappingProxyType(
    {
        "eager": "from_pretrained_kwargs",
        "vllm": "extra_vllm_kwargs",
        "vllm-static": "extra_vllm_kwargs",
        "vllm-generate": "extra_vllm_kwargs",
    }
)


def backend_keywords(backend: str) -> tuple[str, ...]:
    """The keywords `backend`'s load takes, sorted (empty for a backend the table does not list)."""
    return tuple(sorted(key for key, takers in BACKEND_KEYWORDS.items() if backend in takers))


def _use(takers: tuple[str, ...]) -> str:
    if len(takers) == 1:
        return f"backend={takers[0]!r}"
    names = ", ".join(repr(name) for name in takers)
    return f"one of backend={names}"


def check_backend_keywords(backend: str, keywords: Iterable[str]) -> None:
    """Refuse a keyword `backend` does not take, naming the backend that does.

    A backend outside the first-party table is not checked (it validates its own keywords).
    """
    if backend not in PASS_THROUGH:
        return
    for key in sorted(keywords):
        takers = BACKEND_KEYWORDS.get(key)
        if takers is not None and backend in takers:
            continue
        if takers is not None:
            message = (
                f"{key}= is not a keyword of backend={backend!r}: only {_use(takers)} takes it "
                f"(load_model checks each keyword against the backend it goes to). Use "
                f"{_use(takers)}, or drop {key}="
            )
            # Gradients have their own error, the one users of the anchor engine catch.
            refusal = GradientsUnsupported if key == "requires_grad" else CapabilityUnsupported
            raise refusal(message)
        taken = backend_keywords(backend)
        close = difflib.get_close_matches(key, list(BACKEND_KEYWORDS), n=1, cutoff=0.75)
        typo = f" Did you mean {close[0]}=?" if close else ""
        message = (
            f"{key}= is not a keyword of backend={backend!r} (nor of any backend that ships with "
            f"interp-engine), and passing it on unread would fail later or silently.{typo} "
            f"Backend {backend!r} takes {', '.join(taken)}; arguments for the library underneath "
            f"go in {PASS_THROUGH[backend]}={{...}}"
        )
        raise InvalidArgument(message)
