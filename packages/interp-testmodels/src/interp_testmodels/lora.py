"""A tiny PEFT-format LoRA adapter for a test model, and its merge written out by hand.

The adapter is what PEFT's `save_pretrained` writes (`adapter_config.json` and
`adapter_model.safetensors` with `base_model.model.<module>.lora_A/B.weight` keys), so the
backends read it exactly as they would read a trained one. `B` is random, not PEFT's zero
initialisation, so the adapter changes every output it touches. `merged_into` folds it into a
copy of the HF model — `W + scaling * B @ A`, the merge PEFT's `merge_and_unload` performs —
giving the reference a test compares against without PEFT installed.

`write_peft_adapter` makes the adapter with PEFT itself (`get_peft_model`, its own module
selection and key names, `save_pretrained`) and `peft_logits` runs PEFT's own unmerged forward
on HF, for the tests that compare our backends with PEFT rather than with a hand merge. PEFT is
a test dependency only (the root `test` group), imported where these are called.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

__all__ = ["merged_into", "peft_logits", "write_lora_adapter", "write_peft_adapter"]


def write_lora_adapter(
    hf_model: Any,
    folder: str | Path,
    *,
    rank: int = 4,
    alpha: float = 8.0,
    targets: Sequence[str] = ("q_proj", "v_proj"),
    seed: int = 0,
    scale: float = 0.5,
) -> Path:
    """Write a random LoRA adapter for `hf_model`'s `targets` linear modules into `folder`."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, module in hf_model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name.rsplit(".", 1)[-1] not in targets:
            continue
        out_features, in_features = module.weight.shape
        a = torch.randn(rank, in_features, generator=generator) * scale
        b = torch.randn(out_features, rank, generator=generator) * scale
        tensors[f"base_model.model.{name}.lora_A.weight"] = a.contiguous()
        tensors[f"base_model.model.{name}.lora_B.weight"] = b.contiguous()
    if not tensors:
        msg = f"{type(hf_model).__name__} has no linear module named {targets}"
        raise ValueError(msg)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "target_modules": list(targets),
        "bias": "none",
        "fan_in_fan_out": False,
        "use_dora": False,
        "use_rslora": False,
        "modules_to_save": None,
        "base_model_name_or_path": str(getattr(hf_model.config, "_name_or_path", "")),
        "inference_mode": True,
    }
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return out


def merged_into(hf_model: Any, folder: str | Path) -> Any:
    """A copy of `hf_model` with the adapter in `folder` merged into its weights."""
    from safetensors.torch import load_file

    config = json.loads((Path(folder) / "adapter_config.json").read_text())
    scaling = config["lora_alpha"] / config["r"]
    tensors = load_file(str(Path(folder) / "adapter_model.safetensors"))
    merged = copy.deepcopy(hf_model)
    with torch.no_grad():
        for key, a in tensors.items():
            if ".lora_A." not in key:
                continue
            name = key.removeprefix("base_model.model.").split(".lora_A.")[0]
            b = tensors[key.replace(".lora_A.", ".lora_B.")]
            module = merged.get_submodule(name)
            module.weight += scaling * (b @ a)
    return merged


def write_peft_adapter(
    hf_model: Any,
    folder: str | Path,
    *,
    rank: int = 4,
    alpha: float = 8.0,
    targets: Sequence[str] = ("q_proj", "v_proj", "down_proj"),
    seed: int = 0,
    scale: float = 0.5,
) -> Path:
    """A LoRA adapter made and saved by PEFT for a copy of `hf_model` (which is left as is).

    PEFT initialises `lora_B` to zeros (an adapter that changes nothing); both matrices are
    refilled from a seeded generator so the adapter changes every output it touches.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(targets),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(copy.deepcopy(hf_model), config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in sorted(peft_model.named_parameters()):
            if ".lora_A." in name or ".lora_B." in name:
                fresh = torch.randn(parameter.shape, generator=generator) * scale
                parameter.copy_(fresh)
    out = Path(folder)
    peft_model.save_pretrained(str(out))
    return out


def peft_logits(hf_model: Any, folder: str | Path, ids: Any) -> Any:
    """PEFT's own forward (adapter unmerged, inference mode) on a copy of `hf_model`."""
    from peft import PeftModel

    peft_model = PeftModel.from_pretrained(copy.deepcopy(hf_model), str(folder)).eval()
    with torch.no_grad():
        return peft_model(input_ids=ids).logits
