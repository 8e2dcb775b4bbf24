"""Do captures keep the autograd graph exactly when asked to?

Every family, loaded with `requires_grad=True`: a capture with `detach=False` is part of the
graph, and backpropagating from it reaches the embedding rows of the prompt's tokens and the
parameters of the layers before it, and nothing after it. With the default `detach=True`, and on
a model loaded without gradients, captured tensors carry no graph at all.
"""

from __future__ import annotations

import pytest
import torch
from eager_helpers import decoder_layers, model, prompt_ids, resid_address

from interp_core import load_model
from interp_core.address import Address
from interp_core.steering import SteeringSpec
from interp_eager.model import EagerModel
from interp_testmodels.families import FAMILY_NAMES, build_family


def _params_with_grad(module: torch.nn.Module) -> list[str]:
    return [
        name
        for name, p in module.named_parameters()
        if p.grad is not None and bool(p.grad.abs().sum() > 0)
    ]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_capture_with_detach_false_backpropagates_to_inputs_and_parameters(
    family: str,
) -> None:
    m = load_model(str(build_family(family)), backend="eager", requires_grad=True)
    assert isinstance(m, EagerModel)
    ids = prompt_ids(m)
    layer = m.n_layers // 2
    address = resid_address(m, layer)
    cache = m.run_with_cache(ids, [address, "embeddings"], detach=False)
    captured = cache[address]
    assert captured.requires_grad and captured.grad_fn is not None
    assert cache[Address("embeddings")].requires_grad
    captured.pow(2).sum().backward()

    embedding = m.hf_model.get_input_embeddings().weight
    assert embedding.grad is not None
    rows = embedding.grad.abs().sum(dim=-1)
    used = torch.zeros_like(rows, dtype=torch.bool)
    used[ids[0]] = True
    # Every token of the prompt gets a gradient, and no other row of the table.
    assert bool((rows[used] > 0).all())
    assert bool((rows[~used] == 0).all())
    layers = decoder_layers(m.hf_model)
    assert _params_with_grad(layers[layer]), "the captured layer's own parameters got no gradient"
    for later in layers[layer + 1 :]:
        assert all(p.grad is None for p in later.parameters()), "a later layer got a gradient"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_captures_carry_no_graph_by_default(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    address = resid_address(m, 0)
    cache = m.run_with_cache(ids, [address, "embeddings"])
    for tensor in (cache[address], cache["embeddings"], cache.output.logits):
        assert not tensor.requires_grad and tensor.grad_fn is None
    assert all(not p.requires_grad for p in m.hf_model.parameters())


def test_default_detach_carries_no_graph_even_on_a_gradient_model() -> None:
    m = load_model(str(build_family("llama")), backend="eager", requires_grad=True)
    ids = prompt_ids(m)
    cache = m.run_with_cache(ids, ["resid_post.0"])
    assert not cache["resid_post.0"].requires_grad
    assert cache["resid_post.0"].grad_fn is None
    # The graph-keeping capture is still available on the same model afterwards.
    kept = m.run_with_cache(ids, ["resid_post.0"], detach=False)["resid_post.0"]
    assert kept.grad_fn is not None


def test_gradients_flow_through_a_steered_capture() -> None:
    m = load_model(str(build_family("llama")), backend="eager", requires_grad=True)
    ids = prompt_ids(m)
    vector = torch.zeros(m.d_model, requires_grad=True)
    spec = SteeringSpec("resid_post.0", vector)
    cache = m.run_with_cache(ids, ["resid_post.1"], steering=spec, detach=False)
    cache["resid_post.1"].sum().backward()
    # The steering vector is a leaf of the graph: a direction can be optimised through it.
    assert vector.grad is not None and bool(vector.grad.abs().sum() > 0)
