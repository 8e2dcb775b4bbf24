"""What an activations job costs on a GPU, priced by interp-sizer from the model's config alone.

The sizer prices the job as it runs: `batch_size` sequences of `context_size` tokens at once,
the harvested points captured, on the backend asked for (`auto` is priced as `vllm`, what it
picks on a GPU with vLLM installed). It answers per GPU whether that fits and the memory terms,
and its roofline's prefill speed, from which the job's time is the token budget over that
speed, with the roofline's stated spread. The sizer's figures are estimates of a GPU's memory
and speed, not measurements of this machine; the dry run says so. A model or setting the sizer
does not price leaves the rest of the dry run standing, with the sizer's reason; an unknown
`--gpu` is refused.
"""

from __future__ import annotations

from typing import Any

from interp_harvest.progress import format_bytes

__all__ = ["price_on_gpu"]


def price_on_gpu(
    model: str, backend: str, plan: Any, batch_size: int, gpu: str | None, *, passes: int = 1
) -> list[str]:
    """Lines saying the memory per GPU and the time of the job `plan` describes (its `points`,
    `context_size` and `tokens`), which reads the corpus `passes` times."""
    from interp_sizer import SizerError, UnknownGpu, size
    from interp_sizer.formats import BACKENDS

    priced = backend if backend in BACKENDS else "vllm"
    try:
        report = size(
            model,
            backend=priced,
            capture=tuple(str(p) for p in plan.points),
            concurrency=batch_size,
            max_model_len=plan.context_size,
            prompt_tokens=plan.context_size,
            gpu=gpu,
            hub=False,
        )
    except UnknownGpu:
        raise  # the caller's --gpu: refused, with the catalogue's nearest names
    except SizerError as error:  # a model or setting the sizer does not price: the plan stands
        return [f"on a GPU: not priced by interp-sizer ({error})"]
    fit = report.selected
    memory = sum(term.bytes for term in fit.terms)
    where = f"{fit.num_gpus} x {fit.gpu.name}" if fit.num_gpus > 1 else fit.gpu.name
    verdict = "fits" if fit.fits else "does not fit (" + "; ".join(fit.problems) + ")"
    lines = [
        f"on {where} (backend {priced}, priced by interp-sizer): {verdict}; "
        f"{format_bytes(memory)} per GPU"
    ]
    speed = fit.throughput
    if speed is not None and speed.prefill_tokens_per_s > 0:
        tokens = plan.tokens * passes
        seconds = tokens / speed.prefill_tokens_per_s
        low, high = (tokens / rate for rate in reversed(speed.range(speed.prefill_tokens_per_s)))
        lines.append(
            f"time: about {_duration(seconds)} ({_duration(low)}-{_duration(high)}) at the "
            f"roofline's {speed.prefill_tokens_per_s:,.0f} prefill tokens/s"
            + (f" over {passes} passes" if passes > 1 else "")
            + "; an estimate, not a measurement"
        )
    return lines


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"
