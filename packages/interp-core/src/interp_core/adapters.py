"""LoRA adapters read from PEFT folders, as plain data (standard library only).

A PEFT LoRA folder holds `adapter_config.json` (rank, alpha, which modules) beside the weights
(`adapter_model.safetensors`). This module reads the config into a `LoraConfig` and refuses,
before any weights are read, every variant whose arithmetic our backends do not reproduce:
a wrong answer read "with an adapter" would look exactly like a right one.

Every backend applies the same update, PEFT's unmerged forward: a target linear map's output
gains `scaling * B(A(x))`, with `scaling = alpha / r` (or `alpha / sqrt(r)` with rsLoRA).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "LoraConfig", "check_lora", "read_lora_config"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"

# Keys whose non-default value changes the arithmetic; each maps to (default, why refused).
_REFUSED = {
    "use_dora": (False, "DoRA rescales the merged weight's columns, which is not a LoRA update"),
    "bias": ("none", "a LoRA bias trains the base layers' biases, which the folder would replace"),
    "fan_in_fan_out": (False, "a transposed (Conv1D) target needs its own layout"),
    "modules_to_save": (None, "modules_to_save replaces whole modules, not a low-rank update"),
    "rank_pattern": ({}, "a per-module rank is not one rank for the adapter"),
    "alpha_pattern": ({}, "a per-module alpha is not one scaling for the adapter"),
    "layers_to_transform": (None, "a layer subset is matched by PEFT's own layer-index rules"),
    "use_qalora": (False, "QA-LoRA pools the input, which is not a LoRA update"),
}


@dataclass(frozen=True)
class LoraConfig:
    """One LoRA adapter: where it lives and the update it applies.

    `name` is how a request names it (the folder's name unless given); `target_modules` holds
    module-name suffixes (PEFT's list form) or, as a one-element tuple with `regex=True`, a
    pattern matched against the whole module name.
    """

    name: str
    path: str
    rank: int
    alpha: float
    target_modules: tuple[str, ...]
    regex: bool = False
    use_rslora: bool = False
    base_model: str | None = None

    @property
    def scaling(self) -> float:
        """The factor PEFT multiplies `B(A(x))` by."""
        if self.use_rslora:
            return self.alpha / math.sqrt(self.rank)
        return self.alpha / self.rank

    @property
    def weights_path(self) -> str:
        return os.path.join(self.path, ADAPTER_WEIGHTS)


def _refuse(path: str, why: str, instead: str) -> CapabilityUnsupported:
    return CapabilityUnsupported(f"cannot use the LoRA adapter at {path}: {why}; {instead}")


def read_lora_config(path: str | os.PathLike[str], *, name: str | None = None) -> LoraConfig:
    """Read a PEFT LoRA folder's `adapter_config.json` into a `LoraConfig`, or refuse it."""
    folder = os.fspath(path)
    config_file = os.path.join(folder, ADAPTER_CONFIG)
    if not os.path.isfile(config_file):
        msg = (
            f"no LoRA adapter at {folder}: {ADAPTER_CONFIG} is missing; pass the folder PEFT's "
            f"save_pretrained wrote (it holds {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS})"
        )
        raise InvalidArgument(msg)
    if not os.path.isfile(os.path.join(folder, ADAPTER_WEIGHTS)):
        raise _refuse(
            folder,
            f"{ADAPTER_WEIGHTS} is missing (pickled adapter_model.bin is never read)",
            "save the adapter with safe_serialization=True",
        )
    try:
        with open(config_file, encoding="utf-8") as handle:
            raw: Any = json.load(handle)
    except (OSError, ValueError) as error:
        msg = f"cannot read {config_file}: {error}"
        raise InvalidArgument(msg) from error
    if not isinstance(raw, dict):
        msg = f"{config_file} holds {type(raw).__name__}, not a JSON object"
        raise InvalidArgument(msg)
    kind = raw.get("peft_type", "LORA")
    if str(kind).upper() != "LORA":
        raise _refuse(folder, f"it is a {kind} adapter, not LORA", "pass a LoRA adapter folder")
    for key, (default, why) in _REFUSED.items():
        value = raw.get(key, default)
        if value not in (default, None, {}, [], False):
            raise _refuse(folder, f"{key}={value!r}: {why}", f"retrain it without {key}")
    rank, alpha = raw.get("r"), raw.get("lora_alpha")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        msg = f"{config_file}: r={rank!r} is not a positive int"
        raise InvalidArgument(msg)
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        msg = f"{config_file}: lora_alpha={alpha!r} is not a number"
        raise InvalidArgument(msg)
    targets = raw.get("target_modules")
    regex = isinstance(targets, str)
    if regex:
        modules: tuple[str, ...] = (targets,)
    elif isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets):
        modules = tuple(sorted(targets))
    else:
        raise _refuse(
            folder,
            f"target_modules={targets!r} names no modules",
            "save the adapter with an explicit target_modules list",
        )
    return LoraConfig(
        name=name or os.path.basename(os.path.normpath(folder)),
        path=folder,
        rank=rank,
        alpha=float(alpha),
        target_modules=modules,
        regex=regex,
        use_rslora=bool(raw.get("use_rslora", False)),
        base_model=raw.get("base_model_name_or_path") or None,
    )


def check_lora(lora: Any) -> LoraConfig | None:
    """The call's `lora=` argument as a `LoraConfig`: None, a `LoraConfig` or a folder path."""
    if lora is None or isinstance(lora, LoraConfig):
        return lora
    if isinstance(lora, str | os.PathLike):
        return read_lora_config(lora)
    msg = (
        f"lora={lora!r} is a {type(lora).__name__}; pass a PEFT adapter folder's path or a "
        f"LoraConfig (interp_core.read_lora_config)"
    )
    raise InvalidArgument(msg)
