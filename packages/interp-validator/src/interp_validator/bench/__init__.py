"""Speed benchmarks (`interp-bench`): ratios measured side by side, never absolute goals.

This machine (and any CI box) is shared and noisy, so every figure here is a ratio of two
variants timed interleaved in one process, or on one engine, with medians over repeats after a
warm-up. Workloads:

* P1 — capture resid_post at every layer vs a plain HF forward (24M-parameter Llama, 128 tokens,
  float32, eager attention): ours (eager backend) and each reference engine, each against a
  plain forward in its own process.
* P2 — the same with every point the engine can read.
* P3 — vLLM generation of 128 tokens against vanilla vLLM as users run it (compiled), with
  vanilla in eager mode beside it: the hooked backend and the compiled `vllm-static` tier with
  resid_post captured at every layer, steering at one point, and 8 concurrent requests
  (`interp_validator.bench.static_tier`, which also states the goals the rows are judged by).
* P4 — 8 concurrent requests with capture: aggregate generated tokens/s, vLLM vs eager.
* L — steering and logit-lens latency vs a plain capture, eager and vLLM.
* S — `interp serve` through the `remote` backend vs the same backend in-process: 8 concurrent
  capture+generate requests (tokens/s) and the activation transfer rate (MB/s).
* F — top-32 features of one SAE at one layer, 8 concurrent requests on vLLM: encoded in the
  worker vs captured and encoded in the client, in-process and served (`interp serve --sae`),
  with the bytes each moves (`interp_sae.bench`, plugged in through the `interp.bench` entry
  point group: `pip install 'interpoint-sae[bench]'`).
* A — a resid_pre layer × position patching sweep (16-token prompts): `patch_sweep` on eager
  (rows of batched forwards) and vLLM (concurrent requests) vs TransformerLens's
  `get_act_patch_resid_pre` in its pinned environment on the same folder, grids checked equal
  first (`interp_validator.bench.patching`).
* H — activations at one layer of SmolLM2-135M-Instruct over contexts packed from a generated
  corpus: `harvest_activations` on compiled `vllm-static` vs vanilla compiled vLLM prefilling the
  same contexts, and vs SAELens's `CacheActivationsRunner` in its pinned environment on the same
  tokens (context tokens/s).
* D — dashboards of every feature of a random SAE (d_sae 8192) at one layer of the same model and
  tokens: `harvest_dashboards` + `write_neuronpedia_batches` vs sae-dashboard's
  `NeuronpediaRunner` in its pinned environment (features/s). H and D are interp-harvest's
  (`interp_harvest.bench`, plugged in like F: `pip install 'interpoint-harvest[bench]'`).

Results are one JSON document and a Markdown table (`report.markdown`); the README quotes it.
"""

from __future__ import annotations

from interp_validator.bench.workloads import (
    BenchResult,
    Row,
    build_bench_model,
    run_benchmarks,
)

__all__ = ["BenchResult", "Row", "build_bench_model", "run_benchmarks"]
