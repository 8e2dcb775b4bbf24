"""The activations job: every packed context's activations at the declared points, on disk.

Output: a folder of `shard-NNNNN.safetensors` files and `manifest.json`. Each shard holds, for
its `n` contexts of `C` tokens, one tensor per point named by its address (`resid_post.6`:
`[n, C, d_model]`; every point's row shape is in the manifest), `token_ids` `[n, C]` int32 and
`source` `[n, 2]` int64 (document index, token offset of each context's first document token).
The manifest holds the job's identity (model, backend, corpus fingerprint, packing, plan), and
per shard its file, contexts, tokens, first context, bytes and sha256.

A kill at any moment loses at most the shard being built (see `interp_harvest.shards`);
`resume=True` checks every listed shard's checksum, drops the first bad one and all after it,
and continues from the packing position recorded after the last good one, so the output equals
an uninterrupted run's byte for byte.

`layout="saelens"` writes the same contexts as SAELens's cached-activations `datasets` folder
instead (`interp_harvest.saelens_layout`), with the same manifest, checksums and resume.

`replicas=N` runs the forwards on N replicas of the model on Ray (`interp_harvest.replicas`);
this process still packs, writes and keeps the manifest, so the output is the same either way.
"""

from __future__ import annotations

import gc
import hashlib
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from interp_core.errors import PointUnsupported
from interp_core.protocol import InterpModel
from interp_harvest.corpus import Corpus
from interp_harvest.errors import OutputExists, ResumeMismatch
from interp_harvest.layouts import SAFETENSORS_FORMAT, Layout, layout_for
from interp_harvest.packing import Context, PackingPolicy, pack, tokenizer_encoder
from interp_harvest.plan import (
    ActivationsPlan,
    check_batch_size,
    check_free_disk,
    plan_activations,
)
from interp_harvest.progress import Progress
from interp_harvest.replicas import (
    Forward,
    RayReplicas,
    check_replicas,
    local_forwards,
    uses_ray,
)
from interp_harvest.shards import (
    MANIFEST,
    atomic_write_bytes,
    atomic_write_json,
    read_manifest,
    remove_stray_temporaries,
    valid_prefix,
)

__all__ = ["FORMAT", "ShardRedone", "harvest_activations", "job_identity"]

FORMAT = SAFETENSORS_FORMAT
FORMAT_VERSION = 1
# The manifest keys a resume must find unchanged: the rest (shards, counts) is progress.
IDENTITY_KEYS = ("format", "format_version", "model", "backend", "corpus", "packing", "plan")


class ShardRedone(UserWarning):
    """A resume found a listed shard missing, truncated or corrupted, and redoes it."""


def job_identity(
    model: InterpModel,
    corpus: Corpus,
    policy: PackingPolicy,
    plan: ActivationsPlan,
    layout: Layout | None = None,
) -> dict[str, Any]:
    return {
        "format": FORMAT if layout is None else layout.format,
        "format_version": FORMAT_VERSION,
        "model": model.model_id,
        "backend": model.backend_name,
        "corpus": {"fingerprint": corpus.fingerprint(), "text_field": corpus.text_field},
        "packing": policy.describe(),
        "plan": plan.describe(),
    }


