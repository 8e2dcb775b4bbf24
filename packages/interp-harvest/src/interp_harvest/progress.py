"""Progress of a running job, and the one-line bar the CLI draws from it.

The jobs report a `Progress` after every forward to an `on_progress` callback; the bar is one
such callback. Rates count only this run's tokens, so a resumed job's ETA is not flattered by
the shards a previous run wrote.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

__all__ = ["Progress", "ProgressBar", "format_bytes"]


@dataclass(frozen=True)
class Progress:
    tokens_done: int
    tokens_total: int
    tokens_this_run: int
    seconds_this_run: float
    shard: int
    shards_total: int

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_this_run / self.seconds_this_run if self.seconds_this_run > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        rate = self.tokens_per_second
        return (self.tokens_total - self.tokens_done) / rate if rate > 0 else None


def format_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class ProgressBar:
    """Redraws one line on a terminal; elsewhere (a log file) prints a line at most every
    `interval` seconds, so a days-long job's log stays readable."""

    def __init__(self, stream: TextIO | None = None, *, width: int = 30, interval: float = 30.0):
        self.stream = stream or sys.stderr
        self.width = width
        self.interval = interval
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = 0.0

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        finished = progress.tokens_done >= progress.tokens_total
        if not self._tty and not finished and now - self._last < self.interval:
            return
        self._last = now
        fraction = progress.tokens_done / progress.tokens_total if progress.tokens_total else 1.0
        filled = int(self.width * fraction)
        bar = "#" * filled + "-" * (self.width - filled)
        line = (
            f"[{bar}] {fraction:6.1%} {progress.tokens_done:,}/{progress.tokens_total:,} tokens "
            f"{progress.tokens_per_second:,.0f} tok/s ETA {_duration(progress.eta_seconds)} "
            f"shard {progress.shard + 1}/{progress.shards_total}"
        )
        end = "\n" if finished or not self._tty else ""
        self.stream.write(("\r" if self._tty else "") + line + end)
        self.stream.flush()
