"""Reading a harvest back: shards checked against the manifest, one at a time."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from interp_core.errors import ConfigError
from interp_harvest.layouts import SAELENS_FORMAT
from interp_harvest.shards import read_manifest, valid_prefix

__all__ = ["read_activations"]


def read_activations(
    folder: str | os.PathLike[str], *, verify: bool = True
) -> Iterator[dict[str, Any]]:
    """Each shard's tensors (point addresses, `token_ids`, and `source` in the safetensors
    layout), in order; a SAELens-layout folder is read through pyarrow, its columns by address.

    With `verify` every shard's sha256 is checked first and a bad one is refused, so a reader
    never trains on a truncated file.
    """
    from safetensors.torch import load_file

    root = Path(folder)
    manifest = read_manifest(root)
    if manifest is None:
        message = f"{str(root)!r} holds no manifest.json: it is not a harvest folder"
        raise ConfigError(message)
    shards = manifest["shards"]
    if verify:
        _, rejected = valid_prefix(root, shards)
        if rejected is not None:
            message = f"{str(root)!r}: {rejected}; rerun the job with --resume to redo it"
            raise ConfigError(message)
    if manifest.get("format") == SAELENS_FORMAT:
        from interp_harvest.saelens_layout import read_arrow_shard

        shapes = manifest["plan"]["row_shapes"]
        for entry in shards:
            yield read_arrow_shard(root / entry["file"], manifest["columns"], shapes)
        return
    for entry in shards:
        yield load_file(root / entry["file"])
