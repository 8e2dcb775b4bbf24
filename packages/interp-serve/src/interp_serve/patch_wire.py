"""A patch's values over HTTP: safetensors bytes (base64) inside the JSON write, not a float list.

A patch or ablation reaches the server as the `set` specs it expands into, in the one wire form
of every write (`interp_core.writes.spec_to_wire`). Their vectors are activation rows, one per
position, so the client replaces each set spec's `vector` list with
`{"safetensors": "<base64>"}`: one tensor named `vector`, float32 when every value survives
float32 exactly (what a float32 model's cache holds), float64 otherwise, so no value changes on
the way. The server turns it back into the list before `spec_from_wire` reads the spec, so
every check of a list vector applies unchanged. Other ops' vectors (directions) stay lists.

Written with the standard library only (safetensors is an 8-byte header length, a JSON header
and raw little-endian buffers): the server never executes anything it reads.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from interp_core.errors import SteeringSpecError

__all__ = ["KEY", "pack_patch_values", "unpack_patch_values"]

KEY = "safetensors"
_CODES = {"F32": "f", "F64": "d"}


def _refuse(what: str) -> NoReturn:
    error = SteeringSpecError.build(
        f"a set spec's vector is not readable safetensors: {what}",
        "patch values travel as base64 safetensors holding one 1-D F32/F64 tensor named vector",
        "send the vector as a list of numbers, or encode it as the remote backend does",
    )
    raise error


def _encode(values: Sequence[float]) -> str:
    narrow = all(struct.unpack("<f", struct.pack("<f", v))[0] == v for v in values)
    dtype = "F32" if narrow else "F64"
    data = array(_CODES[dtype], values)
    if sys.byteorder != "little":
        data.byteswap()
    raw = data.tobytes()
    header = {"vector": {"dtype": dtype, "shape": [len(values)], "data_offsets": [0, len(raw)]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format aligns the buffer to 8 bytes
    return base64.b64encode(struct.pack("<Q", len(text)) + text + raw).decode("ascii")


def _decode(encoded: object) -> list[float]:
    if not isinstance(encoded, str):
        _refuse(f"got a {type(encoded).__name__}, not a base64 string")
    try:
        blob = base64.b64decode(encoded, validate=True)
        (size,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8 : 8 + size])
    except (binascii.Error, struct.error, ValueError) as error:
        _refuse(str(error))
    entry = header.get("vector") if isinstance(header, Mapping) else None
    if not isinstance(entry, Mapping) or entry.get("dtype") not in _CODES:
        _refuse("no F32/F64 tensor named vector")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(offsets, list)):
        _refuse("the vector is not 1-D")
    start, end = 8 + size + int(offsets[0]), 8 + size + int(offsets[1])
    data = array(_CODES[entry["dtype"]])
    if end > len(blob) or (end - start) != shape[0] * data.itemsize:
        _refuse("its buffer does not hold its shape")
    data.frombytes(blob[start:end])
    if sys.byteorder != "little":
        data.byteswap()
    return [float(x) for x in data]


def pack_patch_values(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire specs with each set spec's vector as base64 safetensors (others unchanged)."""
    packed = []
    for spec in specs:
        if spec.get("op") == "set" and isinstance(spec.get("vector"), list):
            values = [float(v) for v in spec["vector"]]
            if all(math.isfinite(v) for v in values):  # a bad value is refused by the server
                spec = {**spec, "vector": {KEY: _encode(values)}}
        packed.append(spec)
    return packed


def unpack_patch_values(specs: Sequence[Any]) -> list[Any]:
    """The request's specs with safetensors vectors read back into lists, for spec_from_wire."""
    out = []
    for spec in specs:
        vector = spec.get("vector") if isinstance(spec, Mapping) else None
        if isinstance(vector, Mapping) and set(vector) == {KEY}:
            spec = {**spec, "vector": _decode(vector[KEY])}
        out.append(spec)
    return out
