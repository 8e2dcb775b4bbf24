"""The lens-space ops and scopes on vLLM: hooked and compiled `vllm-static`, against formulas.

Each new op, applied at resid_post.0 of the tiny Llama (float32), must change the captured
rows exactly as its formula written here by hand says, per row of a batch of two prompts (the
unsteered capture is the `h`); the static tier runs it under vLLM's compiled graph. 32
concurrent static requests with different ops, directions and scopes must each equal their
solo run; prompt-only steering must equal the prompt's positions listed explicitly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from vllm_helpers import relative_diff, seeded_vector

from interp_core import sync
from interp_core.steering import SteeringSpec
from interp_core.testing.engines import warmed
from interp_testmodels.steering_formulas import lens_op_by_hand

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_vllm")]

POINT, READ = "resid_post.0", "resid_post.0"
TOL = 1e-5


@pytest.fixture(scope="module")
def static(llama: str) -> Iterator[Any]:
    yield from warmed(
        llama,
        backend="vllm-static",
        dtype="float32",
        max_model_len=128,
        # The patch tests' points too: a sweep reads the clean run where it patches (resid_pre
        # and z at every layer) and the logits.
        static_points=[
            *("resid_post.0", "resid_post.1", "resid_pre.0", "resid_pre.1", "z.0", "z.1"),
            "lm_head",
        ],
        static_writes=[
            "resid_post.0",
            "resid_post.1",
            "resid_pre.0",
            "resid_pre.1",
            "z.0",
            "z.1",
            "value.0",
            "value.1",
            "mlp_act.0",
            "mlp_act.1",
        ],
    )


@pytest.fixture(scope="module")
def hooked(llama: str) -> Iterator[Any]:
    yield from warmed(llama, backend="vllm", dtype="float32", max_model_len=128)


_by_hand = lens_op_by_hand


def _ops(width: int) -> list[SteeringSpec]:
    v, t = seeded_vector(width, 11), seeded_vector(width, 12)
    return [
        SteeringSpec(POINT, v, "norm_add", scale=0.9, max_fraction=0.3),
        SteeringSpec(POINT, v, "norm_add", scale=0.2),
        SteeringSpec(POINT, v, "ablate"),
        SteeringSpec(POINT, v, "swap", target=t),
        SteeringSpec(POINT, v, "add", scale=3.0, normalize=True),
    ]


def _prompts() -> list[list[int]]:
    g = torch.Generator().manual_seed(3)
    return [torch.randint(3, 400, (7,), generator=g).tolist() for _ in range(2)]


@pytest.mark.parametrize("backend", ["hooked", "static"])
def test_each_new_op_equals_its_formula_per_row_of_a_batch(
    backend: str, request: pytest.FixtureRequest
) -> None:
    model = request.getfixturevalue(backend)
    prompts = _prompts()
    plain = sync.capture(model, prompts, [READ])[READ]
    for spec in _ops(model.d_model):
        got = sync.capture(model, prompts, [READ], steering=spec)[READ]
        want = _by_hand(spec, plain)
        assert relative_diff(got.double(), want) <= TOL, (backend, spec.op)
        assert not torch.allclose(got, plain), spec.op


def _mixed(seed: int, width: int) -> tuple[list[int], list[SteeringSpec]]:
    g = torch.Generator().manual_seed(100 + seed)
    prompt = torch.randint(3, 400, (4 + seed % 5,), generator=g).tolist()
    v, t = seeded_vector(width, seed), seeded_vector(width, seed + 50)
    point = ("resid_post.0", "resid_post.1")[seed % 2]
    scope: dict[str, Any] = [{}, {"generated": False}, {"skip_special": True}][seed % 3]
    kind = seed % 6
    if kind == 0:
        specs = [SteeringSpec(point, v, "norm_add", scale=0.1 * seed, max_fraction=0.5, **scope)]
    elif kind == 1:
        specs = [SteeringSpec(point, v, "ablate", **scope)]
    elif kind == 2:
        specs = [SteeringSpec(point, v, "swap", target=t, **scope)]
    elif kind == 3:
        specs = [
            SteeringSpec(point, v, "add", scale=2.0, normalize=True, **scope),
            SteeringSpec(point, t, "orthogonal", scale=0.5),
        ]
    elif kind == 4:
        specs = [SteeringSpec(point, v, "projection_cap", min=-0.1, max=0.1 * seed, **scope)]
    else:
        specs = []
    return prompt, specs


def test_thirty_two_concurrent_static_requests_each_equal_their_solo_run(static: Any) -> None:
    requests = [_mixed(seed, static.d_model) for seed in range(32)]
    read = ["resid_post.1"]

    async def together() -> list[Any]:
        return await asyncio.gather(
            *(
                static.capture_generation(
                    [p], read, max_new_tokens=4, temperature=0.0, steering=s or None
                )
                for p, s in requests
            )
        )

    results = sync.run(static, together)
    for (prompt, steering), (gen, cache) in zip(requests, results, strict=True):
        solo_gen, solo = sync.capture_generation(
            static, [prompt], read, max_new_tokens=4, temperature=0.0, steering=steering or None
        )
        assert gen.token_ids == solo_gen.token_ids, steering
        assert relative_diff(cache[read[0]], solo[read[0]]) <= TOL, steering


@pytest.mark.parametrize("backend", ["hooked", "static"])
def test_prompt_only_equals_the_prompts_positions_listed(
    backend: str, request: pytest.FixtureRequest
) -> None:
    model = request.getfixturevalue(backend)
    prompt = _prompts()[0]
    v = seeded_vector(model.d_model, 21)
    scoped = SteeringSpec(POINT, v, "norm_add", scale=0.5, generated=False)
    listed = SteeringSpec(POINT, v, "norm_add", scale=0.5, positions=range(len(prompt)))
    run = {"max_new_tokens": 5, "temperature": 0.0}
    gen_a, a = sync.capture_generation(model, [prompt], [READ], steering=scoped, **run)
    gen_b, b = sync.capture_generation(model, [prompt], [READ], steering=listed, **run)
    assert gen_a.token_ids == gen_b.token_ids
    assert torch.equal(a[READ], b[READ])
    # Generated positions untouched: they equal an unsteered run fed the same tokens.
    full = [*prompt, *gen_a.token_ids[:-1]]
    plain = sync.capture(model, [full], [READ])[READ]
    tail = slice(len(prompt), None)
    assert relative_diff(a[READ][:, tail], plain[:, tail]) <= TOL
    assert not torch.allclose(a[READ][:, : len(prompt)], plain[:, : len(prompt)])


# --- patches and sweeps (interp_core.patching): this module's engines, no engine of their own --
@pytest.mark.parametrize("backend", ["hooked", "static"])
def test_patch_sweeps_on_vllm_equal_eager(
    backend: str, eager: Any, request: pytest.FixtureRequest
) -> None:
    from interp_core import Ablation, LogitDiff
    from interp_torch.patching import patch_sweep

    model = request.getfixturevalue(backend)  # vllm-static: patches in its compiled op table
    clean = eager.to_tokens("the cat sat on the mat today")
    corrupt = eager.to_tokens("the dog ran in the park today")
    metric = LogitDiff(int(clean[0, 3]), int(corrupt[0, 3]))
    for point, per in (("resid_pre", "position"), ("z", "head")):
        ours = patch_sweep(model, clean, corrupt, metric, point=point, per=per)
        want = patch_sweep(eager, clean, corrupt, metric, point=point, per=per)
        assert ours.shape == want.shape and float(want.std()) > 1e-3
        assert torch.allclose(ours, want, atol=1e-4, rtol=0), (
            point,
            float((ours - want).abs().max()),
        )
    # A kv-head zero ablation and a neuron ablation travel to the workers like any write.
    writes = [Ablation("value.1", heads=[1]), Ablation("mlp_act.0", neurons=[2, 5], positions=[3])]
    got = sync.capture(model, corrupt, ["lm_head"], steering=writes)["lm_head"]
    want = sync.capture(eager, corrupt, ["lm_head"], steering=writes)["lm_head"]
    assert torch.allclose(torch.as_tensor(got), want, atol=1e-4, rtol=0)


@pytest.mark.parametrize("backend", ["hooked", "static"])
def test_per_row_patches_on_vllm_equal_eager(
    backend: str, eager: Any, request: pytest.FixtureRequest
) -> None:
    """Each row of a batch carries its own patch (positions, values, kv heads, query heads,
    neurons); eager's batched result was checked against hand hooks per row. On vllm-static a
    patch's positions share one level of the compiled op table."""
    from interp_core import Ablation, patch_from
    from interp_core.errors import SteeringSpecError

    model = request.getfixturevalue(backend)
    clean = eager.to_tokens("the cat sat on the mat today")
    corrupt = eager.to_tokens("the dog ran in the park today")
    cache = sync.capture(eager, clean, ["resid_pre.1", "value.0", "z.1"])
    writes = [
        patch_from(cache, "resid_pre.1", [2, 4], batch_rows=0),
        patch_from(cache, "value.0", heads=[1], batch_rows=[0]),  # kv head 1 of 2
        patch_from(cache, "z.1", [1, 3], heads=[0, 2], batch_rows=1),
        Ablation("mlp_act.1", neurons=[3, 7], positions=[5], batch_rows=1),
    ]
    batch = torch.cat([corrupt, clean, corrupt])  # row 2 takes no patch
    got = torch.as_tensor(sync.capture(model, batch, ["lm_head"], steering=writes)["lm_head"])
    want = sync.capture(eager, batch, ["lm_head"], steering=writes)["lm_head"]
    assert torch.allclose(got, want, atol=1e-4, rtol=0)
    plain = sync.capture(eager, batch, ["lm_head"])["lm_head"]
    assert (want[0] - plain[0]).abs().max() > 1e-3 and (want[1] - plain[1]).abs().max() > 1e-3
    assert torch.allclose(got[2], plain[2], atol=1e-4, rtol=0)
    with pytest.raises(SteeringSpecError, match="names batch rows"):
        sync.capture(model, batch, ["lm_head"], steering=patch_from(cache, "z.1", batch_rows=3))


def test_a_per_row_steer_on_vllm_static_applies_to_its_row(static: Any) -> None:
    prompts = [[1, 2, 3, 4], [1, 5, 6, 7]]
    vector = seeded_vector(static.facts.d_model, 3)
    spec = SteeringSpec(POINT, vector, scale=2.0, batch_rows=1)
    got = sync.capture(static, prompts, [READ], steering=spec)[READ]
    plain = sync.capture(static, prompts, [READ])[READ]
    solo = SteeringSpec(POINT, vector, scale=2.0)
    alone = sync.capture(static, [prompts[1]], [READ], steering=solo)[READ]
    assert relative_diff(got[0], plain[0]) <= TOL
    assert relative_diff(got[1], alone[0]) <= TOL
    assert relative_diff(got[1], plain[1]) > 1e-3


def test_a_patch_at_an_undeclared_static_point_is_refused_naming_the_declaration(
    static: Any,
) -> None:
    from interp_core import Patch
    from interp_core.errors import CapabilityUnsupported

    patch = Patch("resid_mid.1", [0.0] * static.facts.d_model, positions=[1])
    with pytest.raises(CapabilityUnsupported, match="static_writes="):
        sync.capture(static, [[1, 2, 3, 4]], [READ], steering=patch)