def harvest_activations(
    model: InterpModel,
    data: str | os.PathLike[str] | Corpus,
    out: str | os.PathLike[str],
    *,
    points: Sequence[Any],
    tokens: int,
    context_size: int,
    bos: str = "context",
    dtype: str = "float32",
    batch_size: int = 8,
    contexts_per_shard: int = 256,
    text_field: str = "text",
    resume: bool = False,
    layout: str = "safetensors",
    on_progress: Callable[[Progress], None] | None = None,
    replicas: int = 1,
    ray_address: str | None = None,
    load_options: Mapping[str, Any] | None = None,
    replica_cpus: float = 1,
    replica_gpus: float = 0,
) -> dict[str, Any]:
    """Run (or, with `resume`, continue) the job; return the final manifest. `layout` is
    "safetensors" (shards + manifest) or "saelens" (SAELens's cached-activations folder).

    `replicas > 1` (or a `ray_address`) runs the forwards on that many Ray actors
    (`interp_harvest.replicas`), each loading `model.model_id` on `model.backend_name` with
    `load_options` (give the ones `model` was loaded with) and `replica_cpus` / `replica_gpus`
    of the cluster; `model` itself then serves only the tokenizer and the checks. The output is
    the same files as one replica's. `ray_address` defaults to RAY_ADDRESS, else a local Ray."""
    check_batch_size(batch_size)
    # refused (a bad count or share, replicas without Ray) before anything is written
    check_replicas(replicas, ray_address, cpus=replica_cpus, gpus=replica_gpus)
    pool = None
    if uses_ray(replicas, ray_address):
        pool = RayReplicas(
            model.model_id,
            model.backend_name,
            replicas=replicas,
            ray_address=ray_address,
            load_options=load_options,
            cpus=replica_cpus,
            gpus=replica_gpus,
        )
    corpus = data if isinstance(data, Corpus) else Corpus(data, text_field=text_field)
    plan = plan_activations(
        model.facts,
        points,
        tokens=tokens,
        context_size=context_size,
        dtype=dtype,
        contexts_per_shard=contexts_per_shard,
        layout=layout,
    )
    writer = layout_for(layout, plan, model.facts)
    for address in plan.points:
        verdict = model.supports(address)
        if not verdict:
            message = f"{address} cannot be harvested on {model.backend_name}: {verdict.explain()}"
            raise PointUnsupported(message)
    policy = PackingPolicy(context_size, bos, getattr(model.tokenizer, "bos_token_id", None))
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    identity = {**job_identity(model, corpus, policy, plan, writer), **writer.describe()}
    manifest = _start(folder, identity, resume)
    if manifest.get("complete"):
        return manifest
    done = manifest["contexts"]
    check_free_disk(folder, (plan.contexts - done) * plan.bytes_per_context)
    atomic_write_json(folder / MANIFEST, manifest)
    writer.after_shards(folder, manifest["shards"])

    contexts = pack(
        corpus,
        tokenizer_encoder(model.tokenizer),
        policy,
        max_contexts=plan.contexts - done,
        start=tuple(manifest["resume_at"]),  # type: ignore[arg-type]
        first_index=done,
    )
    forwards = _forwards(_chunks(contexts, contexts_per_shard), batch_size)
    names = [str(a) for a in plan.points]
    with ExitStack() as stack:
        if pool is not None:
            captured = stack.enter_context(pool).map(forwards, names, dtype)
        else:
            captured = local_forwards(model, forwards, names, dtype)
        _write_shards(captured, folder, manifest, plan, writer, on_progress)
    done = manifest["contexts"]
    writer.finish(folder, manifest["shards"])
    manifest["complete"] = True
    # A corpus shorter than the budget ends the job early; the manifest says so rather than
    # letting a reader assume the budget was met.
    manifest["corpus_exhausted"] = done < plan.contexts
    atomic_write_json(folder / MANIFEST, manifest)
    return manifest


def _write_shards(
    captured: Iterator[tuple[Forward, dict[str, Any]]],
    folder: Path,
    manifest: dict[str, Any],
    plan: ActivationsPlan,
    writer: Layout,
    on_progress: Callable[[Progress], None] | None,
) -> None:
    """Each shard once its last batch is captured, in order, and the manifest after it."""
    import torch

    context_size = plan.context_size
    done = manifest["contexts"]
    started = time.monotonic()
    tokens_before = done * context_size  # written by earlier runs: not part of this run's rate
    this_run = 0
    shard = len(manifest["shards"])
    rows: dict[str, list[Any]] = {str(a): [] for a in plan.points}
    for forward, cache in captured:
        for address in plan.points:
            tensor = cache[str(address)]
            _check_rows(tensor, address, len(forward.batch), plan)
            rows[str(address)].append(tensor)
        del cache
        this_run += len(forward.batch) * context_size
        if on_progress is not None:
            on_progress(
                Progress(
                    tokens_before + this_run,
                    plan.tokens,
                    this_run,
                    time.monotonic() - started,
                    shard,
                    plan.shards,
                )
            )
        if not forward.last:
            continue
        group = forward.group
        tensors = {name: torch.cat(parts) for name, parts in rows.items()}
        # the shard's rows are held once, not twice, while it is encoded
        rows = {str(a): [] for a in plan.points}
        tensors["source"] = torch.tensor([[c.document, c.offset] for c in group], dtype=torch.int64)
        token_ids = torch.tensor([c.tokens for c in group], dtype=torch.int32)
        blob = writer.encode(tensors, token_ids, group[0].index)
        del tensors
        name = writer.name(shard)
        atomic_write_bytes(folder / name, blob)
        manifest["shards"].append(
            {
                "file": name,
                "first_context": group[0].index,
                "contexts": len(group),
                "tokens": len(group) * context_size,
                "bytes": len(blob),
                "sha256": hashlib.sha256(blob).hexdigest(),
                "resume_at": list(group[-1].resume_at),
            }
        )
        done += len(group)
        manifest["contexts"] = done
        manifest["tokens"] = done * context_size
        manifest["resume_at"] = list(group[-1].resume_at)
        atomic_write_json(folder / MANIFEST, manifest)
        writer.after_shards(folder, manifest["shards"])
        shard += 1
        # A backend's captures can sit in reference cycles (the eager one's do) that only the
        # cycle collector frees: collected once a shard, they cannot pile up between its
        # passes and the peak stays one shard's worth however long the job runs.
        gc.collect()


