"""At num_gpus=2 (tensor parallelism on vLLM's CPU build), does a capture look like num_gpus=1?

vLLM's CPU build runs tensor parallelism across CPU workers; the backend binds each worker to its
share of the allowed CPUs (one NUMA node here). On the tiny Llama in float32: every served point
at every layer — residual-width points all-reduced, head- and neuron-sharded points (z, value,
mlp_pre, mlp_act, the attention patterns rebuilt from q/k) reassembled from both ranks — equals
the eager backend; an add at a sharded point lands on each rank's slice; the worker-side lens and
greedy generation match; a projection at a sharded point and lm_head are refused with reasons.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_core.testing.engines import warmed
from interp_testmodels.families import build_family

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_vllm")]

PROMPT = "The quick brown fox jumps over the lazy dog"
ATOL = 1e-5  # relative above magnitude 1, as in test_vllm_backend.py


@pytest.fixture(scope="module")
def eager() -> InterpModel:
    return load_model(str(build_family("llama")), backend="eager", dtype="float32")


@pytest.fixture(scope="module")
def engine(eager: InterpModel) -> Iterator[Any]:
    yield from warmed(
        eager.model_id, backend="vllm", dtype="float32", max_model_len=128, num_gpus=2
    )


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item() <= ATOL * max(1.0, b.abs().max().item())


def test_every_point_matches_eager_across_two_ranks(engine: Any, eager: InterpModel) -> None:
    tokens = eager.to_tokens(PROMPT)
    points = [
        f"{spec.name}.{layer}" if spec.is_layer_point else spec.name
        for spec in engine.points()
        for layer in (range(engine.n_layers) if spec.is_layer_point else [None])
        if spec.name != "lm_head"
    ]
    assert {"z.1", "value.0", "mlp_act.1", "mlp_pre.0", "attn_probs.1"} <= set(points)
    got = sync.capture(engine, tokens, points)
    want = sync.capture(eager, tokens, points)
    bad = [p for p in points if not _close(got[p], want[p])]
    assert not bad, bad


@pytest.mark.parametrize("point", ["z.1", "mlp_act.0", "resid_post.0"])
def test_add_at_a_sharded_point_matches_eager(engine: Any, eager: InterpModel, point: str) -> None:
    tokens = eager.to_tokens(PROMPT)
    width = int(sync.capture(eager, tokens, [point])[point].shape[-1])
    vector = torch.randn(width, generator=torch.Generator().manual_seed(7))
    spec = SteeringSpec(point, vector, "add", scale=2.0)
    read = [point, "resid_post.1"]
    got = sync.capture(engine, tokens, read, steering=spec)
    want = sync.capture(eager, tokens, read, steering=spec)
    for p in read:
        assert _close(got[p], want[p]), p


def test_lens_and_generation_match_eager(engine: Any, eager: InterpModel) -> None:
    tokens = eager.to_tokens(PROMPT)
    got = sync.logit_lens(engine, tokens, top_k=3)
    want = sync.logit_lens(eager, tokens, top_k=3)
    for layer in range(engine.n_layers):
        assert [p.token_id for p in got.top(layer)] == [p.token_id for p in want.top(layer)]
    mine = sync.generate(engine, tokens, max_new_tokens=8, temperature=0.0)
    theirs = sync.generate(eager, tokens, max_new_tokens=8, temperature=0.0)
    assert mine.token_ids == theirs.token_ids


def test_what_cannot_be_split_is_refused(engine: Any, eager: InterpModel) -> None:
    tokens = eager.to_tokens(PROMPT)
    with pytest.raises(PointUnsupported, match="vocabulary"):
        sync.capture(engine, tokens, ["lm_head"])
    projection = SteeringSpec("z.0", [0.2] * engine.facts.z_width, "orthogonal", scale=0.0)
    with pytest.raises(CapabilityUnsupported, match="whole rows"):
        sync.capture(engine, tokens, ["resid_post.1"], steering=projection)
