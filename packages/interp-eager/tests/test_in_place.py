"""Captures are kept without a copy; a tensor the model changes in place later is caught.

The backend does not copy what it captures (copying every point cost a quarter of a forward
pass). HF forwards compute out of place, but nothing forces a model to: if any code mutates a
captured tensor after the hook read it, the tensor's version counter moves, and the backend runs
the forward again with copies. These tests mutate on purpose and check the values are the ones
the hook saw.
"""

from __future__ import annotations

import torch
from eager_helpers import decoder_layers, model, prompt_ids

from interp_core.address import Address


def test_a_capture_mutated_in_place_afterwards_is_taken_again_with_a_copy() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    layers = decoder_layers(m.hf_model)
    seen: list[torch.Tensor] = []

    def remember(module, args, output):  # the reference: a copy at the moment layer 0 returns
        hidden = output[0] if isinstance(output, tuple) else output
        seen.append(hidden.detach().clone())

    def scribble(module, args, kwargs):  # layer 1 then overwrites its input in place
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        hidden.mul_(3.0)

    handles = [
        layers[0].register_forward_hook(remember),
        layers[1].register_forward_pre_hook(scribble, with_kwargs=True),
    ]
    try:
        cache = m.run_with_cache(ids, [Address("resid_post", 0)])
    finally:
        for handle in handles:
            handle.remove()
    # Two forwards ran (the first found its capture mutated); the copy equals the hook's view.
    assert len(seen) == 2
    assert torch.equal(cache[Address("resid_post", 0)], seen[-1])


def test_an_ordinary_capture_runs_the_model_once() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    calls = []
    handle = m.hf_model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        m.run_with_cache(ids, [Address("resid_post", layer) for layer in range(m.n_layers)])
    finally:
        handle.remove()
    assert calls == [1]