def _start(folder: Path, identity: dict[str, Any], resume: bool) -> dict[str, Any]:
    """The manifest to continue from: a fresh one, or a checked previous one."""
    previous = read_manifest(folder)
    fresh = {**identity, "shards": [], "contexts": 0, "tokens": 0, "resume_at": [0, 0]}
    fresh["complete"] = False
    if previous is None:
        remove_stray_temporaries(folder)
        return fresh
    if not resume:
        message = (
            f"{str(folder)!r} already holds a harvest ({previous.get('contexts', 0):,} contexts "
            f"written); continue it with --resume (resume=True) or choose an empty --out"
        )
        raise OutputExists(message)
    changed = [k for k in IDENTITY_KEYS if previous.get(k) != identity[k]]
    if changed:
        detail = "; ".join(f"{k}: was {previous.get(k)!r}, now {identity[k]!r}" for k in changed)
        message = (
            f"cannot resume {str(folder)!r}: it was written by a different job ({detail}); "
            f"rerun with the same model, backend, corpus and options, or choose an empty --out"
        )
        raise ResumeMismatch(message)
    remove_stray_temporaries(folder)
    kept, rejected = valid_prefix(folder, previous["shards"])
    if rejected is not None:
        redone = len(previous["shards"]) - len(kept)
        warnings.warn(
            f"{rejected}: it and the {redone - 1} shards after it are redone",
            ShardRedone,
            stacklevel=3,
        )
    if rejected is None and previous.get("complete"):
        return previous
    for entry in previous["shards"][len(kept) :]:
        (folder / entry["file"]).unlink(missing_ok=True)
    if not kept:
        return fresh
    if rejected is not None or len(kept) < len(previous["shards"]):
        # Continue from the packing position recorded with the last good shard.
        return _rewound(previous, kept)
    return previous


def _rewound(previous: dict[str, Any], kept: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        **previous,
        "shards": kept,
        "contexts": sum(e["contexts"] for e in kept),
        "tokens": sum(e["tokens"] for e in kept),
        "resume_at": kept[-1]["resume_at"],
        "complete": False,
    }


def _forwards(groups: Iterator[list[Context]], batch_size: int) -> Iterator[Forward]:
    """The job's forward batches: each shard's contexts in batches of `batch_size`, the last
    one of a shard short, so a batch never spans two shards (and a shard's batches are the same
    however the forwards are run)."""
    for group in groups:
        batches = list(_chunks(iter(group), batch_size))
        for index, batch in enumerate(batches):
            yield Forward(batch, group, index == len(batches) - 1)


def _chunks(items: Iterator[Context], size: int) -> Iterator[list[Context]]:
    chunk: list[Context] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_rows(tensor: Any, address: Any, batch: int, plan: ActivationsPlan) -> None:
    expected = (batch, *plan.row_shapes[str(address)])
    if tuple(tensor.shape) != expected:
        # A backend returning another shape than the registry's would make the manifest lie.
        message = (
            f"{address} came back as {list(tensor.shape)}, the point registry says "
            f"{list(expected)} for {batch} contexts; this backend's capture disagrees with the "
            f"point definition"
        )
        raise PointUnsupported(message)
