"""The GPU suite: generation throughput of every backend on random models of real shapes.

    interp-bench --suite gpu [--gpu-models meta-llama/Llama-3.1-8B,Qwen/Qwen3-4B,google/gemma-2-2b]

For a lent accelerator with no internet: the shapes come from the configs stored in interp-core
(`interp_core.configs.local_config`), vLLM builds random weights itself (`load_format="dummy"`,
no tokenizer: prompts are token ids) and the eager backend gets an HF model initialised on the
GPU. Per model, bf16, a 512-token prompt and 128 new tokens (greedy, end-of-sequence ignored by
construction: the dummy vocabulary's EOS is one the prompt never contains), it measures one
stream and 8 concurrent requests, in tokens/s, for:

* `vanilla vLLM` — plain vLLM with CUDA graphs and compile (vLLM's defaults),
* `vllm-generate` — our generate-only backend (the same engine, through our API),
* `vllm` — hooked, eager mode, resid_post captured at every layer,
* `vllm-static` — declared resid_post taps traced into vLLM's compiled forward, so it runs
  under CUDA graphs like vanilla vLLM (`model.execution == "cuda-graphs"`),
* `eager` — HF transformers in-process (one stream; 8 requests run one after another).

Every engine is shut down before the next starts, so each gets the whole GPU. The default model
list is sized to finish within 8 minutes on one H200; extra models are opt-in. The whole GPU check
is one script, `tools/gpu_check.sh`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from interp_validator.bench.workloads import BenchResult, Row

__all__ = ["DEFAULT_GPU_MODELS", "run_gpu_suite"]

DEFAULT_GPU_MODELS = ("meta-llama/Llama-3.1-8B",)
PROMPT = 512
NEW = 128
CONCURRENT = 8


def _folder(model_id: str, root: Path) -> Path:
    from interp_core.configs import local_config

    config = local_config(model_id)
    if config is None:
        message = (
            f"no stored config for {model_id!r} in interp-core; the GPU suite runs offline, so "
            f"pick one of the configs under interp_core/model_configs"
        )
        raise ValueError(message)
    folder = root / model_id.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    config = {**config, "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _prompts(vocab: int, count: int) -> list[list[int]]:
    import torch

    generator = torch.Generator().manual_seed(0)
    return [
        torch.randint(10, min(vocab, 30000), (PROMPT,), generator=generator).tolist()
        for _ in range(count)
    ]


def _rate(run: Callable[[], int], repeats: int = 2) -> float:
    run()  # warm-up (CUDA graphs, allocator)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = run()
        rates.append(tokens / (time.perf_counter() - start))
    return statistics.median(rates)


def _vllm_rates(model: Any, prompts: list[list[int]], capture: bool) -> tuple[float, float]:
    from interp_core import sync

    points = [f"resid_post.{layer}" for layer in range(model.n_layers)] if capture else []

    async def one(prompt: list[int]) -> int:
        if points:
            generation, _ = await model.capture_generation(
                [prompt], points, max_new_tokens=NEW, temperature=0.0
            )
        else:
            generation = await model.generate([prompt], max_new_tokens=NEW, temperature=0.0)
        return len(generation.token_ids)

    async def many() -> int:
        return sum(await asyncio.gather(*(one(p) for p in prompts)))

    single = _rate(lambda: sync.run(model, lambda: one(prompts[0])))
    concurrent = _rate(lambda: sync.run(model, many))
    return single, concurrent


def run_gpu_suite(models: Sequence[str] = DEFAULT_GPU_MODELS) -> BenchResult:
    """Measure every backend on each model; a backend that fails is recorded, not fatal."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from interp_core import load_model, sync

    if not torch.cuda.is_available():
        message = "the GPU suite needs a CUDA GPU; run `interp-bench` (CPU workloads) instead"
        raise RuntimeError(message)
    result = BenchResult(
        meta={
            "gpu": torch.cuda.get_device_name(0),
            "prompt_tokens": PROMPT,
            "new_tokens": NEW,
            "concurrent": CONCURRENT,
            "dtype": "bfloat16",
            "model": "random weights of real shapes: " + ", ".join(models),
        }
    )
    dummy = {"load_format": "dummy", "skip_tokenizer_init": True}
    with tempfile.TemporaryDirectory() as tmp:
        for model_id in models:
            folder = _folder(model_id, Path(tmp))
            vocab = int(json.loads((folder / "config.json").read_text()).get("vocab_size", 32000))
            prompts = _prompts(vocab, CONCURRENT)
            runs: dict[str, tuple[str, dict[str, Any], bool]] = {
                "vanilla vLLM (graphs)": ("vllm-generate", {}, False),
                "vllm-generate (eager mode)": ("vllm-generate", {"enforce_eager": True}, False),
                "vllm, resid_post every layer": ("vllm", {}, True),
                "vllm-static, resid_post every layer": ("vllm-static", {}, True),
            }
            rates: dict[str, tuple[float, float]] = {}
            for label, (backend, extra, capture) in runs.items():
                model = None
                try:
                    model = load_model(
                        str(folder),
                        backend=backend,
                        dtype="bfloat16",
                        max_model_len=PROMPT + NEW + 8,
                        gpu_memory_utilization=0.85,
                        extra_vllm_kwargs={**dummy, **extra},
                    )
                    sync.warmup(model)
                    rates[label] = _vllm_rates(model, prompts, capture)
                except Exception as exc:
                    result.errors[f"{model_id} {label}"] = f"{type(exc).__name__}: {exc}"
                finally:
                    if model is not None:
                        sync.shutdown(model)
            try:
                config = AutoConfig.from_pretrained(folder)
                with torch.device("cuda"):
                    hf = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
                eager = load_model(str(folder), backend="eager", hf_model=hf)

                def eager_run(count: int, model: Any = eager, batch: Any = prompts) -> int:
                    total = 0
                    for prompt in batch[:count]:
                        generation = sync.generate(
                            model, [prompt], max_new_tokens=NEW, temperature=0.0
                        )
                        total += len(generation.token_ids)
                    return total

                rates["eager"] = (_rate(lambda: eager_run(1), 1), _rate(lambda: eager_run(8), 1))
                del hf, eager
                torch.cuda.empty_cache()
            except Exception as exc:
                result.errors[f"{model_id} eager"] = f"{type(exc).__name__}: {exc}"
            base = rates.get("vanilla vLLM (graphs)")
            for label, (single, concurrent) in rates.items():
                for which, value, ref in (
                    ("one stream", single, base[0] if base else None),
                    (f"{CONCURRENT} concurrent", concurrent, base[1] if base else None),
                ):
                    result.rows.append(
                        Row(
                            "GPU",
                            f"{label} — {model_id}",
                            which,
                            value,
                            "tok/s",
                            "vanilla vLLM (graphs)",
                            None if not ref else value / ref,
                        )
                    )
    return result
