"""Does the worker serve BLOOM's MLP activation as the model was trained (tanh GELU)?

vLLM's BloomMLP applies the exact (erf) GELU; `faithful_activations` swaps in the tanh form
before any request. No engine runs here: a module tree shaped like vLLM's BLOOM stands in.
"""

from __future__ import annotations

import pytest
import torch

from interp_core.errors import CapabilityUnsupported
from interp_vllm.worker import faithful_activations


class _Mlp(torch.nn.Module):
    """vLLM's BloomMLP as the worker sees it: dense_h_to_4h, gelu_impl, dense_4h_to_h."""

    def __init__(self) -> None:
        super().__init__()
        self.dense_h_to_4h = torch.nn.Linear(4, 16)
        self.gelu_impl = torch.nn.GELU()  # the exact (erf) form, as vLLM's get_act_fn("gelu")
        self.dense_4h_to_h = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_4h_to_h(self.gelu_impl(self.dense_h_to_4h(x)))


def _model(layers: int = 2) -> torch.nn.Module:
    model = torch.nn.Module()
    model.h = torch.nn.ModuleList(torch.nn.ModuleDict({"mlp": _Mlp()}) for _ in range(layers))
    return model


def _bloom_gelu(x: torch.Tensor) -> torch.Tensor:
    """HF's bloom_gelu_forward, written out (its constant rounds sqrt(2/pi) to 0.79788456)."""
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def test_bloom_mlps_compute_the_tanh_gelu_hf_uses() -> None:
    model = _model()
    assert faithful_activations(model, {"model_type": "bloom"}) == 2
    x = torch.linspace(-4, 4, 801, dtype=torch.float32)
    for block in model.h:
        got = block["mlp"].gelu_impl(x)
        assert torch.allclose(got, _bloom_gelu(x), atol=1e-6, rtol=0)
    # The erf form it replaced differs by far more than that (~1e-3 around |x| = 2).
    assert (torch.nn.functional.gelu(x) - _bloom_gelu(x)).abs().max().item() > 1e-4


def test_other_families_are_left_alone() -> None:
    model = _model()
    assert faithful_activations(model, {"model_type": "gpt2"}) == 0
    assert all(isinstance(block["mlp"].gelu_impl, torch.nn.GELU) for block in model.h)


def test_a_bloom_tree_without_its_mlp_activation_is_refused() -> None:
    with pytest.raises(CapabilityUnsupported, match=r"tanh approximation.*backend='eager'"):
        faithful_activations(torch.nn.Linear(2, 2), {"model_type": "bloom"})


def test_generate_only_mode_warns_that_bloom_keeps_vllms_gelu() -> None:
    # The workers fix BLOOM's GELU; vllm-generate loads none, so it must still warn (and only it).
    from interp_vllm.backend import VLLMBackend, VLLMGenerateBackend
    from interp_vllm.support import known_issues_for

    assert known_issues_for("bloom", "0.32.0") == ()
    (issue,) = known_issues_for("bloom", "0.32.0", mode="generate")
    assert "tanh" in issue.problem and "backend='vllm'" in issue.fix
    assert known_issues_for("llama", "0.32.0", mode="generate") == ()
    assert issue in VLLMGenerateBackend.known_issues
    assert issue not in VLLMBackend.known_issues
