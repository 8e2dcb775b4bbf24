"""What an activations job will write, priced from the model's config before any forward.

The plan needs only model facts (a `config.json`), so `--dry-run` answers without loading
weights: contexts, tokens, shards, the bytes of every point per context and in all, and whether
the output folder's disk has room. The job checks the same numbers before it starts.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp_core.address import Address, to_address
from interp_core.errors import InvalidArgument
from interp_core.facts import ModelFacts
from interp_core.shapes import point_shape
from interp_harvest.errors import DiskFull
from interp_harvest.progress import format_bytes

__all__ = [
    "DTYPE_BYTES",
    "LAYOUTS",
    "ActivationsPlan",
    "check_batch_size",
    "check_free_disk",
    "plan_activations",
]

# Storage dtypes a shard can hold, with their sizes; the token ids are int32, the sources int64.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# The output layouts: our shards + manifest, or SAELens's cached-activations datasets folder.
LAYOUTS = ("safetensors", "saelens")
# Headroom kept free on the disk: the manifest, safetensors headers, the filesystem's own needs.
DISK_MARGIN = 0.02
DISK_MARGIN_BYTES = 64 << 20


@dataclass(frozen=True)
class ActivationsPlan:
    points: tuple[Address, ...]
    context_size: int
    contexts: int
    contexts_per_shard: int
    dtype: str
    row_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    layout: str = "safetensors"

    @property
    def tokens(self) -> int:
        return self.contexts * self.context_size

    @property
    def shards(self) -> int:
        return math.ceil(self.contexts / self.contexts_per_shard)

    @property
    def bytes_per_context(self) -> int:
        values = sum(math.prod(shape) for shape in self.row_shapes.values())
        if self.layout == "saelens":
            # token ids (int32 each), and per column the Arrow list offsets (int32): one per
            # position and one per context
            offsets = 4 * (self.context_size + 1) * len(self.row_shapes)
            return values * DTYPE_BYTES[self.dtype] + 4 * self.context_size + offsets
        # token ids (int32 each) and the source (document, offset) pair (int64 each)
        return values * DTYPE_BYTES[self.dtype] + 4 * self.context_size + 16

    @property
    def total_bytes(self) -> int:
        return self.contexts * self.bytes_per_context

    def describe(self) -> dict[str, Any]:
        return {
            "points": [str(p) for p in self.points],
            "context_size": self.context_size,
            "contexts": self.contexts,
            "tokens": self.tokens,
            "contexts_per_shard": self.contexts_per_shard,
            "shards": self.shards,
            "dtype": self.dtype,
            "layout": self.layout,
            "row_shapes": {k: list(v) for k, v in self.row_shapes.items()},
            "bytes_per_context": self.bytes_per_context,
            "total_bytes": self.total_bytes,
        }

    def summary(self) -> str:
        lines = [
            f"{self.tokens:,} tokens = {self.contexts:,} contexts x {self.context_size} tokens, "
            f"in {self.shards:,} shards of {self.contexts_per_shard:,} contexts ({self.dtype})",
        ]
        for name, shape in self.row_shapes.items():
            per = math.prod(shape) * DTYPE_BYTES[self.dtype]
            lines.append(
                f"  {name:<24} {list(shape)} per context, {format_bytes(per * self.contexts)}"
            )
        lines.append(
            f"to disk: {self.total_bytes:,} bytes ({format_bytes(self.total_bytes)}) "
            + (
                "with token ids, as SAELens's cached-activations dataset"
                if self.layout == "saelens"
                else "with token ids and sources"
            )
        )
        return "\n".join(lines)


def plan_activations(
    facts: ModelFacts,
    points: Sequence[Any],
    *,
    tokens: int,
    context_size: int,
    dtype: str = "float32",
    contexts_per_shard: int = 256,
    layout: str = "safetensors",
) -> ActivationsPlan:
    """The plan for `tokens` tokens (rounded down to whole contexts) at `points`, written in
    `layout` (one of LAYOUTS)."""
    if layout not in LAYOUTS:
        message = f"layout={layout!r} is not an output layout; use one of {LAYOUTS}"
        raise InvalidArgument(message)
    if dtype not in DTYPE_BYTES:
        message = f"dtype={dtype!r} cannot be stored; use one of {sorted(DTYPE_BYTES)}"
        raise InvalidArgument(message)
    if not points:
        message = "no points to harvest; name at least one address (e.g. resid_post.6)"
        raise InvalidArgument(message)
    if contexts_per_shard < 1:
        message = f"contexts_per_shard must be positive, got {contexts_per_shard}"
        raise InvalidArgument(message)
    contexts = tokens // context_size if context_size > 0 else 0
    if contexts < 1:
        message = (
            f"a budget of {tokens:,} tokens holds no whole context of {context_size} tokens; "
            f"raise tokens or lower context_size"
        )
        raise InvalidArgument(message)
    addresses = tuple(to_address(p) for p in points)
    if len(set(addresses)) != len(addresses):
        message = f"a point is named twice in {[str(a) for a in addresses]}; name each once"
        raise InvalidArgument(message)
    row_shapes = {
        str(a): tuple(point_shape(a, facts, 1, context_size)[1:]) for a in addresses
    }  # point_shape refuses (PointUnsupported) a point this architecture does not have
    if layout == "saelens":
        # Refused here, so a dry run says so too, before any model load.
        from interp_harvest.saelens_layout import check_dtype, hook_columns

        check_dtype(dtype)
        hook_columns(facts, addresses, row_shapes)
    return ActivationsPlan(
        addresses, context_size, contexts, contexts_per_shard, dtype, row_shapes, layout
    )


def check_batch_size(batch_size: int) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        message = f"batch_size is contexts per forward, a positive int; got {batch_size!r}"
        raise InvalidArgument(message)


def check_free_disk(folder: Path, needed: int) -> int:
    """Refuse (DiskFull) unless the disk holding `folder` has room for `needed` more bytes and a
    margin; return the free bytes."""
    probe = folder
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    margin = max(int(needed * DISK_MARGIN), DISK_MARGIN_BYTES)
    if needed + margin > free:
        message = (
            f"the job needs {format_bytes(needed)} ({needed:,} bytes) more in {str(folder)!r} plus "
            f"{format_bytes(margin)} headroom, but its disk has {format_bytes(free)} free; free "
            f"space, choose another --out, lower --tokens or store --dtype bfloat16"
        )
        raise DiskFull(message)
    return free
