"""Workload A: a resid_pre layer × position patching sweep, ours against TransformerLens's own.

One clean and one corrupted prompt of `tokens` tokens on the bench model; the metric is the
logit difference of two tokens at the last position. TransformerLens runs
`patching.get_act_patch_resid_pre` (one forward per layer × position) in its pinned `refs`
environment, on the same folder, in a process kept loaded (`runner_patching.py`); ours runs
`interp_torch.patching.patch_sweep(..., point="resid_pre")`, whose patches are the rows of
batched forwards (eager) or concurrent requests (vLLM). Before any timing, both backends' grids
are checked against TransformerLens's (≤ 1e-4), so a fast wrong answer cannot pass.

Timing is conservative towards TransformerLens: its rounds time the patching function alone
(the clean run's cache is made once, outside), ours the whole `patch_sweep` (clean run
included). The eager rounds alternate with TransformerLens's before any vLLM engine starts; an
engine's idle processes take CPU time on this machine, so the vLLM rounds run afterwards and
their ratio is taken against those same TransformerLens rounds (their medians), with a second
set of TransformerLens rounds (`BESIDE`) run beside vLLM reported in the note.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interp_validator.bench.env_runner import EnvRunner
from interp_validator.bench.results import Row, paired_ratios, prompt_tokens, spread_note

__all__ = ["EAGER_GOAL", "VLLM_GOAL", "bench_patching"]

EAGER_GOAL = 1.5  # our eager sweep at least 1.5x TransformerLens's patching function
VLLM_GOAL = 4.0  # our vLLM sweep at least 4x it
TOLERANCE = 1e-4
# TransformerLens rounds run beside the running engine, for the note only (each takes a sweep).
BESIDE = 3


class _TransformerLens(EnvRunner):
    """The kept-loaded TransformerLens runner (see `runner_patching.py`)."""

    def __init__(self, folder: Path, job: dict[str, Any], work: Path) -> None:
        from interp_validator.references import ENGINE_ENV

        runner = Path(__file__).with_name("runner_patching.py")
        job = {"model_dir": str(folder), **job}
        super().__init__(
            ENGINE_ENV["tl_hooked"], runner, job, work, name="TransformerLens patching"
        )

    def grid(self) -> Any:
        from safetensors.torch import load_file

        out = self.work / "tl-grid.safetensors"
        self.ask(f"grid {out}")
        return load_file(str(out))["resid_pre"]

    def seconds(self) -> float:
        return float(self.ask("time")["seconds"])


def _check(name: str, ours: Any, theirs: Any) -> None:
    import torch

    worst = float((ours - theirs).abs().max())
    if ours.shape != theirs.shape or worst > TOLERANCE or float(theirs.std()) < 1e-3:
        message = (
            f"the {name} sweep disagrees with TransformerLens's get_act_patch_resid_pre "
            f"(max |diff| {worst:.3g}, shapes {tuple(ours.shape)} vs {tuple(theirs.shape)})"
        )
        raise RuntimeError(message)
    assert isinstance(ours, torch.Tensor)


def bench_patching(
    folder: Path,
    eager: Any,
    start_vllm: Callable[[], Any] | None,
    *,
    repeats: int,
    warmup: int,
    errors: dict[str, str],
    tokens: int = 16,
) -> list[Row]:
    """Rows for TransformerLens (the baseline), eager and, when `start_vllm` is given, vLLM."""
    from interp_core import LogitDiff
    from interp_torch.patching import patch_sweep

    clean, corrupt = prompt_tokens(tokens, 11), prompt_tokens(tokens, 12)
    place = next(i for i in range(tokens) if clean[i] != corrupt[i])
    correct, incorrect = clean[place], corrupt[place]
    metric = LogitDiff(correct, incorrect)
    job = {"clean": clean, "corrupt": corrupt, "correct": correct, "incorrect": incorrect}
    layers = eager.n_layers
    shape = (
        f"{layers} layers × {tokens} positions = {layers * tokens} patches, {tokens}-token prompts"
    )
    baseline = "TransformerLens get_act_patch_resid_pre"
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="interp-bench-patching-") as work:
        tl = _TransformerLens(folder, job, Path(work))
        try:
            theirs = tl.grid()  # also TransformerLens's warm-up

            def ours(model: Any) -> Any:
                return patch_sweep(model, clean, corrupt, metric, point="resid_pre")

            _check("eager", ours(eager), theirs)
            for _ in range(warmup):
                tl.seconds()
                ours(eager)
            tl_times, eager_times = [], []
            for _ in range(repeats):
                tl_times.append(tl.seconds())
                start = time.perf_counter()
                ours(eager)
                eager_times.append(time.perf_counter() - start)
            tl_median = statistics.median(tl_times)
            rows.append(Row("A", baseline, shape, tl_median, "s", baseline, 1.0))
            rows.append(
                Row(
                    "A",
                    "eager (ours)",
                    f"patch_sweep, rows of batched forwards, {shape}",
                    statistics.median(eager_times),
                    "s",
                    baseline,
                    goal=EAGER_GOAL,
                    **spread_note(paired_ratios(tl_times, eager_times)),
                )
            )
            if start_vllm is None:
                return rows
            try:
                hooked = start_vllm()
                _check("vllm", ours(hooked), theirs)
                for _ in range(warmup):
                    ours(hooked)
                vllm_times, beside = [], []
                for index in range(repeats):
                    if index < BESIDE:
                        beside.append(tl.seconds())
                    start = time.perf_counter()
                    ours(hooked)
                    vllm_times.append(time.perf_counter() - start)
            except Exception as exc:  # vLLM missing or failing: say so in the table
                errors["A vllm"] = f"{type(exc).__name__}: {exc}"
                return rows
            mine = statistics.median(vllm_times)
            ratios = [tl_median / t for t in vllm_times]
            note = (
                f"ratio against the TransformerLens rounds run before the engine started; "
                f"beside the running engine TransformerLens took {statistics.median(beside):.3f} s"
            )
            rows.append(
                Row(
                    "A",
                    "vllm (ours)",
                    f"patch_sweep, concurrent requests, {shape}",
                    mine,
                    "s",
                    baseline,
                    note=note,
                    goal=VLLM_GOAL,
                    **spread_note(ratios),
                )
            )
        finally:
            tl.close()
    return rows
