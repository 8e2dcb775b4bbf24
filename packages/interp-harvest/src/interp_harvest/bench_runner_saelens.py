"""Bench runner (workload H): SAELens's `CacheActivationsRunner`, timed where SAELens lives.

Executed with the `sae-lens` environment's python (interp_validator.envs); imports only SAELens,
`datasets`, TransformerLens, torch and the standard library. Reads one JSON job: the model folder,
the validator's reference runners folder (`references`, for `runner_tl`'s recipe that builds a
HookedTransformer from a local folder with no weight processing, as SAELens's
`from_pretrained_no_processing` would from the hub), the TransformerLens hook, `d_in`, the packed
contexts (token ids, one list per context), the forward batch and a scratch folder. Then serves
commands on stdin, one a line, so the bench interleaves SAELens's rounds with ours while the
model stays loaded:

    run    one `CacheActivationsRunner(...).run()` over the contexts, given to SAELens as a
           pre-tokenized dataset (its `override_dataset`; `input_ids`, no BOS added) and written
           as its cached-activations folder in one buffer; answers {"seconds", "tokens", "rows"}
    quit   exit

The model is built once, outside the timed rounds (SAELens's `load_model` is handed it), so each
round times SAELens's own work: its activations store, the forwards and the dataset it writes.
Every answer is one JSON line on stdout; torch runs on one thread, as the bench's side does.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner_common import serve, start


def main(job_path: str) -> int:
    job, model = start(job_path)
    import datasets
    import sae_lens.cache_activations_runner as caching
    from sae_lens.config import CacheActivationsRunnerConfig

    caching.load_model = lambda **_: model  # SAELens's loader goes to the hub; ours is loaded
    contexts = job["contexts"]
    context_size, batch = len(contexts[0]), int(job["batch"])
    tokens = len(contexts) * context_size
    bytes_per_token = int(job["d_in"]) * 4
    dataset = datasets.Dataset.from_dict({"input_ids": contexts})

    def run(number: int) -> dict[str, Any]:
        out = Path(job["work"]) / f"cached-{number}"
        config = CacheActivationsRunnerConfig(
            dataset_path="override",  # never read: the dataset is handed over
            model_name="bench",
            model_batch_size=batch,
            hook_name=job["hook"],
            d_in=int(job["d_in"]),
            training_tokens=tokens,
            context_size=context_size,
            new_cached_activations_path=str(out),
            shuffle=False,
            dtype="float32",
            device="cpu",
            # One buffer holding every context (a buffer the store cannot fill is dropped).
            buffer_size_gb=(tokens + 0.5) * bytes_per_token / 1e9,
            prepend_bos=False,
            streaming=False,
        )
        begin = time.perf_counter()
        written = caching.CacheActivationsRunner(config, override_dataset=dataset).run()
        seconds = time.perf_counter() - begin
        rows = len(written)
        del written
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "tokens": rows * context_size, "rows": rows}

    return serve(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
