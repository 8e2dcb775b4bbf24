"""How a finished request's captured rows travel from a vLLM worker to the client.

Through vLLM's RPC a tensor is copied about six times (counted along the code path, not
measured): the worker's bytes, the pickled message in the worker→engine-core queue, the engine
core's unpickled copy, its msgpack frame to the client, the client's received frame and the
client's tensor. The engine core relays every byte
between two forward steps, and on a small machine the copies compete with the forward itself
(eight requests capturing every layer move megabytes each).

When the client and the worker share a host and a shared-memory filesystem, the worker writes a
request's rows once into one file under `/dev/shm` and the RPC answer names the file, the
offsets, shapes and dtypes; the client reads the file once into memory it owns and deletes it.
Two copies, and the engine core sees a few hundred bytes. Anything else (another node, no
`/dev/shm`, too little room in it, a small answer) travels inline as before, so the choice never
changes a value, only its route.

The client describes where it runs (`client_route`); the worker decides (`pack_rows`), because
only it knows whether it shares the client's `/dev/shm`: same host name, same kernel boot, and
the same `/dev/shm` filesystem (device and inode), which separate containers on one host do not.
The files are named after the client's process and engine, so that the model's shutdown removes
any it never read (`remove_leftovers`) and no other model's.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
from pathlib import Path
from typing import Any

import torch

from interp_vllm.tensor_wire import decode_tensor, encode_tensor

__all__ = ["client_route", "engine_tag", "pack_rows", "remove_leftovers", "unpack_rows"]

SHM = Path("/dev/shm")
PREFIX = "interp-rows"
# Below this an inline answer is as cheap as opening, writing and deleting a file.
MIN_FILE_BYTES = 64 * 1024
ALIGN = 8
_serial = itertools.count()


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _shm_identity() -> list[int] | None:
    try:
        found = os.stat(SHM)
    except OSError:
        return None
    return [found.st_dev, found.st_ino]


@functools.cache
def _here() -> dict[str, Any] | None:
    shm = _shm_identity()
    if shm is None or not os.access(SHM, os.W_OK):
        return None
    return {"pid": os.getpid(), "host": socket.gethostname(), "boot": _boot_id(), "shm": shm}


def client_route(engine: object) -> dict[str, Any] | None:
    """Where this client runs, as the workers compare it; None where there is no `/dev/shm`.

    The files carry the engine's tag, so one model's shutdown never removes another's.
    """
    here = _here()
    return None if here is None else {**here, "tag": engine_tag(engine)}


def engine_tag(engine: object) -> str:
    return f"{os.getpid()}-{id(engine):x}"


def _shares_shm(route: dict[str, Any] | None) -> bool:
    if not route or route.get("shm") is None:
        return False
    return (
        route.get("host") == socket.gethostname()
        and route.get("boot") == _boot_id()
        and route.get("shm") == _shm_identity()
    )


def pack_rows(rows: dict[str, torch.Tensor], route: dict[str, Any] | None) -> dict[str, Any]:
    """`rows` as an RPC answer: one shared-memory file where the client can read it, else inline."""
    tensors = {key: value.detach().to("cpu").contiguous() for key, value in rows.items()}
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    if total >= MIN_FILE_BYTES and _shares_shm(route):
        written = _write_file(tensors, total, str(route["tag"]))  # type: ignore[index]
        if written is not None:
            return {"captured": {}, "captured_file": written}
    return {"captured": {key: encode_tensor(t) for key, t in tensors.items()}}


def _write_file(tensors: dict[str, torch.Tensor], total: int, tag: str) -> dict | None:
    """Write every tensor back to back into one new file; None (go inline) if it cannot."""
    try:
        room = os.statvfs(SHM)
        if room.f_bavail * room.f_frsize < 2 * total + ALIGN * len(tensors):  # room for others
            return None
        if not tag.replace("-", "").isalnum():
            return None
        path = SHM / f"{PREFIX}-{tag}-{os.getpid()}-{next(_serial)}"
        parts: dict[str, list[Any]] = {}
        offset = 0
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as out:
            for key, tensor in tensors.items():
                size = tensor.numel() * tensor.element_size()
                if size:
                    out.write(memoryview(tensor.view(torch.uint8).numpy()))
                parts[key] = [offset, list(tensor.shape), str(tensor.dtype).removeprefix("torch.")]
                # Every part starts 8-byte aligned, so the client can view it as its dtype.
                pad = -size % ALIGN
                out.write(bytes(pad))
                offset += size + pad
    except OSError:
        path.unlink(missing_ok=True)
        return None
    return {"path": str(path), "size": offset, "parts": parts}


def unpack_rows(answer: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of one worker's answer, owned by the caller, whichever route they took."""
    rows = {key: decode_tensor(*wire) for key, wire in answer.get("captured", {}).items()}
    file = answer.get("captured_file")
    if file is None:
        return rows
    path = Path(file["path"])
    if path.parent != SHM or not path.name.startswith(f"{PREFIX}-"):
        msg = f"a vLLM worker named {str(path)!r} as its rows file, which is not one of ours"
        raise ValueError(msg)
    buffer = bytearray(int(file["size"]))
    try:
        with path.open("rb") as source:
            got = source.readinto(buffer)
    finally:
        path.unlink(missing_ok=True)
    if got != len(buffer):
        msg = f"the rows file {str(path)!r} held {got} bytes, the worker wrote {len(buffer)}"
        raise ValueError(msg)
    empty = torch.empty(0, dtype=torch.uint8)
    raw = torch.frombuffer(buffer, dtype=torch.uint8) if buffer else empty
    for key, (offset, shape, dtype) in file["parts"].items():
        kind = getattr(torch, dtype)
        size = torch.Size(shape).numel() * kind.itemsize
        rows[key] = raw[offset : offset + size].view(kind).reshape(shape)
    return rows


def remove_leftovers(engine: object) -> int:
    """Delete the rows files written for `engine`'s requests and never read (abandoned ones)."""
    removed = 0
    for path in SHM.glob(f"{PREFIX}-{engine_tag(engine)}-*"):
        path.unlink(missing_ok=True)
        removed += 1
    return removed
