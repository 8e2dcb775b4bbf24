"""Shard files and the manifest that lists them: atomic writes and checksums.

A shard is written to a temporary name in the output folder, flushed to disk and renamed into
place; only then does the manifest (itself replaced atomically) list it with its sha256. So a
kill at any instant leaves every listed shard complete and valid, and at worst a stray `*.tmp`
that the next run removes. A shard whose bytes no longer hash to the manifest's value (truncated,
corrupted, deleted) is found on resume and redone with every shard after it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interp_harvest.errors import DiskFull

__all__ = [
    "MANIFEST",
    "atomic_write_bytes",
    "atomic_write_json",
    "read_manifest",
    "remove_stray_temporaries",
    "sha256_file",
    "shard_name",
    "valid_prefix",
]

MANIFEST = "manifest.json"
_TMP = ".tmp"


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.safetensors"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """`data` at `path`, all or nothing: a crash leaves the old file (or none), never a part."""
    temporary = path.with_name(path.name + _TMP)
    try:
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        if error.errno == errno.ENOSPC:
            message = (
                f"the disk holding {str(path.parent)!r} is full ({len(data):,} bytes could not "
                f"be written to {path.name}); every shard the manifest lists is complete and "
                f"valid: free space and rerun with --resume (resume=True)"
            )
            raise DiskFull(message) from error
        raise
    _sync_folder(path.parent)


def atomic_write_json(
    path: Path, value: Mapping[str, Any], *, indent: int = 1, sort_keys: bool = True
) -> None:
    text = json.dumps(value, indent=indent, sort_keys=sort_keys) + "\n"
    atomic_write_bytes(path, text.encode())


def _sync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is on disk (POSIX); Windows has no
    # folder handles to sync, and the rename is already durable there.
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def remove_stray_temporaries(folder: Path) -> list[str]:
    """Delete the half-written files a killed run left; return their names."""
    stray = sorted(p.name for p in folder.glob(f"*{_TMP}"))
    for name in stray:
        (folder / name).unlink(missing_ok=True)
    return stray


def valid_prefix(
    folder: Path, shards: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """The listed shards up to the first one that is missing or fails its checksum, and why that
    one was rejected (None when all pass). Contexts are packed in order, so a shard is only worth
    keeping if every shard before it is."""
    kept: list[dict[str, Any]] = []
    for entry in shards:
        path = folder / entry["file"]
        if not path.is_file():
            return kept, f"{entry['file']} is listed but missing"
        if path.stat().st_size != entry["bytes"]:
            return kept, (
                f"{entry['file']} has {path.stat().st_size:,} bytes, the manifest says "
                f"{entry['bytes']:,} (truncated)"
            )
        if sha256_file(path) != entry["sha256"]:
            return kept, f"{entry['file']} fails its sha256 (corrupted)"
        kept.append(entry)
    return kept, None
