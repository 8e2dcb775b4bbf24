"""Bench runner: TransformerLens's `get_act_patch_resid_pre`, timed where TransformerLens lives.

Executed with the `refs` environment's python (HookedTransformer, no weight processing, set up
as the validator's patching runner sets it up: `runner_tl_patching.prepare`). Reads one JSON job
(model folder, clean and corrupted ids, the logit-difference pair), then serves commands on
stdin, one per line, so the bench can interleave its rounds with ours while this process stays
loaded:

    grid PATH   run the sweep once and write its [layers, positions] grid to PATH (safetensors)
    time        run the sweep once; answer {"seconds": ...} (the patching function alone)
    quit        exit

Every answer is one JSON line on stdout. torch runs on one thread, as the bench's own side does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "references"))
import runner_tl_patching


def main(job_path: str) -> int:
    spec = json.loads(Path(job_path).read_text())
    torch.set_num_threads(1)
    setup = runner_tl_patching.prepare(spec, "bench", Path.cwd())
    from safetensors.torch import save_file

    def sweep() -> torch.Tensor:
        return setup.patching.get_act_patch_resid_pre(
            setup.model, setup.corrupt, setup.clean_cache, setup.metric
        )

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "quit":
            break
        if command == "grid":
            save_file({"resid_pre": sweep().float().contiguous()}, argument)
            print(json.dumps({"written": argument}), flush=True)
        elif command == "time":
            start = time.perf_counter()
            sweep()
            print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)
        else:
            print(json.dumps({"error": f"unknown command {command!r}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
