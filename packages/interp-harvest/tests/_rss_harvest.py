"""Run one activations job in a fresh process and print its peak RSS (KiB) as JSON.

Started by test_memory.py: argv is MODEL CORPUS OUT TOKENS; the job runs once per layout
(safetensors, then saelens, into OUT/<layout>). The peak is the process's own `ru_maxrss`
after both, so it counts the interpreter, torch, the model and the jobs together: what grows
with the token budget shows up as a difference between two budgets.
"""

from __future__ import annotations

import json
import resource
import sys

# Wide points (7 KiB of float32 per token on the tiny Llama): few tokens make many bytes.
POINTS = [
    f"{point}.{layer}"
    for point in ("mlp_pre", "mlp_act", "attn_out", "mlp_out", "resid_post")
    for layer in (0, 1)
]

if __name__ == "__main__":
    import torch
    from interp_harvest import harvest_activations

    from interp_core import load_model

    torch.set_num_threads(1)
    model_path, corpus, out, tokens = sys.argv[1:5]
    model = load_model(model_path, backend="eager")
    written, harvested = {}, {}
    for layout in ("safetensors", "saelens"):
        manifest = harvest_activations(
            model,
            corpus,
            f"{out}/{layout}",
            points=POINTS,
            tokens=int(tokens),
            context_size=64,
            contexts_per_shard=16,
            batch_size=8,
            layout=layout,
        )
        written[layout] = sum(entry["bytes"] for entry in manifest["shards"])
        harvested[layout] = manifest["tokens"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_kib": peak, "written": written, "tokens": harvested}))
