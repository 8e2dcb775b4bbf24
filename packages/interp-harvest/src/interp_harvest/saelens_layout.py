"""The layout SAELens's cached-activations training reads: a HF `datasets` folder on disk.

What SAELens 6's `CacheActivationsRunner` writes, and `ActivationsStore` reads back with
`datasets.load_from_disk` when a run sets `use_cached_activations`:

- one column per hook, named by its TransformerLens hook name (`blocks.6.hook_resid_post`), of
  the `Array2D(shape=(context_size, d_in), dtype)` feature: each row one context's activations;
- a `token_ids` column, `Sequence(Value("int32"), length=context_size)`;
- the Arrow stream files `data-NNNNN-of-MMMMM.arrow`, with `dataset_info.json` (the features) and
  `state.json` (the files in order, a fingerprint) beside them.

The hook names come from the point registry's TransformerLens column for this model
(`interp_core.point_lookup.equivalent_for`), so a column means the tensor SAELens means by it.
The files are written here with pyarrow alone (the `datasets` package is not needed to write
them): the storage types and the metadata keys are the ones `datasets` itself writes, so
`load_from_disk` sees the same features it would have written.

Arrow has no bfloat16 and `Array2D` no dtype for it, so this layout stores float32 or float16.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.point_lookup import equivalent_for
from interp_core.point_spec import Width
from interp_core.points import POINTS
from interp_harvest.shards import atomic_write_json

__all__ = [
    "DATASET_INFO",
    "DTYPES",
    "STATE",
    "TOKEN_IDS",
    "arrow_shard",
    "data_file_name",
    "hook_columns",
    "read_arrow_shard",
    "write_dataset_files",
]

DATASET_INFO = "dataset_info.json"
STATE = "state.json"
TOKEN_IDS = "token_ids"
DTYPES = ("float32", "float16")
# The extension type `datasets` registers for Array2D columns; its name and metadata are what
# `load_from_disk` reads the feature back from.
_ARRAY2D = "datasets.features.features.Array2DExtensionType"


def data_file_name(index: int, total: int) -> str:
    return f"data-{index:05d}-of-{total:05d}.arrow"


def check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        message = (
            f"--format saelens cannot store {dtype}: Arrow has no bfloat16 and SAELens's Array2D "
            f"columns hold {' or '.join(DTYPES)}; store --dtype float16 (or float32), or use "
            f"--format safetensors, which keeps bfloat16"
        )
        raise CapabilityUnsupported(message)


def hook_columns(
    facts: ModelFacts, points: Sequence[Address], row_shapes: Mapping[str, Sequence[int]]
) -> dict[str, str]:
    """address -> the TransformerLens hook name its column is called by; refuses a point SAELens
    has no hook for, or whose rows are not `[context, width]`."""
    columns: dict[str, str] = {}
    for address in points:
        spec = POINTS[address.name]
        if spec.width is Width.SCORES or spec.dtype_kind != "float" or address.stream is not None:
            message = (
                f"{address} cannot be a SAELens cached-activations column: SAELens trains on "
                f"float vectors of one width per token at a TransformerLens hook"
            )
            raise PointUnsupported.build(
                message, None, "harvest it with --format safetensors, or pick a vector point"
            )
        equivalent = equivalent_for(address.name, "transformer_lens", facts)
        name = equivalent.format(address.layer)
        if name is None:
            message = f"{address} has no TransformerLens hook on this model ({equivalent.note})"
            raise PointUnsupported.build(
                message,
                "SAELens names its columns by hook",
                "harvest it with --format safetensors",
            )
        if len(row_shapes[str(address)]) != 2:
            message = f"{address} rows are {list(row_shapes[str(address)])}, not [context, width]"
            raise PointUnsupported.build(message, None, "harvest it with --format safetensors")
        columns[str(address)] = name
    named = list(columns.values())
    if len(set(named)) != len(named):
        message = f"two points share one TransformerLens hook name: {columns}"
        raise PointUnsupported.build(message, None, "harvest each of them in its own folder")
    return columns


def _features(
    columns: Mapping[str, str], row_shapes: Mapping[str, Sequence[int]], dtype: str, context: int
) -> dict[str, Any]:
    features: dict[str, Any] = {}
    for address, hook in columns.items():
        features[hook] = {"shape": list(row_shapes[address]), "dtype": dtype, "_type": "Array2D"}
    features[TOKEN_IDS] = {
        "feature": {"dtype": "int32", "_type": "Value"},
        "length": context,
        "_type": "List",
    }
    return features


def _schema(features: Mapping[str, Any], dtype: str, context: int) -> Any:
    import pyarrow as pa

    value = pa.float32() if dtype == "float32" else pa.float16()
    fields = []
    for hook, feature in features.items():
        if hook == TOKEN_IDS:
            fields.append(pa.field(hook, pa.list_(pa.int32(), context)))
            continue
        shape = feature["shape"]
        # In the order `datasets` writes them: the header then matches byte for byte.
        metadata = {
            "ARROW:extension:metadata": json.dumps([shape, dtype]),
            "ARROW:extension:name": _ARRAY2D,
        }
        fields.append(pa.field(hook, pa.list_(pa.list_(value)), metadata=metadata))
    info = {"info": {"features": dict(features)}}
    return pa.schema(fields, metadata={"huggingface": json.dumps(info)})


def arrow_shard(
    columns: Mapping[str, str],
    row_shapes: Mapping[str, Sequence[int]],
    dtype: str,
    tensors: Mapping[str, Any],
    token_ids: Any,
) -> bytes:
    """One Arrow stream file: a record batch of the contexts' rows (torch tensors by address,
    `[n, context, width]`) and their token ids (`[n, context]`)."""
    import numpy as np
    import pyarrow as pa

    n, context = (int(d) for d in token_ids.shape)
    features = _features(columns, row_shapes, dtype, context)
    schema = _schema(features, dtype, context)
    arrays = []
    for address in columns:
        rows = tensors[address]
        width = int(rows.shape[-1])
        flat = pa.array(rows.reshape(-1).numpy())
        inner = pa.ListArray.from_arrays(_offsets(np, n * context, width), flat)
        arrays.append(pa.ListArray.from_arrays(_offsets(np, n, context), inner))
    ids = pa.array(token_ids.reshape(-1).numpy().astype("int32"))
    arrays.append(pa.FixedSizeListArray.from_arrays(ids, context))
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _offsets(np: Any, count: int, step: int) -> Any:
    import pyarrow as pa

    return pa.array(np.arange(0, count * step + 1, step, dtype=np.int32))


def write_dataset_files(
    folder: Path,
    columns: Mapping[str, str],
    row_shapes: Mapping[str, Sequence[int]],
    dtype: str,
    context: int,
    shards: Sequence[Mapping[str, Any]],
) -> None:
    """`dataset_info.json` and `state.json` for the shards written so far, so the folder loads
    as a dataset after every shard (a killed run's finished part is usable as it is).

    The fingerprint `datasets` keys its caches by is derived from the shards' checksums: the same
    data gives the same fingerprint, so a resumed run ends byte-identical to an uninterrupted
    one.
    """
    features = _features(columns, row_shapes, dtype, context)
    info = {"citation": "", "description": "", "features": features, "homepage": "", "license": ""}
    digest = hashlib.sha256("".join(s["sha256"] for s in shards).encode()).hexdigest()
    state = {
        "_data_files": [{"filename": s["file"]} for s in shards],
        "_fingerprint": digest[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    # Keys in the order `datasets` writes them: the features' order is the columns' order.
    atomic_write_json(folder / DATASET_INFO, info, indent=2, sort_keys=False)
    atomic_write_json(folder / STATE, state, indent=2, sort_keys=False)


def read_arrow_shard(
    path: Path, columns: Mapping[str, str], row_shapes: Mapping[str, Sequence[int]]
) -> dict[str, Any]:
    """A shard's rows as torch tensors by address (`[n, *row shape]`), and `token_ids`
    (`[n, context]` int32)."""
    import pyarrow as pa
    import torch

    with pa.OSFile(str(path), "rb") as source:
        table = pa.ipc.open_stream(source).read_all()
    n = table.num_rows
    out: dict[str, Any] = {}
    for address, hook in columns.items():
        column = table.column(hook).combine_chunks()
        values = column.flatten().flatten().to_numpy(zero_copy_only=False)
        out[address] = torch.from_numpy(values.copy()).reshape(n, *row_shapes[address])
    ids = table.column(TOKEN_IDS).combine_chunks().flatten().to_numpy(zero_copy_only=False)
    out[TOKEN_IDS] = torch.from_numpy(ids.copy()).reshape(n, -1)
    return out
