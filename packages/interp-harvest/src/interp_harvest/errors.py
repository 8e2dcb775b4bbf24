"""The refusals of the dataset jobs: library errors (`interp_core.errors.InterpError`), each
saying what is wrong and what to do instead."""

from __future__ import annotations

from interp_core.errors import InterpError

__all__ = ["DiskFull", "OutputExists", "ReplicasLost", "ResumeMismatch"]


class DiskFull(InterpError, OSError):
    """Not enough free disk for the job's output (checked before starting, and on a write)."""


class OutputExists(InterpError, FileExistsError):
    """The output folder already holds a job's manifest and `resume` was not asked for."""


class ResumeMismatch(InterpError, ValueError):
    """`resume` was asked for, but the folder's manifest describes a different job."""


class ReplicasLost(InterpError, RuntimeError):
    """A job on Ray replicas has none left to run on: every replica died with its node or its
    process, or one could not load the model. The shards already written stay valid."""
