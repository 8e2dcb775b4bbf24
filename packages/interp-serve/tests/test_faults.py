"""Faults get their documented status and leave the server serving.

Most run against a "tight" server started for this module with small limits (one slot, a
one-request queue, small body/capture/store caps, a short TTL); auth and request faults run
against the session's server. After every fault the server must still answer a real request.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import serve_helpers

from interp_core import load_model, sync
from interp_core.errors import InvalidArgument, PointUnsupported, UnknownPoint
from interp_serve.errors import HandleNotFound, Overloaded, StoreFull, TooLarge, Unauthorized

CAPTURE_CAP = 24_000
BUDGET = 44_000
BODY_CAP = 64 * 1024
TTL = 2.0


@pytest.fixture(scope="module")
def tight(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    logs = tmp_path_factory.mktemp("tight-logs")
    yield from serve_helpers.serving(
        model_path,
        logs,
        name="tight",
        args=(
            "--max-concurrency", "1",
            "--max-queue", "1",
            "--max-body-bytes", str(BODY_CAP),
            "--max-capture-bytes", str(CAPTURE_CAP),
            "--store-budget-bytes", str(BUDGET),
            "--activation-ttl", str(TTL),
        ),
    )  # fmt: skip


def _still_serving(server: Any) -> None:
    with server.client() as http:
        assert http.get("/health").json()["status"] == "ok"
        answer = http.post("/v1/tokenize", json={"text": "still here"})
    assert answer.status_code == 200
    assert answer.json()["tokens"][0][0] == 0  # BOS


def _error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()["error"]
    assert "Traceback" not in body["message"]
    return body


# --- request faults (session server) ---------------------------------------------------------
def test_malformed_json_is_400(server: Any) -> None:
    with server.client() as http:
        response = http.post(
            "/v1/capture", content=b'{"tokens": [1, 2', headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    body = _error(response)
    assert body["type"] == "InvalidArgument"
    assert "not valid JSON" in body["message"]
    _still_serving(server)


def test_unknown_field_is_refused(server: Any) -> None:
    with server.client() as http:
        response = http.post("/v1/capture", json={"tokens": [1], "points": [], "pickle": "x"})
    assert response.status_code == 400
    assert "pickle" in _error(response)["message"]


@pytest.mark.parametrize(
    ("point", "kind"), [("resid_postt.0", UnknownPoint), ("resid_post.9", PointUnsupported)]
)
def test_unknown_or_unserved_point_is_4xx_with_the_library_message(
    server: Any, local: Any, point: str, kind: type
) -> None:
    ids = local.to_tokens("abc").tolist()
    with server.client() as http:
        response = http.post("/v1/capture", json={"tokens": ids, "points": [point]})
    assert response.status_code == 400
    body = _error(response)
    assert body["type"] == kind.__name__
    with pytest.raises(kind) as here:
        sync.capture(local, ids, [point])
    assert body["message"] == str(here.value)
    _still_serving(server)


def test_bad_sampling_is_refused_in_the_core_words(server: Any, local: Any) -> None:
    from interp_core.sampling import check_sampling

    with pytest.raises(InvalidArgument) as core:
        check_sampling(max_new_tokens=1, temperature=-1.0)
    body = {"model": str(local.model_id), "prompt": "a", "max_tokens": 1, "temperature": -1.0}
    with server.client() as http:
        plain = http.post("/v1/completions", json=body)
        streamed = http.post("/v1/completions", json={**body, "stream": True})
    for response in (plain, streamed):
        assert response.status_code == 400
        assert _error(response)["message"] == str(core.value)


@pytest.mark.parametrize("header", [None, "Bearer wrong-key", "Basic dGVzdA=="])
def test_missing_or_wrong_key_is_401(server: Any, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.get(f"{server.url}/v1/models", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert _error(response)["type"] == "Unauthorized"
    assert httpx.get(f"{server.url}/health").status_code == 200  # probes need no key
    with pytest.raises(Unauthorized):
        load_model(server.url, backend="remote", api_key="wrong-key")
    assert "wrong-key" not in server.log_text() and server.keys[0] not in server.log_text()
    _still_serving(server)


def test_no_cors_headers_unless_configured(server: Any) -> None:
    response = httpx.options(
        f"{server.url}/v1/models",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in response.headers


def test_disconnect_mid_stream_aborts_the_engine_request(server: Any, local: Any) -> None:
    body = {"model": str(local.model_id), "prompt": [0, 5, 6], "max_tokens": 120,
            "temperature": 0, "stream": True}  # fmt: skip
    solo = sync.generate(local, [0, 5, 6], max_new_tokens=120, temperature=0.0)
    assert len(solo.token_ids) == 120  # so a whole stream really is 120 engine steps
    steps = serve_helpers.leave_mid_stream(server, body)
    assert 1 <= steps < 120
    assert serve_helpers.metric(server, "interp_serve_running") == 0
    _still_serving(server)


# --- limits (tight server) ------------------------------------------------------------------
def test_oversize_body_is_413_naming_size_and_cap(tight: Any) -> None:
    big = "word " * (BODY_CAP // 4)
    with tight.client() as http:
        response = http.post("/v1/tokenize", json={"text": big})
        assert response.status_code == 413
        message = _error(response)["message"]
        assert f"{BODY_CAP:,} bytes" in message
        chunked = http.post(
            "/v1/tokenize",
            content=iter([b'{"text": "', big.encode(), b'"}']),
            headers={"content-type": "application/json"},
        )
    assert chunked.status_code == 413
    _still_serving(tight)


def test_capture_over_the_request_cap_is_413(tight: Any, local: Any) -> None:
    ids = local.to_tokens("one two three four five six seven eight nine ten").tolist()
    points = [
        f"{name}.{layer}" for name in ("resid_post", "mlp_act", "attn_out") for layer in (0, 1)
    ]
    with tight.client() as http:
        response = http.post("/v1/capture", json={"tokens": ids, "points": points})
    assert response.status_code == 413
    message = _error(response)["message"]
    assert f"{CAPTURE_CAP:,} bytes" in message and "per-request cap" in message
    model = load_model(tight.url, backend="remote", api_key=tight.keys[0])
    try:
        with pytest.raises(TooLarge, match="per-request cap"):
            sync.capture(model, ids, points)
    finally:
        sync.shutdown(model)
    _still_serving(tight)


def test_store_budget_ttl_and_delete(tight: Any, local: Any) -> None:
    ids = [list(range(40))]  # resid_post: 40 x 128 float32 = 20,480 bytes per capture
    body = {"tokens": ids, "points": ["resid_post.0"]}
    with tight.client() as http:
        first = http.post("/v1/capture", json=body)
        assert first.status_code == 200
        handle = first.json()["interp"]["url"]
        assert first.json()["interp"]["expires_in"] == TTL
        second = http.post("/v1/capture", json=body)
        assert second.status_code == 200
        full = http.post("/v1/capture", json=body)
        assert full.status_code == 413
        error = _error(full)
        assert error["type"] == StoreFull.__name__ and f"{BUDGET:,} bytes" in error["message"]
        assert http.delete(second.json()["interp"]["url"]).status_code == 200
        assert http.post("/v1/capture", json=body).status_code == 200  # room again
        assert http.get(handle).status_code == 200
        time.sleep(TTL + 0.3)
        gone = http.get(handle)
        assert gone.status_code == 404
        assert _error(gone)["type"] == HandleNotFound.__name__
        assert http.post("/v1/capture", json=body).status_code == 200  # expiry freed the budget
    _still_serving(tight)


def test_client_leaving_a_queued_request_cancels_it(tight: Any, local: Any) -> None:
    # Two requests on the one slot, both clients gone at once: whichever waits is queued for a
    # whole 120-token run when its client leaves, and is cancelled when it gets the slot.
    plain = {"model": str(local.model_id), "prompt": [0, 5, 6], "max_tokens": 120,
             "temperature": 0}  # fmt: skip
    serve_helpers.wait_idle(tight)
    cancelled = serve_helpers.metric(tight, "interp_serve_calls_cancelled")
    serve_helpers.post_and_leave(tight, plain, 2)
    assert serve_helpers.wait_for_cancel(tight, cancelled) >= cancelled + 1
    serve_helpers.wait_idle(tight)
    assert serve_helpers.metric(tight, "interp_serve_queue_depth") == 0
    _still_serving(tight)


def test_full_queue_is_429_with_retry_after(tight: Any, local: Any) -> None:
    body = {"model": str(local.model_id), "prompt": [0, 5, 6], "max_tokens": 120,
            "temperature": 0}  # fmt: skip

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            base_url=tight.url, headers=tight.headers(), timeout=60
        ) as http:
            return await asyncio.gather(
                *(http.post("/v1/completions", json=body) for _ in range(8))
            )

    answers = asyncio.run(burst())
    codes = sorted(a.status_code for a in answers)
    assert codes.count(200) >= 2, codes  # one running, one queued
    refused = [a for a in answers if a.status_code == 429]
    assert refused, codes
    for answer in refused:
        assert answer.headers["retry-after"] == "1"
        assert _error(answer)["type"] == Overloaded.__name__
    texts = {a.json()["choices"][0]["text"] for a in answers if a.status_code == 200}
    assert len(texts) == 1  # the served ones are whole, identical greedy completions
    _still_serving(tight)


# --- the process ----------------------------------------------------------------------------


def test_shutdown_and_parent_exit_leave_no_process(model_path: Path, tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        running = serve_helpers.start_server(
            model_path, tmp_path, name="watched", args=("--watch-pid", str(parent.pid))
        )
        family = {running.process.pid, *serve_helpers.descendants(running.process.pid)}
        parent.kill()
        parent.wait(10)
        running.process.wait(30)  # it stops by itself once the watched process is gone
        # uvicorn re-raises the SIGTERM it handled, after the graceful shutdown completed.
        assert running.process.returncode in (0, -15), running.log_text()
        assert "interp serve: stopped" in running.log_text()
    finally:
        parent.kill()
    time.sleep(0.5)
    alive = [pid for pid in family if Path(f"/proc/{pid}").exists()]
    assert not alive, alive


def test_open_non_loopback_bind_is_refused(model_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "INTERP_API_KEYS"}
    command = [sys.executable, "-m", "interp_serve.cli", str(model_path), "--host", "0.0.0.0"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "without API keys" in done.stderr and "--no-auth" in done.stderr
