"""Starting and stopping a real `interp serve` in a subprocess on a loopback port.

The server is the CLI itself (`python -m interp_serve.cli`), run under uvicorn as a user would
run it. It is told to exit when this test process exits (`--watch-pid`), so a crashed test run
leaves no server behind, and every wait here is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

KEY = "test-key-0123456789"
START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    keys: tuple[str, ...] = field(default=(KEY,))

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[0]}"} if self.keys else {}

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=timeout)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL to its whole process group.

        The group is the server and everything it started (a vLLM engine's processes): a server
        killed while still starting up must not leave an orphaned engine behind.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        return int(self.process.returncode)


def serving(model: str | os.PathLike[str], log_dir: Path, **options: Any) -> Iterator[Server]:
    """A module's server: `start_server(model, log_dir, **options)`, yielded, stopped after."""
    running = start_server(model, log_dir, **options)
    try:
        yield running
    finally:
        running.stop()


def start_server(
    model: str | os.PathLike[str],
    log_dir: Path,
    *,
    backend: str = "eager",
    keys: tuple[str, ...] = (KEY,),
    args: tuple[str, ...] = (),
    name: str = "server",
    timeout: float = START_TIMEOUT_S,
) -> Server:
    port = free_port()
    env = dict(os.environ)
    env["INTERP_API_KEYS"] = ",".join(keys)
    # One torch thread: on a busy 2-core machine a second one costs more than it gives.
    env.setdefault("OMP_NUM_THREADS", "1")
    log = log_dir / f"{name}-{port}.log"
    command = [
        sys.executable,
        "-m",
        "interp_serve.cli",
        os.fspath(model),
        "--backend",
        backend,
        "--port",
        str(port),
        "--watch-pid",
        str(os.getpid()),
        "--log-level",
        "warning",
        *args,
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    server = Server(process, f"http://127.0.0.1:{port}", log, keys)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the server exited with {process.returncode}:\n{server.log_text()}"
            )
        try:
            if httpx.get(f"{server.url}/health", timeout=2.0).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"the server did not answer /health in {timeout} s:\n{server.log_text()}")


def wait_idle(server: Server, seconds: float = 10.0) -> None:
    """Until the server runs no request (or `seconds` pass): a previous one winding down."""
    deadline = time.monotonic() + seconds
    while metric(server, "interp_serve_running") > 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def metric(server: Server, name: str) -> float:
    """The sum of every sample of `name` in /metrics."""
    text = httpx.get(f"{server.url}/metrics", headers=server.headers(), timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            head, _, value = line.rpartition(" ")
            if head.split("{")[0] == name:
                total += float(value)
    return total


def leave_mid_stream(server: Server, body: dict[str, object], attempts: int = 3) -> float:
    """Open a stream, read its first event, disconnect; the engine steps it ran, once aborted.

    The server notices a gone client at its next write; on a loaded machine an engine can finish
    all its tokens before that, so the leave is tried up to `attempts` times and the first
    aborted stream counts. Fails if no attempt was aborted.
    """
    outcomes = []
    for _ in range(attempts):
        aborted = metric(server, "interp_serve_streams_aborted")
        produced = metric(server, "interp_serve_stream_steps_produced")
        with server.client() as http, http.stream("POST", "/v1/completions", json=body) as r:
            assert next(r.iter_lines()).startswith("data: ")
        wait_idle(server)
        time.sleep(0.3)  # a worker that was mid-token finishes it
        steps = metric(server, "interp_serve_stream_steps_produced") - produced
        if metric(server, "interp_serve_streams_aborted") > aborted:
            return steps
        outcomes.append(steps)
    message = f"no stream was aborted in {attempts} tries; engine steps per try: {outcomes}"
    raise AssertionError(message)


def _raw_head(server: Server, path: str, payload: bytes, *extra: str) -> bytes:
    url = httpx.URL(server.url)
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {url.host}:{url.port}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        *extra,
        *(f"{k}: {v}" for k, v in server.headers().items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


def post_and_leave(server: Server, body: dict[str, object], count: int) -> None:
    """POST `body` to /v1/completions `count` times, each client gone once the server's route
    has its request: none waits for an answer.

    Each request is sent with `Expect: 100-continue`, so its body goes only after the server
    answers `100 Continue`, which it does when the route reads the body: the request has then
    reached the route, before the engine's slot. Closing a socket right after sending raced
    that: on a loaded machine the server could see the closed connection first and never hand
    the request to a route, so nothing was queued and nothing cancelled.

    With more requests than the server's slots, the ones beyond the slots are queued when
    their clients leave, and stay queued for at least one whole request's run: each must be
    cancelled when it gets its slot (`Engine.call` checks its client then), whatever the
    model's speed. The ones that got a slot at once may finish first; they prove nothing.
    """
    url = httpx.URL(server.url)
    payload = json.dumps(body).encode()
    head = _raw_head(server, "/v1/completions", payload, "Expect: 100-continue")
    sockets = [socket.create_connection((url.host, url.port), timeout=30) for _ in range(count)]
    try:
        for sock in sockets:
            sock.sendall(head)
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 100"), f"expected 100 Continue, got {reply[:200]!r}"
            sock.sendall(payload)
    finally:
        for sock in sockets:
            sock.close()


def wait_for_cancel(server: Server, before: float, seconds: float = 15.0) -> float:
    """Until `interp_serve_calls_cancelled` exceeds `before` (or `seconds` pass); its value."""
    deadline = time.monotonic() + seconds
    while (now := metric(server, "interp_serve_calls_cancelled")) <= before:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return now


def write_saes(root: Path, d_in: int, d_sae: int = 64) -> dict[str, Path]:
    """Two tiny SAELens SAEs for the tiny Llama, laid out by interp-sae's own test writers:
    `relu` (standard) at resid_post.1 and `jr0` (JumpReLU) at resid_post.0."""
    folder = str(Path(__file__).resolve().parents[2] / "interp-sae" / "tests")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    from sae_files import write_saelens

    write_saelens(
        root / "r1", "standard", d_in=d_in, d_sae=d_sae, hook_name="blocks.1.hook_resid_post"
    )
    hook = "blocks.0.hook_resid_post"
    write_saelens(root / "jr0", "jumprelu", d_in=d_in, d_sae=d_sae, hook_name=hook, seed=2)
    return {"relu": root / "r1", "jr0": root / "jr0"}


def descendants(pid: int) -> set[int]:
    """Every process under `pid` (read from /proc, so no psutil is needed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


# --- the schema fuzzers (test_fuzz.py, test_neuronpedia.py) ---------------------------------------
def fuzz_settings(examples: int) -> Any:
    """The fuzzers' hypothesis settings: `examples` per operation, derandomized (the same
    requests every run, so CI is reproducible and a failure reruns), no example database, no
    shrinking, and no health check (the server is under test, not the strategies)."""
    import hypothesis

    return hypothesis.settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
    )


@dataclass
class FuzzBudget:
    """A fuzzer's wall-clock budget, counted from its first example: once `spent()`, the
    remaining examples are not sent."""

    seconds: float
    started: float | None = None

    def spent(self) -> bool:
        if self.started is None:
            self.started = time.monotonic()
        return time.monotonic() - self.started > self.seconds
