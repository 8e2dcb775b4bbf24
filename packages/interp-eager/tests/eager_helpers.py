"""Helpers shared by the eager tests: one model per family, and HF-side references.

The references here find modules in the HF tree on their own (a few attribute names per role,
test-side) and edit tensors with hand-written hooks, so a test compares the backend with
something that does not share its resolution code or its steering arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from interp_core import load_model
from interp_core.address import Address
from interp_eager.model import EagerModel
from interp_testmodels.families import build_family
from interp_testmodels.inspection import decoder_layers
from interp_testmodels.tokenizer import PAD_TOKEN_ID, TEST_PROMPT

__all__ = [
    "PAD_TOKEN_ID",
    "TEST_PROMPT",
    "decoder_layers",
    "final_norm",
    "forward_hook",
    "hf_logits",
    "hook_ids",
    "layer_output",
    "lm_head",
    "model",
    "no_hooks_left",
    "prompt_ids",
    "resid_address",
    "set_layer_output",
    "trunk",
]

_MODELS: dict[str, EagerModel] = {}


def model(family: str) -> EagerModel:
    """The family's model on the eager backend, loaded once per session and shared."""
    if family not in _MODELS:
        loaded = load_model(str(build_family(family)), backend="eager")
        assert isinstance(loaded, EagerModel)
        loaded.hf_model  # noqa: B018 - load the weights now, outside any timed test body
        _MODELS[family] = loaded
    return _MODELS[family]


def prompt_ids(m: EagerModel, text: str = TEST_PROMPT) -> torch.Tensor:
    return m.to_tokens(text)


def resid_address(m: EagerModel, layer: int, name: str = "resid_post") -> Address:
    """`name` at `layer`; on a multi-stream trunk its stream 1 (stream 0 is less telling)."""
    return Address(name, layer, 1 if m.facts.n_streams > 1 else None)


# --- finding modules, test-side (decoder_layers: interp_testmodels.inspection) ----------------
def trunk(hf: torch.nn.Module) -> torch.nn.Module:
    layers = decoder_layers(hf)
    for _, module in hf.named_modules():
        if any(child is layers for child in module.children()):
            return module
    raise AssertionError("the decoder layers have no parent")


def final_norm(hf: torch.nn.Module) -> torch.nn.Module:
    owner = trunk(hf)
    # LFM2 names its final norm `embedding_norm`, though it runs after the last block; DBRX norm_f.
    names = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "embedding_norm", "norm_f")
    for name in names:
        module = getattr(owner, name, None)
        if isinstance(module, torch.nn.Module):
            return module
    raise AssertionError(f"no final norm on {type(owner).__name__}")


def lm_head(hf: torch.nn.Module) -> torch.nn.Module:
    head = hf.get_output_embeddings()
    assert isinstance(head, torch.nn.Module)
    return head


# --- hand-written hooks -------------------------------------------------------------------------
@contextmanager
def forward_hook(module: torch.nn.Module, hook: Callable[..., Any]) -> Iterator[None]:
    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def layer_output(output: Any) -> torch.Tensor:
    """The hidden states a decoder layer returns (a tensor, or the first element of a tuple)."""
    return output[0] if isinstance(output, tuple) else output


def set_layer_output(output: Any, hidden: torch.Tensor) -> Any:
    return (hidden, *output[1:]) if isinstance(output, tuple) else hidden


def hf_logits(hf: torch.nn.Module, ids: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    with torch.no_grad():
        return hf(input_ids=ids, use_cache=False, **kwargs).logits


def no_hooks_left(m: EagerModel) -> bool:
    """No hook of any kind remains on any module of the model (a failed call cleaned up)."""
    for module in m.hf_model.modules():
        if module._forward_hooks or module._forward_pre_hooks:
            return False
    return True


def hook_ids(m: EagerModel) -> set[tuple[str, int]]:
    """Every hook on the model's modules, by module name and hook id.

    Compare with the set a test started with rather than with the empty set: transformers installs
    hooks of its own on the first call that asks for hidden states or attentions.
    """
    found: set[tuple[str, int]] = set()
    for name, module in m.hf_model.named_modules():
        for hooks in (module._forward_hooks, module._forward_pre_hooks):
            found.update((name, key) for key in hooks)
    return found
