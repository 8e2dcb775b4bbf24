"""Workloads that other packages add to `interp-bench`, found through entry points.

A package whose benchmark needs its own code (interp-sae's workload F encodes SAE features)
registers a callable in the `interp.bench` entry point group under the workload's letter, as
backends register in `interp.backends`: the validator never imports it. The callable takes the
run's context as keywords (`folder`, `local`, `repeats`, `work`, `say`, `errors`, and `kit`, the
bench's own tools: its row, prompts, a loopback server, reference environments' runners, paired
ratios) and returns its rows; a failure it cannot measure through goes into `errors`,
like every workload's. The tools come in `kit` so that the plugin never imports the validator
either: the import picture has no edge back from the plugin to its host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from interp_validator.bench.env_runner import EnvRunner
from interp_validator.bench.results import Row, paired_ratios, prompt_tokens, spread_note
from interp_validator.bench.served import running_server

__all__ = ["GROUP", "KIT", "PROVIDERS", "BenchKit", "run_plugin_workload"]


@dataclass(frozen=True)
class BenchKit:
    """The bench's tools a plugin workload uses, handed to it as the `kit` keyword."""

    row: type[
        Row
    ]  # a result row: Row(workload, subject, variant, value, unit, baseline, ratio, ...)
    prompt_tokens: Callable[[int, int], list[int]]  # (length, seed) -> token ids
    running_server: Callable[..., Any]  # (folder, backend, options) -> context of (url, key)
    # A reference engine's script kept loaded in its pinned environment:
    # env_runner(env, script, job, work, name=...) -> .ask(command) -> dict, .close()
    env_runner: Callable[..., Any] = EnvRunner
    # The validator's reference runners (`runner_tl.py`: TransformerLens from a local folder), for
    # a plugin's own runner script to put on its sys.path.
    references: Path = Path(__file__).resolve().parents[1] / "references"
    # Paired rounds: (mine, base) -> per-round ratios; ratios -> Row's ratio, spread, pairs.
    paired_ratios: Callable[[list[float], list[float]], list[float]] = paired_ratios
    spread_note: Callable[[list[float]], dict[str, Any]] = spread_note


KIT = BenchKit(row=Row, prompt_tokens=prompt_tokens, running_server=running_server)

GROUP = "interp.bench"
# Which distribution provides each plugin workload, for the message when it is absent.
PROVIDERS = {
    "F": "interpoint-sae[bench]",
    "H": "interpoint-harvest[bench]",
    "D": "interpoint-harvest[bench]",
}


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
    return list(workload(errors=errors, kit=KIT, **context))
