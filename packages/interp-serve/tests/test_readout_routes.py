"""The read-out routes, through the remote backend and as raw HTTP, against in-process eager.

A server with a lens folder (`--lens-dir`) serves the tiny Llama; every answer is compared with
the same call on the in-process model (`local`) and, for the fitted lens, with `decode(J_bar @ h)`
written here. Tensors cross as safetensors both ways; a lens goes up as our safetensors layout or
is named by its file on the server, in each of the three layouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serve_helpers
import torch

from interp_core import load_model, sync
from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.readouts import DirectionSet, LensSpec, TopTokens
from interp_core.steering import SteeringSpec
from interp_serve import tensors as tensor_io


def _lens(d: int, seed: int = 0) -> dict[int, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {layer: torch.eye(d) + 0.3 * torch.randn(d, d, generator=generator) for layer in (0, 1)}


@pytest.fixture(scope="module")
def lens_dir(tmp_path_factory: pytest.TempPathFactory, local: Any) -> Path:
    from interp_torch.lens import save_lens

    folder = tmp_path_factory.mktemp("lenses")
    lens = _lens(local.d_model)
    torch.save({"J": lens}, folder / "j.pt")
    torch.save({"parameters": {"jacobians": lens}}, folder / "jpp.pt")
    save_lens(folder / "ours.safetensors", lens, local.facts)
    return folder


@pytest.fixture(scope="module")
def lens_server(
    model_path: Path, lens_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("lens-logs")
    yield from serve_helpers.serving(
        model_path, logs, name="lens", args=("--lens-dir", str(lens_dir))
    )


@pytest.fixture(scope="module")
def far(lens_server: Any) -> Iterator[Any]:
    model = load_model(lens_server.url, backend="remote", api_key=serve_helpers.KEY)
    yield model
    sync.shutdown(model)


def test_weight_rows_and_decoding_equal_in_process(far: Any, local: Any) -> None:
    ids = [4, 0, 999, 4]
    assert torch.equal(sync.unembed_rows(far, ids), sync.unembed_rows(local, ids))
    assert torch.equal(sync.embed_rows(far, ids), local.hf_model.get_input_embeddings().weight[ids])
    torch.manual_seed(0)
    residuals = torch.randn(2, 3, local.d_model)
    assert torch.equal(
        sync.decode_residuals(far, residuals), sync.decode_residuals(local, residuals)
    )
    top = sync.decode_residuals(far, residuals, top_k=3)
    want = torch.softmax(sync.decode_residuals(local, residuals), dim=-1).topk(3)
    assert isinstance(top, TopTokens)
    assert torch.equal(top.ids, want.indices)
    torch.testing.assert_close(top.probs, want.values, atol=1e-6, rtol=0)
    with pytest.raises(InvalidArgument, match="not a token id"):
        sync.unembed_rows(far, [1000])


def test_project_by_hand_with_steering(far: Any, local: Any) -> None:
    tokens = local.to_tokens("The quick brown fox").repeat(2, 1)
    tokens[1, 1] = 9
    point = Address("resid_post", 1)
    torch.manual_seed(1)
    vectors, bias = torch.randn(4, local.d_model), torch.randn(4)
    steer = SteeringSpec("resid_post.0", torch.randn(local.d_model).tolist(), scale=2.0)
    sets = [DirectionSet(point, vectors), DirectionSet(point, vectors, bias, "relu")]
    plain, probe = sync.project(far, tokens, sets, steering=[steer])
    rows = local.run_with_cache(tokens, [point], steering=[steer])[point]
    torch.testing.assert_close(plain, rows @ vectors.T, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probe, (rows @ vectors.T + bias).clamp_min(0), atol=1e-5, rtol=1e-5)
    unsteered = sync.project(far, tokens, sets[:1])[0]
    assert (unsteered - plain).abs().max() > 1e-3


def _by_hand(local: Any, tokens: Any, lens: dict[int, torch.Tensor]) -> dict[int, Any]:
    cache = local.run_with_cache(tokens, [Address("resid_post", layer) for layer in lens])
    out = {}
    for layer, matrix in lens.items():
        h = cache[Address("resid_post", layer)][0]
        out[layer] = torch.softmax(sync.decode_residuals(local, h @ matrix.T), dim=-1).topk(3)
    return out


def _assert_lens(result: Any, want: dict[int, Any]) -> None:
    for layer, best in want.items():
        for position, row in enumerate(result.predictions[layer]):
            assert [p.token_id for p in row] == best.indices[position].tolist()
            got = torch.tensor([p.prob for p in row])
            torch.testing.assert_close(got, best.values[position], atol=1e-5, rtol=0)


def test_a_fitted_lens_uploaded_or_named_equals_decode_of_j_bar_h(far: Any, local: Any) -> None:
    d = local.d_model
    tokens = local.to_tokens("The quick brown fox jumps")
    spec = LensSpec([0, 1], jacobian=True, jacobian_set="up")
    lens = _lens(d, seed=7)
    assert sync.set_lens_jacobians(far, lens, name="up") == 2 * d * d * 4
    assert far.lens_sets()["up"] == [0, 1]
    _assert_lens(sync.logit_lens(far, tokens, spec, top_k=3), _by_hand(local, tokens, lens))
    on_disk = _by_hand(local, tokens, _lens(d))
    for name in ("j.pt", "jpp.pt", "ours.safetensors"):
        sync.run(far, lambda n=name: far.set_lens_jacobians(None, name="up", server_file=n))
        _assert_lens(sync.logit_lens(far, tokens, spec, top_k=3), on_disk)
    sync.set_lens_jacobians(far, None, name="up")
    with pytest.raises(InvalidArgument, match="no lens set 'up'"):
        sync.logit_lens(far, tokens, spec)


def test_wrong_lenses_and_bodies_are_refused(far: Any, lens_server: Any, local: Any) -> None:
    d = local.d_model
    with pytest.raises(InvalidArgument, match=rf"needs \[{d}, {d}\]"):
        sync.set_lens_jacobians(far, {0: torch.eye(d + 1)})
    headers = {**lens_server.headers(), "Content-Type": "application/octet-stream"}
    with lens_server.client() as client:
        wrong = tensor_io.encode({"J.0": torch.eye(d + 1)})
        answer = client.put("/v1/lens_jacobians/x", content=wrong, headers=headers)
        assert answer.status_code == 400 and f"[{d}, {d}]" in answer.json()["error"]["message"]
        answer = client.post("/v1/decode_residuals", content=b"not safetensors", headers=headers)
        assert answer.status_code == 400
        answer = client.put(
            "/v1/lens_jacobians/x", json={"file": "../j.pt"}, headers=lens_server.headers()
        )
        assert answer.status_code == 400 and "no paths" in answer.json()["error"]["message"]
        residuals = tensor_io.encode({"residuals": torch.zeros(2, d)}, {"interp": '{"top_k": 2}'})
        answer = client.post("/v1/decode_residuals", content=residuals, headers=headers)
        got = tensor_io.decode(answer.content, "torch")
        assert set(got) == {"ids", "probs"} and got["ids"].shape == (2, 2)
        assert client.get("/v1/lens_jacobians", headers=lens_server.headers()).json() == {
            "sets": {}
        }


def test_the_session_server_holds_no_lens_folder(remote: Any) -> None:
    with pytest.raises(CapabilityUnsupported, match="without --lens-dir"):
        sync.run(remote, lambda: remote.set_lens_jacobians(None, server_file="j.pt"))
