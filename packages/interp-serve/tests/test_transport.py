"""The connection layer on a real uvicorn server: what a client with no key can make it hold.

One server for the module, with small limits so each attack is cheap: an 8 KiB head, 40 header
fields, a 2 s head deadline, a 2 s body stall limit, 64 connections, a 64 KiB body cap. Every
attack speaks raw HTTP on loopback sockets (or httpx / urllib, for what those clients see), every
wait is bounded, and a good request answers during and after each one.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import serve_helpers

HEAD_CAP = 8192
FIELDS_CAP = 40
HEAD_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
CONNECTIONS = 64
BODY_CAP = 64 * 1024
# How long past a deadline a close may take to be seen here (a busy 2-core machine).
SLACK = 4.0


@pytest.fixture(scope="module")
def guarded(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from serve_helpers.serving(
        model_path,
        tmp_path_factory.mktemp("transport-logs"),
        name="transport",
        args=(
            "--max-header-bytes", str(HEAD_CAP),
            "--max-header-fields", str(FIELDS_CAP),
            "--header-timeout", str(HEAD_TIMEOUT),
            "--body-timeout", str(BODY_TIMEOUT),
            "--max-connections", str(CONNECTIONS),
            "--max-body-bytes", str(BODY_CAP),
        ),
    )  # fmt: skip


def _port(server: Any) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _connect(server: Any, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", _port(server)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One whole answer (the server closes after each refusal), as status, headers, body."""
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), f"not an HTTP answer: {data[:200]!r}"
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _our_error(body: bytes, status: int, kind: str) -> str:
    error = json.loads(body)["error"]
    assert (error["code"], error["type"]) == (status, kind)
    return str(error["message"])


def _good(server: Any) -> None:
    """A real request on a fresh connection answers, and answers right."""
    with server.client(timeout=20) as http:
        answer = http.post("/v1/tokenize", json={"text": "still here"})
    assert answer.status_code == 200
    assert answer.json()["tokens"][0][0] == 0  # BOS


def _head(path: str = "/health", extra: bytes = b"") -> bytes:
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"\r\n"


# --- the head's size -------------------------------------------------------------------------
def test_a_head_within_the_limits_is_served(guarded: Any) -> None:
    sock = _connect(guarded)
    fields = b"".join(b"X-%d: 1\r\n" % i for i in range(FIELDS_CAP - 2))
    sock.sendall(_head(extra=fields + b"Connection: close\r\n"))
    status, _, body = _read_answer(sock)
    assert status == 200
    assert json.loads(body)["status"] == "ok"


def test_an_oversized_header_is_431_in_our_shape(guarded: Any) -> None:
    # A 16 MiB header was read in full and served before; httpx writes all of it, then reads.
    answer = httpx.get(f"{guarded.url}/health", headers={"X-Big": "a" * (16 * 2**20)}, timeout=60)
    assert answer.status_code == 431
    assert "8,192 bytes" in _our_error(answer.content, 431, "TooLarge")
    _good(guarded)


def test_one_header_just_over_the_byte_limit_is_431(guarded: Any) -> None:
    sock = _connect(guarded)
    sock.sendall(_head(extra=b"X-Big: " + b"a" * HEAD_CAP + b"\r\n"))
    status, headers, body = _read_answer(sock)
    assert status == 431
    assert headers["connection"] == "close"
    _our_error(body, 431, "TooLarge")


def test_four_48_mib_headers_hold_no_memory(guarded: Any) -> None:
    # Each connection is refused after its first 8 KiB and the rest dropped as it comes: the
    # server's RSS, sampled throughout, never grows by anything like the 192 MiB sent.
    peak, stop = [0], threading.Event()
    base = _rss(guarded)

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], _rss(guarded))

    def attack(answers: list[int]) -> None:
        sock = _connect(guarded, timeout=60)
        with contextlib.suppress(OSError):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (48 * 2**20))
        sock.shutdown(socket.SHUT_WR)
        answers.append(_read_answer(sock)[0])
        sock.close()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    answers: list[int] = []
    attackers = [threading.Thread(target=attack, args=(answers,)) for _ in range(4)]
    for thread in attackers:
        thread.start()
    for thread in attackers:
        thread.join(60)
    stop.set()
    sampler.join(5)
    assert answers == [431] * 4
    assert peak[0] - base < 32 * 2**20, f"RSS grew {(peak[0] - base) / 2**20:.0f} MiB"
    _good(guarded)


def _rss(server: Any) -> int:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for the server process")


def test_100000_headers_are_431(guarded: Any) -> None:
    # Raw: httpx itself takes minutes over 100,000 request headers (its cookie handling).
    sock = _connect(guarded)
    sock.sendall(_head(extra=b"".join(b"X-%d: 1\r\n" % i for i in range(100_000))))
    status, _, body = _read_answer(sock)
    assert status == 431
    _our_error(body, 431, "TooLarge")
    _good(guarded)


