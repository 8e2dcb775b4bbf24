"""Workload G: the lens over a generation against plain generation on the same engine.

One stream, `new_tokens` greedy tokens; the lens reads the top-10 at every layer at every
position (prompt and generated), decoded in the vLLM workers so only the top-k leaves them. Each
engine's lens run is paired with its own plain `generate` (round i against round i, the order
alternating through `interleave`), so the ratio is what the read-out costs on that engine: the
compiled `vllm-static` (resid_post declared at every layer) against its own generation, with the
goal of the house issue (≥ 0.6×), and the hooked backend against its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from interp_validator.bench.results import Row, interleave, paired_ratios, spread_note

__all__ = ["STATIC_GOAL", "bench_lens_generation"]

STATIC_GOAL = 0.6  # the lens over a generation on vllm-static vs its plain generation


def bench_lens_generation(
    models: dict[str, Any], *, repeats: int, warmup: int, new_tokens: int = 64, top_n: int = 10
) -> list[Row]:
    """Rows per engine in `models` ("static", "hooked"): plain tok/s, and the lens's."""
    from interp_core import sync
    from interp_core.readouts import LensSpec
    from interp_validator.bench.results import prompt_tokens

    prompt = [prompt_tokens(64)]
    produced: dict[str, int] = {}

    def plain(name: str, model: Any) -> Callable[[], None]:
        def run() -> None:
            generation = sync.generate(model, prompt, max_new_tokens=new_tokens, temperature=0.0)
            produced[f"{name} plain"] = len(generation.token_ids)

        return run

    def lens(name: str, model: Any) -> Callable[[], None]:
        def run() -> None:
            steps = list(
                sync.generate_with_lens(
                    model,
                    prompt,
                    [LensSpec(None)],
                    top_n=top_n,
                    max_new_tokens=new_tokens,
                    temperature=0.0,
                )
            )
            # The generated positions read, plus the last sampled token (never fed back).
            produced[f"{name} lens"] = sum(step.is_generated for step in steps) + 1

        return run

    labels = {"static": "vllm-static (compiled)", "hooked": "vllm (hooked)"}
    rows = []
    for name, model in models.items():
        variants = {f"{name} plain": plain(name, model), f"{name} lens": lens(name, model)}
        times = interleave(variants, repeats=repeats, warmup=warmup)
        rate = {v: produced[v] / statistics.median(t) for v, t in times.items()}
        baseline = f"{labels[name]}, generate, {new_tokens} new tokens"
        shape = f"top-{top_n} at all {model.n_layers} layers, {new_tokens} new tokens"
        rows.append(
            Row("G", "vllm (ours)", baseline, rate[f"{name} plain"], "tok/s", baseline, 1.0)
        )
        # Tokens per round are equal (greedy, same prompt), so time ratios are rate ratios.
        paired = spread_note(paired_ratios(times[f"{name} plain"], times[f"{name} lens"]))
        rows.append(
            Row(
                "G",
                "vllm (ours)",
                f"{labels[name]}, generate_with_lens, {shape}",
                rate[f"{name} lens"],
                "tok/s",
                baseline,
                goal=STATIC_GOAL if name == "static" else None,
                **paired,
            )
        )
    return rows
