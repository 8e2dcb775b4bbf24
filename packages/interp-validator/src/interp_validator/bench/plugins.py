"""Workloads that other packages add to `interp-bench`, found through entry points.

A package whose benchmark needs its own code (interp-sae's workload F encodes SAE features)
registers a callable in the `interp.bench` entry point group under the workload's letter, as
backends register in `interp.backends`: the validator never imports it. The callable takes the
run's context as keywords (`folder`, `local`, `repeats`, `work`, `say`, `errors`) and returns
its rows; a failure it cannot measure through goes into `errors`, like every workload's.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from interp_validator.bench.results import Row

__all__ = ["GROUP", "PROVIDERS", "run_plugin_workload"]

GROUP = "interp.bench"
# Which distribution provides each plugin workload, for the message when it is absent.
PROVIDERS = {"F": "interpoint-sae[bench]"}


def run_plugin_workload(name: str, errors: dict[str, str], **context: Any) -> list[Row]:
    """Run workload `name` from its entry point; record why not in `errors` when it cannot."""
    found = [point for point in entry_points(group=GROUP) if point.name == name]
    if not found:
        provider = PROVIDERS.get(name, "the package that provides it")
        errors[name] = f"workload {name} is not installed: pip install '{provider}'"
        return []
    try:
        workload = found[0].load()
    except Exception as exc:  # a broken install is reported in the table, not raised
        errors[name] = f"workload {name} did not load: {type(exc).__name__}: {exc}"
        return []
    return list(workload(errors=errors, **context))
