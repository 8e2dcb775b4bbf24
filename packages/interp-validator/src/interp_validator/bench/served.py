"""S — the engine served over HTTP (`interp serve`) against the same backend in-process.

Two figures, each a ratio measured side by side on one machine:

* 8 concurrent capture-during-generation requests (resid_post at every layer): aggregate
  generated tokens/s through the `remote` backend, against the same requests in-process.
* The activation transfer rate: one capture of resid_post at every layer of a 128-token prompt,
  fetched as safetensors through the remote backend, against the same capture in-process (the
  row's value is the rate in MB/s of the served capture).

The server is `interp serve` in a subprocess on a loopback port, reached through the registry's
`remote` backend (interp-serve is never imported here). When interp-serve is not installed the
workload is reported as not measured.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["bench_served", "bench_transfer", "running_server"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(folder: Path, backend: str, options: list[str]) -> Iterator[tuple[str, str]]:
    """`interp serve` on a free loopback port; yields (url, key) once /health answers."""
    import urllib.request

    port, key = _free_port(), secrets.token_hex(16)
    # One torch thread, as the in-process side runs (`run_benchmarks` sets it): the same compute.
    env = {**os.environ, "INTERP_API_KEYS": key, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "interp_serve.cli", str(folder), "--backend", backend,
               "--port", str(port), "--watch-pid", str(os.getpid()), "--log-level", "warning",
               *options]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 600
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    text = log.read().decode(errors="replace")
                    # vLLM's last words only point "above": name the first error raised too.
                    first = re.search(r"^\w*(?:Error|Exception)\b.*$", text, re.MULTILINE)
                    cause = f"{first[0]} ... " if first else ""
                    message = f"interp serve exited with {process.returncode}: {cause}{text[-600:]}"
                    raise RuntimeError(message)
                try:
                    with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    message = "interp serve did not answer /health within 600 s"
                    raise RuntimeError(message)
                time.sleep(0.5)
            yield url, key
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


def bench_served(
    folder: Path,
    local: Any,
    *,
    backend: str,
    options: list[str],
    prompts: list[list[list[int]]],
    transfer_prompt: list[list[int]],
    repeats: int,
    new_tokens: int = 32,
) -> list[dict[str, Any]]:
    """The fields of workload S's rows (`workloads.Row`) for `backend`; `local` is the same
    backend's model in this process."""
    from interp_core import load_model, sync

    layers = [f"resid_post.{layer}" for layer in range(local.n_layers)]
    with running_server(folder, backend, options) as (url, key):
        remote = load_model(url, backend="remote", api_key=key)
        try:

            def concurrent(model: Any) -> int:
                async def all_at_once() -> list[Any]:
                    return await asyncio.gather(
                        *(
                            model.capture_generation(p, layers, max_new_tokens=new_tokens)
                            for p in prompts
                        )
                    )

                return sum(len(g.token_ids) for g, _ in sync.run(model, all_at_once))

            rates: dict[str, list[float]] = {"in-process": [], "served": []}
            seconds: dict[str, list[float]] = {"in-process": [], "served": []}
            concurrent(local)  # warm-up, both sides
            concurrent(remote)
            for _ in range(repeats):
                for name, model in (("in-process", local), ("served", remote)):
                    start = time.perf_counter()
                    tokens = concurrent(model)
                    rates[name].append(tokens / (time.perf_counter() - start))
                size = _capture_round(local, remote, transfer_prompt, layers, seconds)
        finally:
            sync.shutdown(remote)
    base = statistics.median(rates["in-process"])
    served = statistics.median(rates["served"])
    subject = f"{backend} served (ours)"
    variant = f"{len(prompts)} concurrent, resid_post every layer, {new_tokens} new tokens each"
    rate_row = {
        "workload": "S",
        "subject": subject,
        "variant": variant,
        "value": served,
        "unit": "tok/s",
        "baseline": f"{backend} in-process",
        "ratio": served / base,
    }
    return [rate_row, _transfer_row(backend, "", transfer_prompt, size, seconds)]


def bench_transfer(
    folder: Path,
    local: Any,
    *,
    backend: str,
    label: str,
    prompt: list[list[int]],
    repeats: int,
) -> dict[str, Any]:
    """Workload S's transfer row alone, for a bigger model (`label` names it): one capture of
    resid_post at every layer of `prompt`, served against in-process, interleaved."""
    from interp_core import load_model, sync

    layers = [f"resid_post.{layer}" for layer in range(local.n_layers)]
    seconds: dict[str, list[float]] = {"in-process": [], "served": []}
    with running_server(folder, backend, []) as (url, key):
        remote = load_model(url, backend="remote", api_key=key)
        try:
            for model in (local, remote):  # warm-up, both sides
                sync.capture(model, prompt, layers)
            for _ in range(repeats):
                size = _capture_round(local, remote, prompt, layers, seconds)
        finally:
            sync.shutdown(remote)
    return _transfer_row(backend, f"{label}: ", prompt, size, seconds)


def _capture_round(
    local: Any, remote: Any, prompt: list[list[int]], layers: list[str], seconds: dict
) -> int:
    """One capture of `layers` in-process, then served, each timed into `seconds`; the bytes
    one capture holds."""
    from interp_core import sync

    for name, model in (("in-process", local), ("served", remote)):
        start = time.perf_counter()
        cache = sync.capture(model, prompt, layers)
        seconds[name].append(time.perf_counter() - start)
    return sum(math.prod(cache[p].shape) * cache[p].element_size() for p in layers)


def _transfer_row(
    backend: str, prefix: str, prompt: list[list[int]], size: int, seconds: dict
) -> dict[str, Any]:
    """S's transfer row: MB/s served, and in-process over served time as the ratio."""
    local_s = statistics.median(seconds["in-process"])
    served_s = statistics.median(seconds["served"])
    return {
        "workload": "S",
        "subject": f"{backend} served (ours)",
        "variant": (
            f"{prefix}resid_post every layer, {len(prompt[0])} tokens "
            f"({size / 1e6:.2f} MB), MB/s served"
        ),
        "value": size / 1e6 / served_s,
        "unit": "MB/s",
        "baseline": f"{backend} in-process capture",
        "ratio": local_s / served_s,
        "note": f"in-process {local_s * 1000:.1f} ms, served {served_s * 1000:.1f} ms",
    }
