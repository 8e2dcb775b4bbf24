"""A process that kills a stand-in engine core holding a segment, then releases it or not.

Run by test_shm_segments.py as a script, so that its own exit shows what the resource tracker
says: `python _leaky_core.py release|keep`.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from multiprocessing import shared_memory

from interp_vllm import shm_segments


def _hold(ready: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    segment = shared_memory.SharedMemory(create=True, size=4096)
    ready.put(segment.name)
    signal.pause()


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    core = context.Process(target=_hold, args=(ready,))
    core.start()
    ready.get(timeout=60)
    shm_segments.note([core])
    core.kill()
    core.join(10)
    if sys.argv[1] == "release":
        print("released", shm_segments.release([core]))