def test_too_many_small_fields_are_431_under_the_byte_limit(guarded: Any) -> None:
    fields = b"".join(b"A%d:\r\n" % i for i in range(FIELDS_CAP + 1))
    assert len(fields) < HEAD_CAP // 2  # the field count refuses it, not the bytes
    sock = _connect(guarded)
    sock.sendall(_head(extra=fields))
    status, _, body = _read_answer(sock)
    assert status == 431
    assert f"{FIELDS_CAP} header fields" in _our_error(body, 431, "TooLarge")


def test_a_malformed_head_is_400_in_our_shape(guarded: Any) -> None:
    sock = _connect(guarded)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n")
    status, _, body = _read_answer(sock)
    assert status == 400
    _our_error(body, 400, "InvalidArgument")


# --- deadlines ---------------------------------------------------------------------------------
def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server ended this connection within `seconds`, and what it sent first."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    data = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return False, data


def test_50_slowloris_connections_close_within_the_head_deadline(guarded: Any) -> None:
    # 40 trickle a never-ending head a field every 0.3 s (each byte once cancelled uvicorn's
    # only timer); 10 open and send nothing. All 50 must be closed by the deadline.
    socks = [_connect(guarded) for _ in range(50)]
    started = time.monotonic()
    stop = threading.Event()

    def trickle() -> None:
        for sock in socks[:40]:
            with contextlib.suppress(OSError):
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        while not stop.wait(0.3):
            for sock in socks[:40]:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X-a: b\r\n")

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        _good(guarded)  # served while all 50 are held
        outcomes = [_closed_within(sock, HEAD_TIMEOUT + SLACK - (time.monotonic() - started))
                    for sock in socks]  # fmt: skip
    finally:
        stop.set()
        thread.join(5)
        for sock in socks:
            sock.close()
    still_open = [i for i, (closed, _) in enumerate(outcomes) if not closed]
    assert not still_open, f"connections still open after {HEAD_TIMEOUT + SLACK} s: {still_open}"
    # The trickled ones are told why; the silent ones are just closed.
    status, _, body = _split(outcomes[0][1])
    assert status == 408
    assert "did not arrive in full within 2 s" in _our_error(body, 408, "RequestTimeout")
    assert all(data == b"" for _, data in outcomes[40:])
    _good(guarded)


def _split(data: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), {}, body


def test_a_stalled_body_is_closed(guarded: Any) -> None:
    sock = _connect(guarded)
    sock.sendall(
        b"POST /v1/tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + serve_helpers.KEY.encode()
        + b'\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"text":'
    )
    closed, data = _closed_within(sock, BODY_TIMEOUT + SLACK)
    sock.close()
    assert closed, "a body that stopped arriving kept its connection open"
    status, _, body = _split(data)
    assert status == 408
    assert "stalled for 2 s" in _our_error(body, 408, "RequestTimeout")
    _good(guarded)


# --- the connection cap -------------------------------------------------------------------------
def test_connections_over_the_cap_are_refused_then_served_again(guarded: Any) -> None:
    socks = [_connect(guarded) for _ in range(CONNECTIONS + 8)]
    try:
        time.sleep(0.5)  # every accept has been handled (well inside the 2 s head deadline)
        answered, _, _ = select.select(socks, [], [], 0.1)
        refused = [_read_answer(sock) for sock in answered]
        # This test's own sockets are all the server holds: the last 8 are over the cap.
        assert 8 <= len(refused) <= 10, len(refused)
        assert socks[-1] in answered
        for status, headers, body in refused:
            assert (status, headers["retry-after"]) == (503, "1")
            assert "cap of 64 open connections" in _our_error(body, 503, "Overloaded")
    finally:
        for sock in socks:
            sock.close()
    time.sleep(0.3)
    _good(guarded)


# --- a refused body is drained, so every client reads the refusal -------------------------------
@pytest.mark.parametrize("size", [BODY_CAP + 1, 4 * 2**20])
def test_every_client_reads_the_413_of_an_oversized_body(guarded: Any, size: int) -> None:
    body = b"x" * size
    headers = {**_auth(), "Content-Type": "application/json"}
    request = urllib.request.Request(f"{guarded.url}/v1/tokenize", data=body, headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:  # urllib sends Connection: close
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 413
    assert f"over this server's cap of {BODY_CAP:,}" in _our_error(
        refused.value.read(), 413, "TooLarge"
    )
    with httpx.Client(base_url=guarded.url, headers=headers, timeout=30) as http:
        answer = http.post("/v1/tokenize", content=body)
        assert answer.status_code == 413
        _our_error(answer.content, 413, "TooLarge")
        # No length given: read up to the cap, then refused the same way.
        chunked = http.post("/v1/tokenize", content=iter([body[:40_000], body[40_000:]]))
        assert chunked.status_code == 413
        _our_error(chunked.content, 413, "TooLarge")
    _good(guarded)


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {serve_helpers.KEY}"}
