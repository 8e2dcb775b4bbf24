"""The lens over a generation on eager: streamed per forward, exact by hand, refused up front.

Each step comes from the forward that produced it: after the first step only the prompt's forward
has run, and each later forward adds its steps. A fitted lens reads `decode(J_bar @ h)` of the
row `capture_generation` returns for that position. Every refusal lands before a forward runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from eager_helpers import model, prompt_ids

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import LensSpec


def _forwards(m: Any) -> tuple[list[int], Any]:
    count = [0]
    hook = m.hf_model.register_forward_pre_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    return count, hook


def test_steps_stream_as_each_forward_runs() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    count, hook = _forwards(m)
    seen: list[tuple[int, int]] = []

    async def run() -> None:
        stream = m.generate_with_lens(ids, [LensSpec([0])], max_new_tokens=4, temperature=0.0)
        async for step in stream:
            seen.append((step.position, count[0]))

    try:
        asyncio.run(run())
    finally:
        hook.remove()
    prompt = ids.shape[1]
    # The prompt's positions after its one forward; each generated position after its own.
    assert seen[:prompt] == [(p, 1) for p in range(prompt)]
    assert seen[prompt:] == [(prompt + n, 2 + n) for n in range(3)]


def test_a_fitted_lens_is_decode_of_j_bar_h_per_position() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    generator = torch.Generator().manual_seed(5)
    d = m.d_model
    lens = {1: torch.eye(d) + 0.3 * torch.randn(d, d, generator=generator)}
    sync.set_lens_jacobians(m, lens, name="by-hand")
    try:
        steps = list(
            sync.generate_with_lens(m, ids, ["by-hand"], top_n=4, max_new_tokens=3, temperature=0)
        )
    finally:
        sync.set_lens_jacobians(m, None, name="by-hand")
    _, cache = sync.capture_generation(m, ids, [Address("resid_post", 1)], max_new_tokens=3)
    h = cache[Address("resid_post", 1)][0]
    tree = m.tree
    with torch.no_grad():
        probs = torch.softmax(tree.lm_head(tree.final_norm(h @ lens[1].T)), dim=-1).topk(4)
    assert len(steps) == h.shape[0]
    for step in steps:
        assert step.top_ids[0].shape == (1, 4)
        assert step.top_ids[0][0].tolist() == probs.indices[step.position].tolist()
        torch.testing.assert_close(
            step.top_probs[0][0], probs.values[step.position], atol=1e-5, rtol=0
        )


@pytest.mark.parametrize(
    ("lenses", "options", "words"),
    [
        (["tuned"], {}, "names no lens of this model"),
        ([LensSpec([0], jacobian=True, jacobian_set="absent")], {}, "no lens set 'absent'"),
        ([LensSpec([0])], {"point": "mlp_out"}, "cannot decode mlp_out"),
        ([LensSpec([0])], {"skip_before": 99}, "skip_before=99 is past the last position"),
        ([LensSpec([0])], {"word_mask": [True] * 3}, "word_mask has 3 entries"),
        ([LensSpec([0])], {"top_n": 0}, "top_k=0"),
        ([], {}, "got no lens"),
        ([LensSpec([0])], {"colour": "red"}, "unknown arguments"),
    ],
)
def test_refusals_come_before_any_forward(lenses: Any, options: Any, words: str) -> None:
    m = model("llama")
    ids = prompt_ids(m)
    count, hook = _forwards(m)
    try:
        with pytest.raises(InvalidArgument, match=words):
            list(sync.generate_with_lens(m, ids, lenses, max_new_tokens=3, **options))
    finally:
        hook.remove()
    assert count[0] == 0


def test_a_batch_is_refused() -> None:
    m = model("llama")
    with pytest.raises(CapabilityUnsupported, match="one prompt at a time"):
        list(sync.generate_with_lens(m, prompt_ids(m).repeat(2, 1), ["logit"], max_new_tokens=2))
