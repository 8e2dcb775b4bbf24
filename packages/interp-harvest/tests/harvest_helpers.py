"""Corpora and reference computations the harvest tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# One job shape for the activations tests: 10 contexts of 16 tokens in shards of 4 (so the last
# shard is short) and forwards of 3 contexts (so batches do not line up with shards).
JOB = {
    "points": ["resid_post.1", "mlp_out.0"],
    "tokens": 10 * 16 + 5,
    "context_size": 16,
    "contexts_per_shard": 4,
    "batch_size": 3,
}

# JOB's points as SAELens columns (the registry's TransformerLens hooks), and its files.
SAELENS_HOOKS = {"resid_post.1": "blocks.1.hook_resid_post", "mlp_out.0": "blocks.0.mlp.hook_out"}
SAELENS_FILES = [f"data-{i:05d}-of-00003.arrow" for i in range(3)]


# Documents of very different lengths, so contexts cut documents and join several of them; the
# words are drawn deterministically so every run packs the same tokens.
_WORDS = "the cat sat on a mat while paris rain fell over old river stones and bright lamps".split()


def documents(count: int = 23) -> list[str]:
    docs = []
    for index in range(count):
        length = 3 + (index * 7) % 41
        docs.append(" ".join(_WORDS[(index * 5 + k * 3) % len(_WORDS)] for k in range(length)))
    return docs


def write_jsonl_corpus(path: Path, docs: list[str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": i, "text": text}) for i, text in enumerate(docs or documents())]
    path.write_text("\n".join(lines) + "\n")
    return path


def eager_rows(model: Any, contexts: list[tuple[int, ...]], point: str) -> Any:
    """The point's activations for each context, one forward per context (no batching)."""
    import torch

    from interp_core import sync

    rows = [sync.capture(model, torch.tensor([c]), [point])[point][0] for c in contexts]
    return torch.stack(rows)
