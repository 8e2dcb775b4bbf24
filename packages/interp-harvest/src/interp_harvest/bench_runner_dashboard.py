"""Bench runner (workload D): sae-dashboard's `NeuronpediaRunner`, timed where it lives.

Executed with the `sae-dashboard` environment's python (interp_validator.envs); imports only
sae-dashboard, SAELens, TransformerLens, torch and the standard library. Reads one JSON job: the
model folder, the validator's reference runners folder (`references`: `runner_tl`'s recipe builds
a HookedTransformer from a local folder, unprocessed), the SAE folder (SAELens's layout), the
packed contexts (token ids), the forward batch and a scratch folder. Then serves commands on stdin,
one a line, so the bench interleaves its rounds with ours while the model stays loaded:

    run    one `NeuronpediaRunner(config).run()`: every feature's dashboard over the contexts,
           written as Neuronpedia's batch JSON; answers {"seconds", "batches", "features"}
    quit   exit

The runner's own loaders go to the hub (the model by the SAE's `model_name`, the tokens from a
dataset), so the model built once here is handed to it, and the contexts are the tokens file it
reads before making its own (`tokens_<n>.pt` in its output subfolder). Each round starts in an empty
output and cache folder, so nothing of a previous round is reused; the SAE is loaded inside the
round, as the runner does. Every answer is one JSON line on stdout; torch runs on one thread.

decode-clt (a sae-dashboard dependency) pulls a torchvision and torchaudio built for another torch,
which fail to import, and transformers imports torchvision when it is there: both are hidden from
this process before anything imports them.
"""

from __future__ import annotations

import sys

sys.modules["torchvision"] = None  # type: ignore[assignment]
sys.modules["torchaudio"] = None  # type: ignore[assignment]

import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner_common import serve, start  # noqa: E402


def main(job_path: str) -> int:
    job, hooked = start(job_path)
    import torch
    from sae_dashboard.neuronpedia.neuronpedia_runner import (
        NeuronpediaRunner,
        NeuronpediaRunnerConfig,
    )
    from sae_lens import HookedSAETransformer

    work = Path(job["work"])
    # The runner calls SAE-aware methods of HookedSAETransformer, a HookedTransformer subclass.
    model = HookedSAETransformer(hooked.cfg, tokenizer=hooked.tokenizer)
    model.load_state_dict(hooked.state_dict(), strict=False)
    model.eval()
    del hooked
    tokens = torch.tensor(job["contexts"], dtype=torch.long)
    where = {"cache": work}

    class Runner(NeuronpediaRunner):  # type: ignore[misc]
        def _extract_model_info(self) -> None:  # what it reads from hub SAEs' configs
            self.model_id = self.cfg.model_id = job["model_id"]
            self.layer = self.cfg.layer = int(job["layer"])

        def _initialize_model(self) -> None:
            self.model = model
            self.hook_name = self.sae.cfg.metadata.hook_name = job["hook"]

        def _setup_activation_store(self) -> None:
            self.activations_store = None  # the tokens file stands in for its dataset
            self.cached_activations_dir = where["cache"]

    def run(number: int) -> dict[str, Any]:
        out = work / f"dashboards-{number}"
        where["cache"] = work / f"cache-{number}"
        settings: dict[str, Any] = {
            "sae_set": "bench",
            "sae_path": job["sae"],
            "from_local_sae": True,
            "huggingface_dataset_path": "tokens-file",  # never read: the tokens file is there
            "outputs_dir": str(out),
            "n_prompts_total": tokens.shape[0],
            "n_tokens_in_prompt": tokens.shape[1],
            "n_prompts_in_forward_pass": int(job["batch"]),
        }
        for part in ("model", "sae"):
            settings[f"{part}_dtype"], settings[f"{part}_device"] = "float32", "cpu"
        begin = time.perf_counter()
        runner = Runner(NeuronpediaRunnerConfig(**settings, activation_store_device="cpu"))
        # Where it looks for the tokens before making its own: its output subfolder.
        torch.save(tokens, Path(runner.cfg.outputs_dir) / f"tokens_{tokens.shape[0]}.pt")
        runner.run()
        seconds = time.perf_counter() - begin
        written = sorted(Path(runner.cfg.outputs_dir).glob("batch-*.json"))
        features = sum(len(json.loads(p.read_text())["features"]) for p in written)
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(where["cache"], ignore_errors=True)
        return {"seconds": seconds, "batches": len(written), "features": features}

    return serve(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
