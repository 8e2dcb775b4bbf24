"""SAELens reads a harvested folder as its cached activations and trains from it; executed with
the sae-lens environment's python (SAELens and `datasets` live there, not in our venv).

argv: a JSON file {"folder", "hook", "d_in", "context_size", "contexts", "out"}. Written to
`out`: `read.npz` (every row SAELens's ActivationsStore loads from the cache, in order, and its
token ids), `rewritten.arrow` (the folder's first shard as `datasets` itself writes the same
rows), `trained.npy` (every row the trainer stepped on) and `training.json` (the steps and
their losses, the dataset's features, how far the encoder moved).

The run is SAELens's own `LanguageModelSAETrainingRunner` with `use_cached_activations`: the
activations come from the folder only. Its language model is needed for evaluations alone, so
a two-layer HookedTransformer built from a config stands in (no hub), and evaluations are off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets
import numpy as np
import torch
from sae_lens import LanguageModelSAERunnerConfig, LoggingConfig, StandardTrainingSAEConfig
from sae_lens.llm_sae_training_runner import LanguageModelSAETrainingRunner
from sae_lens.training.activations_store import ActivationsStore
from sae_lens.training.sae_trainer import SAETrainer
from transformer_lens import HookedTransformer, HookedTransformerConfig


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    context, d_in = job["context_size"], job["d_in"]
    torch.manual_seed(0)
    stand_in = HookedTransformer(
        HookedTransformerConfig(
            n_layers=2, d_model=d_in, n_ctx=context, d_head=32, d_vocab=1000, act_fn="relu"
        )
    )
    config = LanguageModelSAERunnerConfig(
        sae=StandardTrainingSAEConfig(d_in=d_in, d_sae=2 * d_in),
        model_name="interp-harvest-tiny",
        hook_name=job["hook"],
        dataset_path="unused",
        use_cached_activations=True,
        cached_activations_path=job["folder"],
        context_size=context,
        store_batch_size_prompts=2,
        n_batches_in_buffer=2,
        train_batch_size_tokens=16,
        training_tokens=6 * 16,
        n_eval_batches=0,
        logger=LoggingConfig(log_to_wandb=False),
        checkpoint_path=None,
        output_path=str(out / "sae"),
        device="cpu",
        verbose=False,
    )
    # The store reads the cache; this one-row dataset only satisfies its constructor's check
    # that some dataset is named (with a string it would go to the hub).
    placeholder = datasets.Dataset.from_dict({"tokens": [[0] * context]})

    store = ActivationsStore.from_config(stand_in, config, override_dataset=placeholder)
    acts, ids = [], []
    while True:
        try:
            batch, token_ids = store.get_raw_llm_batch(raise_on_epoch_end=True)
        except StopIteration:
            break
        acts.append(batch.numpy())
        ids.append(token_ids.numpy())
    np.savez(out / "read.npz", acts=np.concatenate(acts), token_ids=np.concatenate(ids))

    cached = datasets.load_from_disk(job["folder"])
    first = cached.select(range(job["first_shard_contexts"]))
    first.set_format("torch")
    rows = first[:]
    rows["token_ids"] = rows["token_ids"].to(torch.int32)
    again = datasets.Dataset.from_dict(rows, features=cached.features)
    again.save_to_disk(str(out / "rewritten"), num_shards=1)
    (out / "rewritten" / "data-00000-of-00001.arrow").rename(out / "rewritten.arrow")

    # Every batch the trainer steps on, and its loss, as SAELens computes them.
    trained, losses = [], []
    step = SAETrainer.step

    def recording_step(trainer: SAETrainer, batch: torch.Tensor):  # type: ignore[no-untyped-def]
        trained.append(batch.detach().clone().numpy())
        output = step(trainer, batch)
        losses.append(float(output.loss))
        return output

    SAETrainer.step = recording_step  # type: ignore[method-assign]
    runner = LanguageModelSAETrainingRunner(
        config, override_dataset=placeholder, override_model=stand_in
    )
    before = runner.sae.W_enc.detach().clone()
    sae = runner.run()
    after = sae.W_enc.detach()
    np.save(out / "trained.npy", np.concatenate(trained))
    report = {
        "steps": len(losses),
        "losses": losses,
        "rows_in_dataset": len(cached),
        "columns": cached.column_names,
        "features": {k: repr(v) for k, v in cached.features.items()},
        "encoder_change": float((after - before).abs().max()),
        "encoder_finite": bool(torch.isfinite(after).all()),
        "saved": sorted(p.name for p in (out / "sae").iterdir()),
    }
    (out / "training.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
