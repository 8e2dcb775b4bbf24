"""Which shared-memory segments an engine's processes made, and their release once they are gone.

vLLM's engine core and workers talk through `multiprocessing.shared_memory` ring buffers
(`shm_broadcast.MessageQueue`). A ring buffer's creator unlinks its segment only from
`ShmRingBuffer.__del__`; an engine core killed (vLLM's shutdown kills one that misses its grace
period, a crash, an operator's SIGKILL) never runs it, the segment stays in `/dev/shm`, and the
resource tracker that the engine's processes share with ours prints "There appear to be N leaked
shared_memory objects" when this process exits.

`note(children)` records, right after the engine started, the segments its processes have mapped
(read from `/proc/PID/maps`; nothing is guessed from names). `release(children)`, once those
processes have exited, removes each recorded segment that still exists and that no live process
maps, and tells the resource tracker it is gone. A segment some other live process maps is left
alone. Where there is no `/proc` (not Linux) nothing is recorded and nothing is removed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["mapped_segments", "note", "release"]

_SHM = "/dev/shm/"
_PROC = Path("/proc")
# pid of an engine's first process (its engine core) -> the segments its processes mapped.
_NOTED: dict[int, set[str]] = {}


def _descendants(pids: Iterable[int]) -> set[int]:
    parents: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(pids), list(pids)
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def mapped_segments(pids: Iterable[int]) -> set[str]:
    """The names of the `/dev/shm` segments the processes `pids` have mapped."""
    names: set[str] = set()
    for pid in pids:
        try:
            maps = (_PROC / str(pid) / "maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            _, sep, path = line.partition(_SHM)
            if sep:
                name = path.split(" (deleted)")[0].strip()
                if name and "/" not in name:
                    names.add(name)
    return names


def note(children: list[Any]) -> None:
    """Record the segments the engine's processes (`children` and theirs) have mapped now."""
    if not _PROC.is_dir() or not children:
        return
    pids = [int(child.pid) for child in children]
    _NOTED[pids[0]] = mapped_segments(_descendants(pids))


def release(children: list[Any]) -> list[str]:
    """Remove the recorded segments of an engine whose processes have exited; their names."""
    if not children:
        return []
    names = _NOTED.pop(int(children[0].pid), set())
    if any(child.is_alive() for child in children):
        return []  # still running: never pull memory from under a live engine
    left = {n for n in names if os.path.exists(_SHM + n)}
    if not left:
        return []
    others = [int(e.name) for e in _PROC.iterdir() if e.name.isdigit()]
    left -= mapped_segments(others)
    removed = []
    for name in sorted(left):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_SHM + name)
            removed.append(name)
            _forget(name)
    return removed


def _forget(name: str) -> None:
    """Tell this process's resource tracker the segment is gone, so it warns of no leak.

    Only where the tracker already runs: the engine's processes registered the segment with the
    tracker they inherited from us; starting one now would only make a tracker that never knew it.
    """
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if tracker is None or getattr(tracker, "_fd", None) is None:
        return
    with contextlib.suppress(Exception):
        resource_tracker.unregister("/" + name, "shared_memory")
