"""`layout="saelens"`: SAELens's cached-activations `datasets` folder, without SAELens: the
folder holds the same contexts and values as the safetensors run, its columns named by the
registry's TransformerLens hooks, and it resumes like the safetensors layout.
(test_saelens_training.py hands it to SAELens itself.)"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from harvest_helpers import JOB, SAELENS_FILES, SAELENS_HOOKS
from interp_harvest import DiskFull, ShardRedone, harvest_activations, read_activations
from interp_harvest import shards as shards_module
from interp_harvest.shards import read_manifest

from interp_core.errors import CapabilityUnsupported, PointUnsupported

HOOKS, FILES = SAELENS_HOOKS, SAELENS_FILES


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_folder_holds_the_safetensors_runs_contexts_by_hook_name(
    eager_model: Any, saelens_run: Path, reference_run: Path
) -> None:
    assert sorted(p.name for p in saelens_run.iterdir()) == sorted(
        [*FILES, "dataset_info.json", "state.json", "manifest.json"]
    )
    manifest = read_manifest(saelens_run)
    assert manifest is not None and manifest["complete"]
    assert manifest["format"] == "interp-harvest/saelens" and manifest["columns"] == HOOKS
    info = json.loads((saelens_run / "dataset_info.json").read_text())
    assert list(info["features"]) == [*HOOKS.values(), "token_ids"]
    assert info["features"]["blocks.1.hook_resid_post"] == {
        "shape": [16, eager_model.d_model],
        "dtype": "float32",
        "_type": "Array2D",
    }
    state = json.loads((saelens_run / "state.json").read_text())
    assert [f["filename"] for f in state["_data_files"]] == FILES
    for got, want in zip(
        read_activations(saelens_run), read_activations(reference_run), strict=True
    ):
        assert torch.equal(got["token_ids"], want["token_ids"])
        for point in JOB["points"]:
            assert torch.equal(got[point], want[point])
    # the plan's bytes are the payload (values, token ids, list offsets); files add headers
    written = sum(e["bytes"] for e in manifest["shards"])
    assert manifest["plan"]["total_bytes"] <= written <= manifest["plan"]["total_bytes"] + 3 * 4096


def test_a_truncated_shard_is_redone_and_a_short_corpus_renames_the_files(
    eager_model: Any, corpus_file: Path, saelens_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cached"
    shutil.copytree(saelens_run, out)
    shard = out / FILES[1]
    shard.write_bytes(shard.read_bytes()[:-64])
    with pytest.warns(ShardRedone, match=f"{FILES[1]} has .* bytes"):
        harvest_activations(eager_model, corpus_file, out, **JOB, layout="saelens", resume=True)
    assert _files(out) == _files(saelens_run)
    # a budget beyond the corpus: planned as many files, named by the count actually written
    job = {**JOB, "tokens": 10_000, "contexts_per_shard": 8}
    short = tmp_path / "s"
    manifest = harvest_activations(eager_model, corpus_file, short, **job, layout="saelens")
    count = len(manifest["shards"])
    assert manifest["corpus_exhausted"] and count < math.ceil(10_000 // 16 / 8)
    names = [f"data-{i:05d}-of-{count:05d}.arrow" for i in range(count)]
    assert [e["file"] for e in manifest["shards"]] == names
    state = json.loads((short / "state.json").read_text())
    assert [f["filename"] for f in state["_data_files"]] == names
    assert len(list(read_activations(short))) == count


def test_refusals(eager_model: Any, corpus_file: Path, tmp_path: Path) -> None:
    with pytest.raises(CapabilityUnsupported, match="float16"):
        harvest_activations(
            eager_model, corpus_file, tmp_path / "a", **JOB, dtype="bfloat16", layout="saelens"
        )
    job = {**JOB, "points": ["attn_probs.0"]}
    with pytest.raises(PointUnsupported, match="--format safetensors"):
        harvest_activations(eager_model, corpus_file, tmp_path / "b", **job, layout="saelens")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_disk_full_mid_shard_leaves_a_loadable_dataset_of_the_finished_shards(
    eager_model: Any,
    corpus_file: Path,
    saelens_run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ENOSPC where a full disk reports it on a buffered write: flushing the shard's bytes, after
    # part of them reached the temporary file.
    out = tmp_path / "cached"
    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        if os.readlink(f"/proc/self/fd/{descriptor}").endswith(f"{FILES[1]}.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(descriptor)

    monkeypatch.setattr(shards_module.os, "fsync", fsync)
    with pytest.raises(DiskFull, match=r"is full .* every shard the manifest lists is complete"):
        harvest_activations(eager_model, corpus_file, out, **JOB, layout="saelens")
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [FILES[0], "dataset_info.json", "state.json", "manifest.json"]
    )
    state = json.loads((out / "state.json").read_text())
    assert [f["filename"] for f in state["_data_files"]] == [FILES[0]]
    assert len(list(read_activations(out))) == 1  # its checksum passes
    harvest_activations(eager_model, corpus_file, out, **JOB, layout="saelens", resume=True)
    assert _files(out) == _files(saelens_run)
