"""How does a cached model folder come into being so that no reader ever sees half of it?

`cache_root(cache_dir, variable, leaf)` is where a kind of cached folder lives (the test
families, the converted real models). `publish_folder(target, manifest, write)` writes into a
private temporary folder beside the target and renames it into place; a folder that exists with
its manifest is complete. Threads of one process are serialised by the caller's lock; processes
race only on the rename, and the loser discards its copy and uses the winner's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["cache_root", "publish_folder"]


def cache_root(cache_dir: str | os.PathLike[str] | None, variable: str, leaf: str) -> Path:
    """`cache_dir`, else the folder the environment variable `variable` names, else
    `~/.cache/interp-engine/<leaf>`."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get(variable)
    if env:
        return Path(env)
    return Path.home() / ".cache" / "interp-engine" / leaf


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def publish_folder(target: Path, manifest: str, write: Callable[[Path], None]) -> Path:
    """Build `target` with `write(scratch)` unless it already holds `manifest`; return it."""
    if (target / manifest).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(scratch)
        # mkdtemp makes the folder private; the cache is meant to be read like any other.
        scratch.chmod(0o777 & ~_umask())
        try:
            os.rename(scratch, target)
        except OSError:
            # Another process finished first (the target is a non-empty folder now).
            if not (target / manifest).is_file():
                raise
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)
    return target
