"""The activations job on the eager backend: shards equal an eager capture of the same packed
contexts, the manifest describes them truthfully, and every failure (a truncated shard, a full
disk mid-run, a job that does not match the folder) is found, refused or redone so that the
output ends byte-identical to an uninterrupted run."""

from __future__ import annotations

import errno
import os
import shutil
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import torch
from harvest_helpers import JOB, documents, eager_rows
from interp_harvest import (
    Corpus,
    DiskFull,
    OutputExists,
    PackingPolicy,
    ResumeMismatch,
    ShardRedone,
    harvest_activations,
    pack,
    read_activations,
    tokenizer_encoder,
)
from interp_harvest import shards as shards_module
from interp_harvest.shards import read_manifest, sha256_file
from safetensors.torch import load_file

from interp_core.errors import ConfigError


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _expected_contexts(model: Any, corpus: Path) -> list[Any]:
    policy = PackingPolicy(JOB["context_size"], "context", model.tokenizer.bos_token_id)
    encode = tokenizer_encoder(model.tokenizer)
    return list(pack(Corpus(corpus), encode, policy, max_contexts=10))


def test_shards_equal_an_eager_capture_of_the_same_contexts(
    eager_model: Any, corpus_file: Path, reference_run: Path
) -> None:
    contexts = _expected_contexts(eager_model, corpus_file)
    shards = list(read_activations(reference_run))
    assert [s["token_ids"].shape[0] for s in shards] == [4, 4, 2]
    token_ids = torch.cat([s["token_ids"] for s in shards])
    assert token_ids.dtype == torch.int32
    assert token_ids.tolist() == [list(c.tokens) for c in contexts]
    source = torch.cat([s["source"] for s in shards])
    assert source.tolist() == [[c.document, c.offset] for c in contexts]
    # independently of the packer: the first context is the first 16 tokens of BOS + document
    # for each document in turn (the tokenizer's own call, no special tokens)
    tokenizer, bos = eager_model.tokenizer, eager_model.tokenizer.bos_token_id
    stream = [
        t for d in documents() for t in [bos, *tokenizer(d, add_special_tokens=False)["input_ids"]]
    ]
    assert token_ids[0].tolist() == stream[:16]
    # several documents were joined and cut, so the BOS handling was exercised
    assert len({c.document for c in contexts}) > 3
    assert any(c.offset > 0 for c in contexts)
    for point in JOB["points"]:
        harvested = torch.cat([s[point] for s in shards])
        expected = eager_rows(eager_model, [c.tokens for c in contexts], point)
        assert harvested.shape == (10, 16, eager_model.d_model)
        assert float((harvested - expected).abs().max()) <= 1e-5
        assert float(expected.abs().max()) > 0.1  # real activations, not zeros


def test_the_manifest_describes_the_shards(eager_model: Any, reference_run: Path) -> None:
    manifest = read_manifest(reference_run)
    assert manifest is not None
    assert manifest["complete"] and not manifest["corpus_exhausted"]
    assert manifest["backend"] == "eager"
    assert manifest["tokens"] == 160 and manifest["contexts"] == 10
    plan = manifest["plan"]
    assert plan["points"] == JOB["points"] and plan["dtype"] == "float32"
    assert plan["row_shapes"] == {p: [16, eager_model.d_model] for p in JOB["points"]}
    assert manifest["packing"] == {
        "context_size": 16,
        "bos": "context",
        "bos_token_id": eager_model.tokenizer.bos_token_id,
    }
    listed = [e["file"] for e in manifest["shards"]]
    assert sorted(p.name for p in reference_run.iterdir()) == sorted([*listed, "manifest.json"])
    for entry, first in zip(manifest["shards"], (0, 4, 8), strict=True):
        path = reference_run / entry["file"]
        assert entry["sha256"] == sha256_file(path)
        assert entry["bytes"] == path.stat().st_size
        assert entry["first_context"] == first and entry["tokens"] == entry["contexts"] * 16
    # the plan's bytes are the payload; the files add only their JSON headers
    written = sum(e["bytes"] for e in manifest["shards"])
    assert plan["total_bytes"] <= written <= plan["total_bytes"] + 3 * 1024


def _truncate(data: bytes) -> bytes:
    return data[:-100]


def _flip_a_byte(data: bytes) -> bytes:
    return data[:-7] + bytes([data[-7] ^ 0xFF]) + data[-6:]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(_truncate, r"has .* bytes, the manifest says"), (_flip_a_byte, "fails its sha256")],
)
def test_a_truncated_or_corrupted_shard_is_found_and_redone(
    eager_model: Any,
    corpus_file: Path,
    reference_run: Path,
    tmp_path: Path,
    damage: Any,
    reason: str,
) -> None:
    out = tmp_path / "harvest"
    shutil.copytree(reference_run, out)
    shard = out / "shard-00001.safetensors"
    shard.write_bytes(damage(shard.read_bytes()))
    with pytest.raises(ConfigError, match=reason):
        list(read_activations(out))
    with pytest.warns(ShardRedone, match=f"shard-00001.safetensors {reason}"):
        harvest_activations(eager_model, corpus_file, out, **JOB, resume=True)
    assert _files(out) == _files(reference_run)


def test_a_full_disk_mid_run_stops_clearly_and_leaves_the_finished_shards_valid(
    eager_model: Any,
    corpus_file: Path,
    reference_run: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "harvest"
    real_replace = os.replace

    def replace(source: Any, target: Any) -> None:
        if Path(target).name == "shard-00001.safetensors":
            raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(shards_module.os, "replace", replace)
    with pytest.raises(DiskFull, match=r"is full .* every shard the manifest lists is complete"):
        harvest_activations(eager_model, corpus_file, out, **JOB)
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "shard-00000.safetensors"]
    assert len(list(read_activations(out))) == 1  # checksums pass
    harvest_activations(eager_model, corpus_file, out, **JOB, resume=True)
    assert _files(out) == _files(reference_run)


def test_a_job_that_cannot_fit_is_refused_before_any_forward(
    eager_model: Any, corpus_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(
        "interp_harvest.plan.shutil.disk_usage", lambda _: usage(10**9, 10**9, 1000)
    )
    with pytest.raises(DiskFull, match="its disk has 1000 B free"):
        harvest_activations(eager_model, corpus_file, tmp_path / "harvest", **JOB)
    assert not list((tmp_path / "harvest").glob("shard-*"))


def test_an_existing_harvest_is_continued_only_when_asked_and_only_by_the_same_job(
    eager_model: Any, corpus_file: Path, reference_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "harvest"
    shutil.copytree(reference_run, out)
    with pytest.raises(OutputExists, match="--resume"):
        harvest_activations(eager_model, corpus_file, out, **JOB)
    with pytest.raises(ResumeMismatch, match="packing: was"):
        harvest_activations(eager_model, corpus_file, out, **JOB, bos="none", resume=True)
    # a complete harvest resumed is returned as it is, without a forward
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert harvest_activations(eager_model, corpus_file, out, **JOB, resume=True)["complete"]
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_a_short_corpus_ends_the_job_and_says_so(
    eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    job = {**JOB, "tokens": 10_000, "points": ["resid_post.0"]}
    manifest = harvest_activations(eager_model, corpus_file, tmp_path / "h", **job)
    assert manifest["complete"] and manifest["corpus_exhausted"]
    assert 10 <= manifest["contexts"] < 10_000 // 16
    stored = load_file(tmp_path / "h" / manifest["shards"][-1]["file"])
    assert stored["resid_post.0"].shape[1:] == (16, eager_model.d_model)
