"""SAELens itself, in its pinned environment (`sae-lens`, interp_validator.envs; skipped where it
is not built unless INTERP_REQUIRE names validator-envs), reads a `layout="saelens"` harvest:
its ActivationsStore loads the folder as cached activations and every row it reads equals an
eager capture of the same context; `datasets` writing the same rows with the same features
produces our shard byte for byte; SAELens's training runner steps on the rows."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from harvest_helpers import JOB, SAELENS_FILES, SAELENS_HOOKS, eager_rows
from interp_harvest import Corpus, PackingPolicy, pack, tokenizer_encoder

TRAINER = Path(__file__).with_name("saelens_training_runner.py")


@pytest.fixture(scope="module")
def saelens_read(saelens_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from interp_validator.references.testing import env_python_or_skip, run_in_env

    python = env_python_or_skip("sae-lens")
    work = tmp_path_factory.mktemp("saelens-training")
    job = {
        "folder": str(saelens_run),
        "hook": SAELENS_HOOKS["resid_post.1"],
        "d_in": 128,
        "context_size": JOB["context_size"],
        "first_shard_contexts": JOB["contexts_per_shard"],
        "out": str(work / "out"),
    }
    (work / "job.json").write_text(json.dumps(job))
    run_in_env(python, TRAINER, str(work / "job.json"), env={"WANDB_MODE": "disabled"})
    return work / "out"


@pytest.mark.slow
def test_saelens_reads_the_folder_as_an_eager_capture_and_trains_from_it(
    eager_model: Any, corpus_file: Path, saelens_run: Path, saelens_read: Path
) -> None:
    policy = PackingPolicy(JOB["context_size"], "context", eager_model.tokenizer.bos_token_id)
    encode = tokenizer_encoder(eager_model.tokenizer)
    contexts = [c.tokens for c in pack(Corpus(corpus_file), encode, policy, max_contexts=10)]
    expected = eager_rows(eager_model, contexts, "resid_post.1").reshape(-1, eager_model.d_model)
    with np.load(saelens_read / "read.npz") as read:
        acts, token_ids = torch.from_numpy(read["acts"]), torch.from_numpy(read["token_ids"])
    # SAELens's store hands out every context, in order, as [context * position, d_in] rows
    assert acts.shape == expected.shape
    assert float((acts - expected).abs().max()) <= 1e-5
    assert float(expected.abs().max()) > 0.1
    assert token_ids.tolist() == [t for c in contexts for t in c]
    # `datasets` writing the same rows with the same features gives our file, byte for byte
    ours = (saelens_run / SAELENS_FILES[0]).read_bytes()
    assert (saelens_read / "rewritten.arrow").read_bytes() == ours
    report = json.loads((saelens_read / "training.json").read_text())
    assert report["rows_in_dataset"] == 10
    assert report["columns"] == [*SAELENS_HOOKS.values(), "token_ids"]
    assert report["steps"] == 6 and all(math.isfinite(x) and x > 0 for x in report["losses"])
    assert report["encoder_finite"] and report["encoder_change"] > 0
    assert "sae_weights.safetensors" in report["saved"]
    # every row the trainer stepped on is one of ours (its mixing buffer shuffles them)
    trained = torch.from_numpy(np.load(saelens_read / "trained.npy"))
    assert trained.shape == (6 * 16, eager_model.d_model)
    distance = torch.cdist(trained.double(), expected.double()).min(dim=1).values
    assert float(distance.max()) <= 1e-4
