"""What a hostile client tried (issue 28), each answered as documented and fast.

A server started for this module holds two keys and a small forward budget. Timing bounds here
are generous (seconds, where the quadratic checks took tens of seconds) so a busy machine does
not fail them; the figures measured are in the report of the change that added them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import serve_helpers

KEY_B = "second-key-9876543210"
FORWARD_CAP = 256 * 2**20
SLOW_S = 5.0  # the quadratic checks took 10-85 s; an O(n) one takes well under 0.5 s


@pytest.fixture(scope="module")
def guarded(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("guarded-logs")
    yield from serve_helpers.serving(
        model_path,
        logs,
        name="guarded",
        keys=(serve_helpers.KEY, KEY_B),
        args=("--max-forward-bytes", str(FORWARD_CAP), "--log-level", "info"),
    )


def _name(server: Any) -> str:
    with server.client() as http:
        return http.get("/v1/models").json()["data"][0]["id"]


def _rss_peak_mib(server: Any) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _rss_mib(server: Any) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class _HealthWatch:
    """Polls /health from a thread while a request runs; the slowest answer it saw."""

    def __init__(self, server: Any) -> None:
        self.url = f"{server.url}/health"
        self.worst = 0.0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                ok = httpx.get(self.url, timeout=30).status_code == 200
            except httpx.TransportError:
                ok = False
            self.failures += not ok
            self.worst = max(self.worst, time.perf_counter() - started)
            time.sleep(0.02)

    def __enter__(self) -> _HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _timed(server: Any, path: str, body: dict[str, Any]) -> tuple[httpx.Response, float, float]:
    with server.client(timeout=120) as http, _HealthWatch(server) as watch:
        started = time.perf_counter()
        answer = http.post(path, json=body)
        took = time.perf_counter() - started
    assert watch.failures == 0
    return answer, took, watch.worst


def _error(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text[:500]
    body = answer.json()
    assert set(body) == {"error"}, body
    assert "Traceback" not in body["error"]["message"]
    return body["error"]


# --- breaks 1 and 2: long lists checked in linear time, /health answering ------------------------
def test_a_hundred_thousand_positions_or_layers_are_answered_at_once(guarded: Any) -> None:
    many = list(range(100_000))
    spec = {"address": "resid_post.0", "vector": [0.1] * 128, "positions": many}
    name = _name(guarded)
    cases = [
        ("/v1/completions", {"model": name, "prompt": [0, 5, 6], "max_tokens": 2,
                             "interp": {"steering": [spec]}}),
        ("/v1/capture", {"tokens": [[0, 5, 6]], "points": [], "steering": [spec]}),
        ("/v1/lens", {"tokens": [[0, 5, 6]], "layers": many}),
        ("/v1/lens", {"tokens": [[0, 5, 6]], "layers": [0] * 100_000}),
    ]  # fmt: skip
    for path, body in cases:
        answer, took, worst = _timed(guarded, path, body)
        _error(answer, 400)
        assert took < SLOW_S and worst < SLOW_S, (path, took, worst)


# --- breaks 3 and 4: a forward is priced before it runs ------------------------------------------
def test_path_points_and_pointless_captures_are_priced_before_running(guarded: Any) -> None:
    before = _rss_peak_mib(guarded)
    # 600 rows of lm_head as a raw module: ~290 MiB of float32 logits, over the 256 MiB cap.
    path_body = {"tokens": [list(range(1, 128))] * 600, "points": ["path.lm_head"], "direct": True}
    answer, took, _ = _timed(guarded, "/v1/capture", path_body)
    error = _error(answer, 413)
    assert "per-request cap" in error["message"] and "bytes" in error["message"]
    assert took < SLOW_S
    # No points at all: the forward alone (1,200 x 127 tokens, ~1.2 GiB of logits) is priced.
    answer, took, _ = _timed(guarded, "/v1/capture", {"tokens": [list(range(1, 128))] * 1200,
                                                      "points": []})  # fmt: skip
    error = _error(answer, 413)
    assert "1,200 rows × 127 tokens" in error["message"], error["message"]
    assert (
        f"{FORWARD_CAP:,} bytes" in error["message"] and "--max-forward-bytes" in error["message"]
    )
    assert took < SLOW_S
    # Refused before running: the server's peak memory did not climb by a forward's worth.
    assert _rss_peak_mib(guarded) - before < 150
    with guarded.client() as http:  # a request inside the budget still runs
        ok = http.post("/v1/capture", json={"tokens": [[0, 5, 6]], "points": ["path.lm_head"]})
    assert ok.status_code == 200, ok.text


def test_lens_top_k_is_capped(guarded: Any) -> None:
    answer, _, _ = _timed(guarded, "/v1/lens", {"tokens": [[0, 5, 6]], "top_k": 10**9})
    assert "--max-top-k" in _error(answer, 400)["message"]


# --- breaks 6 and 7: long text is capped, tokenized off the loop, and its memory comes back ------
def test_text_over_the_cap_is_refused_before_tokenizing(guarded: Any) -> None:
    answer, took, _ = _timed(guarded, "/v1/tokenize", {"text": "word " * 400_000})
    assert "--max-text-chars" in _error(answer, 400)["message"]
    assert took < SLOW_S


@pytest.mark.slow
def test_64_large_tokenizations_leave_the_rss_where_the_first_left_it(guarded: Any) -> None:
    text = "hello world " * 83_000  # just under the 1,000,000-character cap
    with guarded.client(timeout=120) as http, _HealthWatch(guarded) as watch:
        sizes = []
        for _ in range(64):
            answer = http.post("/v1/tokenize", json={"text": text})
            assert answer.status_code == 200
            sizes.append(_rss_mib(guarded))
    assert watch.failures == 0
    settled = sizes[0]
    assert max(sizes) <= settled * 1.10, (settled, sizes)
    assert watch.worst < SLOW_S, watch.worst


# --- break 8 and the strict types: bad input is a 400 in our shape --------------------------------
def _bad_bodies(name: str) -> list[tuple[str, bytes | dict[str, Any]]]:
    surrogate = b'"a\\ud800b"'
    return [
        ("/v1/detokenize", {"tokens": [-1]}),
        ("/v1/detokenize", {"tokens": [2**40]}),
        ("/v1/detokenize", {"tokens": [1.5]}),
        ("/v1/detokenize", {"tokens": ["a"]}),
        ("/v1/detokenize", {"tokens": [None]}),
        ("/v1/detokenize", {"tokens": [[[[[1]]]]]}),
        ("/v1/detokenize", {"tokens": [True]}),
        ("/v1/completions", b'{"model": "%s", "prompt": %s}' % (name.encode(), surrogate)),
        ("/v1/chat/completions",
         b'{"model": "%s", "messages": [{"role": "user", "content": %s}]}'
         % (name.encode(), surrogate)),
        ("/v1/tokenize", b'{"text": %s}' % surrogate),
        ("/v1/chat/completions", {"model": name, "messages": []}),
        ("/v1/capture", {"tokens": [[0, 5]], "points": [], "generate": {"steering": []}}),
        ("/v1/capture", {"tokens": [[0, 5]], "points": [], "generate": {"unknown": 1}}),
        ("/v1/completions", {"model": name, "prompt": [0, True], "max_tokens": 1}),
        ("/v1/completions", {"model": name, "prompt": [0, 5], "max_tokens": 1, "stream": "yes"}),
    ]  # fmt: skip


def test_the_fifteen_bad_inputs_are_400_with_our_error_shape(guarded: Any) -> None:
    cases = _bad_bodies(_name(guarded))
    assert len(cases) == 15
    logged = len(guarded.log_text())
    with guarded.client() as http:
        for path, body in cases:
            if isinstance(body, bytes):
                answer = http.post(path, content=body, headers={"content-type": "application/json"})
            else:
                answer = http.post(path, json=body)
            error = _error(answer, 400)
            assert error["type"] in ("InvalidArgument", "CapabilityUnsupported"), (path, error)
        assert http.post("/v1/tokenize", json={"text": "still here"}).status_code == 200
    assert "Traceback" not in guarded.log_text()[logged:]


# --- breaks 9 and 10: handles belong to their key; nothing secret in /health or the log ----------
def test_another_key_cannot_read_or_delete_a_handle(guarded: Any) -> None:
    a = guarded.client()
    b = httpx.Client(base_url=guarded.url, headers={"Authorization": f"Bearer {KEY_B}"})
    with a, b:
        made = a.post("/v1/capture", json={"tokens": [[0, 5, 6]], "points": ["resid_post.0"]})
        assert made.status_code == 200
        url = made.json()["interp"]["url"]
        handle = url.rsplit("/", 1)[1]
        missing = url.replace(handle, "act-" + "x" * 24)
        for method in ("GET", "DELETE"):
            theirs = b.request(method, url)
            never = b.request(method, missing)
            assert theirs.status_code == never.status_code == 404
            shown = theirs.json()["error"]
            expected = never.json()["error"]
            assert shown["type"] == expected["type"] == "HandleNotFound"
            assert shown["message"].replace(handle, "?") == expected["message"].replace(
                missing.rsplit("/", 1)[1], "?"
            )
        assert a.get(url).status_code == 200  # still A's, untouched
        assert a.delete(url).status_code == 200
    assert handle not in guarded.log_text()  # the access log shows no handle
    assert "/v1/activations/<handle>" in guarded.log_text()


def test_health_without_a_key_shows_no_path(guarded: Any, model_path: Path) -> None:
    open_answer = httpx.get(f"{guarded.url}/health")
    assert open_answer.status_code == 200
    assert str(model_path) not in open_answer.text and model_path.name not in open_answer.text
    assert "model" not in open_answer.json()
    with guarded.client() as http:  # a caller with a key sees the served name
        assert http.get("/health").json()["model"] == _name(guarded)


def test_a_key_in_the_query_string_is_refused_and_not_logged(guarded: Any) -> None:
    secret = serve_helpers.KEY
    for query in (f"api_key={secret}", f"key={secret}"):
        answer = httpx.get(f"{guarded.url}/v1/models?{query}", headers=guarded.headers())
        assert "query string" in _error(answer, 401)["message"]
    time.sleep(0.2)  # the access line is written after the answer
    assert secret not in guarded.log_text()
