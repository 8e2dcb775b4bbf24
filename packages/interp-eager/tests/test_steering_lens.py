"""The lens-space ops and scopes on eager: each op equals its formula by hand, per row.

The formulas are written out here in float64 on the unsteered capture `h` of a padded batch of
two prompts (so rows differ in norm and direction); the scopes equal the positions they stand
for, and the special-token preset leaves the BOS position alone.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from interp_core import load_model, sync
from interp_core.steering import SteeringSpec
from interp_testmodels.families import build_family
from interp_testmodels.steering_formulas import lens_op_by_hand

POINT = "resid_post.1"


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model(str(build_family("llama")), backend="eager", dtype="float32")


def _vector(width: int, seed: int) -> list[float]:
    return torch.randn(width, generator=torch.Generator().manual_seed(seed)).tolist()


_by_hand = lens_op_by_hand


def test_each_new_op_equals_its_formula_per_row(model: Any) -> None:
    width = model.d_model
    v, t = _vector(width, 1), _vector(width, 2)
    tokens = torch.randint(3, 400, (2, 6), generator=torch.Generator().manual_seed(0))
    plain = sync.capture(model, tokens, [POINT])[POINT]
    specs = [
        SteeringSpec(POINT, v, "norm_add", scale=0.8, max_fraction=0.25),
        SteeringSpec(POINT, v, "norm_add", scale=-0.1),
        SteeringSpec(POINT, v, "ablate"),
        SteeringSpec(POINT, v, "swap", target=t),
        SteeringSpec(POINT, v, "add", scale=2.0, normalize=True),
    ]
    for spec in specs:
        got = sync.capture(model, tokens, [POINT], steering=spec)[POINT].double()
        want = _by_hand(spec, plain)
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), spec.op
        assert not torch.allclose(got, plain.double(), atol=1e-3), spec.op


def test_prompt_only_equals_the_prompts_positions_and_leaves_generated_ones(model: Any) -> None:
    prompt = model.to_tokens("The quick brown fox")
    n = prompt.shape[1]
    v = _vector(model.d_model, 3)
    scoped = SteeringSpec(POINT, v, "norm_add", scale=0.5, generated=False)
    listed = SteeringSpec(POINT, v, "norm_add", scale=0.5, positions=list(range(n)))
    run = {"max_new_tokens": 5, "temperature": 0.0}
    gen_a, a = sync.capture_generation(model, prompt, [POINT], steering=scoped, **run)
    gen_b, b = sync.capture_generation(model, prompt, [POINT], steering=listed, **run)
    assert gen_a.token_ids == gen_b.token_ids
    assert torch.equal(a[POINT], b[POINT])
    steered_everywhere = SteeringSpec(POINT, v, "norm_add", scale=0.5)
    _, c = sync.capture_generation(model, prompt, [POINT], steering=steered_everywhere, **run)
    assert not torch.allclose(a[POINT][:, n:], c[POINT][:, n:])


def test_the_special_token_preset_leaves_bos_alone(model: Any) -> None:
    prompt = model.to_tokens("The quick brown fox")
    bos = model.tokenizer.bos_token_id
    assert int(prompt[0, 0]) == bos
    v = _vector(model.d_model, 4)
    skipping = SteeringSpec(POINT, v, "ablate", skip_special=True)
    listed = SteeringSpec(POINT, v, "ablate", positions=list(range(1, prompt.shape[1])))
    got = sync.capture(model, prompt, [POINT], steering=skipping)[POINT]
    want = sync.capture(model, prompt, [POINT], steering=listed)[POINT]
    plain = sync.capture(model, prompt, [POINT])[POINT]
    assert torch.equal(got, want)
    assert torch.equal(got[:, 0], plain[:, 0])
