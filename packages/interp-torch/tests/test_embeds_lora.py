"""The shared embeddings splice and LoRA arithmetic, by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from interp_core.adapters import read_lora_config
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_torch.embeds import check_prompt_embeds, splice_rows
from interp_torch.lora import lora_delta, read_lora_weights, targets_module


def test_splice_replaces_exactly_the_given_slots() -> None:
    embedded = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    row = torch.tensor([-1.0, -2.0, -3.0])
    injection = check_prompt_embeds({2: row, 0: row * 2}, 3, [5, 6, 7, 8])
    assert injection is not None and injection.positions == (0, 2) and not injection.whole
    out = splice_rows(embedded, injection)
    expected = embedded.clone()
    expected[:, 0], expected[:, 2] = row * 2, row
    assert torch.equal(out, expected)
    assert torch.equal(embedded, torch.arange(24, dtype=torch.float32).reshape(2, 4, 3))
    whole = check_prompt_embeds(torch.ones(1, 5, 3), 3, None)
    assert whole is not None and whole.whole and whole.length == 5
    with pytest.raises(InvalidArgument, match="d_model=3"):
        check_prompt_embeds(torch.ones(5, 4), 3, None)
    with pytest.raises(InvalidArgument, match="outside"):
        check_prompt_embeds({-1: row}, 3, [1, 2])
    with pytest.raises(InvalidArgument, match="floats"):
        check_prompt_embeds(torch.ones(2, 3, dtype=torch.long), 3, None)


def _adapter(tmp_path: Path, tensors: dict[str, torch.Tensor]) -> Path:
    config = {"peft_type": "LORA", "r": 2, "lora_alpha": 3, "target_modules": ["q_proj"]}
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    save_file(tensors, str(tmp_path / "adapter_model.safetensors"))
    return tmp_path


def test_lora_weights_and_delta(tmp_path: Path) -> None:
    a, b = torch.randn(2, 5), torch.randn(4, 2)
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    folder = _adapter(tmp_path, {f"{prefix}.lora_A.weight": a, f"{prefix}.lora_B.weight": b})
    config = read_lora_config(folder)
    weights = read_lora_weights(config)
    assert list(weights) == ["model.layers.0.self_attn.q_proj"]
    assert targets_module(config, "model.layers.0.self_attn.q_proj")
    assert not targets_module(config, "model.layers.0.self_attn.k_proj")
    x = torch.randn(3, 5)
    assert torch.allclose(lora_delta(x, a, b, config.scaling), 1.5 * x @ a.T @ b.T, atol=1e-6)


def test_weights_that_are_not_a_lora_pair_are_refused(tmp_path: Path) -> None:
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    folder = _adapter(tmp_path, {f"{prefix}.lora_magnitude_vector": torch.ones(4)})
    with pytest.raises(CapabilityUnsupported, match="lora_A / lora_B"):
        read_lora_weights(read_lora_config(folder))
    folder = _adapter(tmp_path, {f"{prefix}.lora_A.weight": torch.ones(2, 5)})
    with pytest.raises(InvalidArgument, match="both lora_A and lora_B"):
        read_lora_weights(read_lora_config(folder))
    folder = _adapter(
        tmp_path,
        {f"{prefix}.lora_A.weight": torch.ones(3, 5), f"{prefix}.lora_B.weight": torch.ones(4, 3)},
    )
    with pytest.raises(InvalidArgument, match="r=2"):
        read_lora_weights(read_lora_config(folder))
