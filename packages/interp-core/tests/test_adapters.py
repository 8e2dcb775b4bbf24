"""Reading a PEFT LoRA folder's config: the scaling PEFT uses, and every variant refused."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from interp_core.adapters import LoraConfig, check_lora, read_lora_config
from interp_core.errors import CapabilityUnsupported, InvalidArgument

_BASE = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["v_proj", "q_proj"]}


def _folder(tmp_path: Path, config: dict[str, Any], weights: bool = True) -> Path:
    folder = tmp_path / "adapter"
    folder.mkdir(exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps(config))
    if weights:
        (folder / "adapter_model.safetensors").write_bytes(b"")  # only its presence is read
    return folder


def test_a_plain_config_reads_with_peft_scaling(tmp_path: Path) -> None:
    config = read_lora_config(_folder(tmp_path, _BASE))
    assert config == LoraConfig("adapter", str(tmp_path / "adapter"), 8, 16.0, ("q_proj", "v_proj"))
    assert config.scaling == 2.0
    rs = read_lora_config(_folder(tmp_path, {**_BASE, "use_rslora": True}), name="oracle")
    assert (rs.name, rs.scaling) == ("oracle", 16 / math.sqrt(8))
    regex = read_lora_config(_folder(tmp_path, {**_BASE, "target_modules": r".*\.q_proj"}))
    assert regex.regex and regex.target_modules == (r".*\.q_proj",)
    assert check_lora(None) is None and check_lora(config) is config
    assert check_lora(str(tmp_path / "adapter")).rank == 8


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"use_dora": True}, "DoRA"),
        ({"bias": "all"}, "bias"),
        ({"modules_to_save": ["lm_head"]}, "modules_to_save"),
        ({"rank_pattern": {"q_proj": 4}}, "rank"),
        ({"alpha_pattern": {"q_proj": 4}}, "alpha"),
        ({"fan_in_fan_out": True}, "Conv1D"),
        ({"layers_to_transform": [0]}, "layer"),
        ({"peft_type": "IA3"}, "IA3"),
        ({"target_modules": []}, "target_modules"),
    ],
)
def test_variants_we_do_not_reproduce_are_refused(
    tmp_path: Path, change: dict[str, Any], words: str
) -> None:
    with pytest.raises(CapabilityUnsupported, match=words):
        read_lora_config(_folder(tmp_path, {**_BASE, **change}))


def test_malformed_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"adapter_config\.json is missing"):
        read_lora_config(tmp_path / "nowhere")
    with pytest.raises(CapabilityUnsupported, match="safe_serialization"):
        read_lora_config(_folder(tmp_path, _BASE, weights=False))
    for bad in ({**_BASE, "r": 0}, {**_BASE, "lora_alpha": "x"}):
        (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"")
        with pytest.raises(InvalidArgument):
            read_lora_config(_folder(tmp_path, bad))
    with pytest.raises(InvalidArgument, match="LoraConfig"):
        check_lora(3)
