"""The remote backend returns what the same backend returns in-process.

The server runs the eager backend on the tiny Llama; `local` is that model loaded in this
process. Every work method is compared value for value (within 1e-6; in practice bit-equal, the
same float32 arithmetic on the same machine), with and without steering.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import PointUnsupported, SteeringSpecError, UnknownPoint
from interp_core.steering import SteeringSpec, steer
from interp_testmodels.tokenizer import TEST_PROMPT

ATOL = 1e-6
POINTS = [
    "embeddings",
    "resid_pre.0",
    "attn_probs.1",
    "z.0",
    "mlp_act.1",
    "resid_post.1",
    "lm_head",
]


def _vector(width: int) -> list[float]:
    return [math.sin(0.7 * i) for i in range(width)]


def _close(a: Any, b: Any) -> None:
    assert tuple(a.shape) == tuple(b.shape)
    assert a.dtype == b.dtype
    assert torch.allclose(a, b, atol=ATOL, rtol=0), float((a - b).abs().max())


def test_facts_and_points_match(remote: Any, local: Any) -> None:
    assert remote.backend_name == "remote"
    assert remote.server_backend == "eager"
    assert remote.facts == local.facts
    assert remote.points() == local.points()
    for point in ("resid_post.1", "attn_probs.0", "resid_post.2", "expert_weights.0"):
        assert remote.supports(point) == local.supports(point)


def test_tokens_match(remote: Any, local: Any) -> None:
    assert torch.equal(remote.to_tokens(TEST_PROMPT), local.to_tokens(TEST_PROMPT))
    assert remote.to_str_tokens(TEST_PROMPT) == local.to_str_tokens(TEST_PROMPT)
    ids = local.to_tokens(TEST_PROMPT)
    assert remote.to_string(ids) == local.to_string(ids)
    assert remote.to_tokens(TEST_PROMPT, prepend_bos=False).shape[1] == ids.shape[1] - 1


def test_capture_matches(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    mine = sync.capture(remote, ids, POINTS)
    theirs = sync.capture(local, ids, POINTS)
    assert [str(a) for a in mine] == [str(a) for a in theirs]
    for address in theirs:
        _close(mine[address], theirs[address])


def test_steered_capture_matches_and_steers(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    spec = SteeringSpec("resid_post.0", _vector(local.d_model), scale=2.0, positions=(1, 2))
    points = ["resid_post.0", "lm_head"]
    mine = sync.capture(remote, ids, points, steering=spec)
    theirs = sync.capture(local, ids, points, steering=spec)
    plain = sync.capture(local, ids, points)
    for point in points:
        _close(mine[point], theirs[point])
    assert not torch.allclose(theirs["lm_head"], plain["lm_head"])
    with steer(remote, spec):
        inside = sync.capture(remote, ids, points)
    _close(inside["lm_head"], theirs["lm_head"])


def test_generation_matches(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    spec = SteeringSpec("resid_post.1", _vector(local.d_model), scale=0.5)
    for kwargs in (
        {"max_new_tokens": 6, "temperature": 0.0},
        {"max_new_tokens": 6, "temperature": 0.9, "seed": 7, "top_k": 20, "top_p": 0.9},
        {"max_new_tokens": 5, "temperature": 0.0, "steering": spec},
    ):
        mine = sync.generate(remote, ids, **kwargs)
        theirs = sync.generate(local, ids, **kwargs)
        assert mine == theirs
        steps = list(sync.generate_stream(remote, ids, **kwargs))
        local_steps = list(sync.generate_stream(local, ids, **kwargs))
        assert [(s.token_id, s.text, s.finished, s.finish_reason) for s in steps] == [
            (s.token_id, s.text, s.finished, s.finish_reason) for s in local_steps
        ]
        for a, b in zip(steps, local_steps, strict=True):
            assert (a.logprob is None) == (b.logprob is None)
            if a.logprob is not None:
                assert abs(a.logprob - b.logprob) <= ATOL


def test_capture_generation_matches(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    points = ["resid_post.1", "attn_out.0"]
    mine_gen, mine = sync.capture_generation(remote, ids, points, max_new_tokens=4)
    theirs_gen, theirs = sync.capture_generation(local, ids, points, max_new_tokens=4)
    assert mine_gen == theirs_gen
    for point in points:
        _close(mine[point], theirs[point])


def test_logit_lens_matches(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    mine = sync.logit_lens(remote, ids, top_k=4)
    theirs = sync.logit_lens(local, ids, top_k=4)
    assert mine.layers == theirs.layers
    for layer in theirs.layers:
        for row_mine, row_theirs in zip(
            mine.predictions[layer], theirs.predictions[layer], strict=True
        ):
            assert [(p.token_id, p.token) for p in row_mine] == [
                (p.token_id, p.token) for p in row_theirs
            ]
            for p, q in zip(row_mine, row_theirs, strict=True):
                assert abs(p.prob - q.prob) <= ATOL


def test_capture_residuals_match(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    mine = sync.capture_residuals(remote, ids)
    theirs = sync.capture_residuals(local, ids)
    assert sorted(mine) == sorted(theirs)
    for layer in theirs:
        _close(mine[layer], theirs[layer])


@pytest.mark.parametrize(
    ("point", "error"),
    [("resid_post.7", PointUnsupported), ("resid_postt.0", UnknownPoint)],
)
def test_refusals_keep_class_and_message(remote: Any, local: Any, point: str, error: type) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    with pytest.raises(error) as there:
        sync.capture(remote, ids, [Address.parse("resid_post.0"), point])
    with pytest.raises(error) as here:
        sync.capture(local, ids, [Address.parse("resid_post.0"), point])
    assert type(there.value) is type(here.value)
    assert str(there.value) == str(here.value)


def test_steering_refusal_keeps_class_and_message(remote: Any, local: Any) -> None:
    ids = local.to_tokens(TEST_PROMPT)
    spec = SteeringSpec("resid_post.0", [1.0, 2.0, 3.0])
    with pytest.raises(SteeringSpecError) as there:
        sync.capture(remote, ids, ["resid_post.0"], steering=spec)
    with pytest.raises(SteeringSpecError) as here:
        sync.capture(local, ids, ["resid_post.0"], steering=spec)
    assert str(there.value) == str(here.value)


def test_numpy_tensors_on_request(server: Any, local: Any) -> None:
    import numpy as np

    from interp_core import load_model

    model = load_model(server.url, backend="remote", api_key=server.keys[0], tensor_type="numpy")
    try:
        ids = local.to_tokens(TEST_PROMPT)
        mine = sync.capture(model, ids, ["resid_post.1"])["resid_post.1"]
        assert isinstance(mine, np.ndarray)
        theirs = sync.capture(local, ids, ["resid_post.1"])["resid_post.1"]
        assert np.array_equal(mine, theirs.numpy())
    finally:
        sync.shutdown(model)


def test_every_op_round_trips_through_the_remote_backend(remote: Any, local: Any) -> None:
    # Ops come from the one place they are defined (interp_core.steering.OP_FIELDS), so a new op
    # is covered here the day it exists; clamp's encoder, bias and threshold were once dropped.
    import json

    from interp_core.steering import ALL_OPS
    from interp_core.testing.writes import example_specs
    from interp_core.writes import spec_from_wire, spec_to_wire

    ids = local.to_tokens(TEST_PROMPT)
    points = ["resid_post.0", "resid_post.1"]
    plain = sync.capture(local, ids, points)
    specs = example_specs("resid_post.0", local.d_model)
    assert [s.op for s in specs] == list(ALL_OPS)
    for spec in specs:
        back = spec_from_wire(json.loads(json.dumps(spec_to_wire(spec))))
        for name in spec.__dataclass_fields__:
            assert getattr(back, name) == getattr(spec, name), (spec.op, name)
        mine = sync.capture(remote, ids, points, steering=spec)
        theirs = sync.capture(local, ids, points, steering=spec)
        for point in points:
            assert torch.equal(mine[point], theirs[point]), (spec.op, point)
        assert not torch.equal(theirs["resid_post.1"], plain["resid_post.1"]), spec.op


def test_lens_space_ops_and_scopes_over_http_equal_their_formulas(remote: Any, local: Any) -> None:
    # Over the wire, each new op changes the rows as its formula by hand says, and the scopes
    # (resolved by the server's backend) equal the positions they stand for.
    ids = local.to_tokens(TEST_PROMPT)
    point = "resid_post.0"
    plain = sync.capture(local, ids, [point])[point].double()
    v = torch.tensor(_vector(local.d_model), dtype=torch.float64)
    t = torch.roll(v, 3) + 0.1
    d, t_unit = v / v.norm(), t / t.norm()
    along = (plain @ d).unsqueeze(-1)
    size = plain.norm(dim=-1, keepdim=True)
    cases = [
        (SteeringSpec(point, v.tolist(), "ablate"), plain - along * d),
        (SteeringSpec(point, v.tolist(), "swap", target=t.tolist()), plain + along * (t_unit - d)),
        (
            SteeringSpec(point, v.tolist(), "norm_add", scale=0.7, max_fraction=0.2),
            plain + 0.2 * size * d,
        ),
        (SteeringSpec(point, v.tolist(), "add", scale=2.0, normalize=True), plain + 2.0 * d),
    ]
    for spec, want in cases:
        got = sync.capture(remote, ids, [point], steering=spec)[point].double()
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), spec.op
    n = ids.shape[1]
    scoped = SteeringSpec(point, v.tolist(), "norm_add", scale=0.5, generated=False)
    listed = SteeringSpec(point, v.tolist(), "norm_add", scale=0.5, positions=list(range(n)))
    a = sync.generate(remote, ids, max_new_tokens=4, temperature=0.0, steering=scoped)
    b = sync.generate(local, ids, max_new_tokens=4, temperature=0.0, steering=listed)
    assert a.token_ids == b.token_ids
