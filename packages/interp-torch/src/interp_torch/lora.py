"""LoRA weights read from a PEFT folder and the update they make, written once.

`read_lora_weights` maps each target module (its name in the HF model, PEFT's
`base_model.model.` prefix removed) to its `(A, B)` pair; `lora_delta` is the update PEFT's
unmerged forward adds to that module's output, `scaling * B(A(x))`, in the same order of
operations so a backend that adds it matches PEFT on HF to float rounding.
"""

from __future__ import annotations

import re

import torch
from safetensors.torch import load_file

from interp_core.adapters import LoraConfig
from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["LoraWeights", "lora_delta", "read_lora_weights", "targets_module"]

_PREFIX = "base_model.model."
_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<side>[AB])(?:\.(?P<adapter>[^.]+))?\.weight$")

LoraWeights = dict[str, tuple[torch.Tensor, torch.Tensor]]


def targets_module(config: LoraConfig, module_name: str) -> bool:
    """Whether PEFT would wrap `module_name` for this config (suffix list or full regex)."""
    if config.regex:
        return re.fullmatch(config.target_modules[0], module_name) is not None
    return any(module_name == t or module_name.endswith("." + t) for t in config.target_modules)


def read_lora_weights(config: LoraConfig) -> LoraWeights:
    """`{module name: (A [r, in], B [out, r])}` from the folder's safetensors, checked."""
    tensors = load_file(config.weights_path)
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
        match = _KEY.match(key)
        if match is None:
            msg = (
                f"cannot use the LoRA adapter at {config.path}: its weight {key!r} is not a "
                f"lora_A / lora_B matrix (embedding or magnitude adapters are not supported); "
                f"use an adapter of linear layers only"
            )
            raise CapabilityUnsupported(msg)
        module = match["module"].removeprefix(_PREFIX)
        pairs.setdefault(module, {})[match["side"]] = tensor
    weights: LoraWeights = {}
    for module, sides in sorted(pairs.items()):
        if set(sides) != {"A", "B"}:
            msg = (
                f"the LoRA adapter at {config.path} has only {set(sides)} of "
                f"{module}; an adapter holds both lora_A and lora_B"
            )
            raise InvalidArgument(msg)
        a, b = sides["A"], sides["B"]
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != config.rank or b.shape[1] != a.shape[0]:
            msg = (
                f"the LoRA adapter at {config.path}: {module} has A {tuple(a.shape)} and B "
                f"{tuple(b.shape)}, not [r={config.rank}, in] and [out, r={config.rank}]"
            )
            raise InvalidArgument(msg)
        weights[module] = (a, b)
    if not weights:
        msg = f"the LoRA adapter at {config.path} holds no weights"
        raise InvalidArgument(msg)
    return weights


def lora_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scaling: float) -> torch.Tensor:
    """What PEFT adds to a target module's output for input `x` (dropout off, as at inference)."""
    return torch.nn.functional.linear(torch.nn.functional.linear(x, a), b) * scaling
