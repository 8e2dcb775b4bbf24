"""Which GPU and settings fit this model, from the command line?

`interp-size MODEL [--gpu H100-80GB] [--backend vllm-static] [--points resid_post] ...` prints the
memory terms on the selected GPU, a fit table across the catalogue, KV tokens, speeds and the
`load_model(...)` call it priced. `--json` prints one JSON object instead (keys include
`weights_bytes`, `kv_bytes_per_token`, `kv_tokens`, `fits` and `snippet`) for scripts. Exit
status: 0 when the selected configuration fits, 1 when it does not, 2 on a refusal.

Defaults differ from the Streamlit app's on purpose, and both say so: the CLI prices the
model's full context unless `--max-model-len` is given (the app starts at 8,192 tokens).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence

from interp_core.cli_common import HelpFormatter, quiet_broken_pipe
from interp_core.errors import InterpError
from interp_core.known_models import known_model_ids
from interp_sizer.__about__ import __version__
from interp_sizer.calibration import CALIBRATIONS, GIB
from interp_sizer.formats import BACKENDS, KV_CACHE_DTYPES, QUANTIZATIONS
from interp_sizer.gpus import GPUS, GpuSpec, gpu_names
from interp_sizer.plan import GpuFit, SizingReport, SizingRequest, size

__all__ = ["as_flags", "main", "render"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp-size",
        allow_abbrev=False,  # a shortened flag could be read as another one
        description="Which GPU(s) and settings run a model on each interp-engine backend, "
        "before anything is loaded.",
        formatter_class=HelpFormatter,
        epilog="examples:\n"
        "  interp-size meta-llama/Llama-3.1-8B --gpu H100-80GB --max-model-len 8192\n"
        "  interp-size meta-llama/Llama-3.1-70B --quantization fp8 --num-gpus 2\n"
        "  interp-size meta-llama/Llama-3.1-405B --num-gpus 16 --pipeline-parallel 2 "
        "--gpus-per-node 8\n"
        "  interp-size Qwen/Qwen3-8B --backend vllm-static --points resid_post --json\n"
        "  interp-size --list-models | grep -i qwen\n\n"
        "The Streamlit app (make sizer) starts at --max-model-len 8192; this command prices the "
        "model's full context unless told otherwise.\n"
        "Exit status: 0 fits, 1 does not fit, 2 refused.",
    )
    parser.add_argument(
        "model",
        nargs="?",
        help="HF repo id, model folder, or config.json path (--list-models: the bundled ids)",
    )
    parser.add_argument(
        "--gpu",
        metavar="NAME",
        help=f"price this GPU; default: the smallest that fits. One of {', '.join(gpu_names())}",
    )
    parser.add_argument("--backend", default="vllm", choices=BACKENDS, help="the backend to price")
    parser.add_argument(
        "--dtype", default="auto", help="auto (the checkpoint's), bfloat16, float16 or float32"
    )
    parser.add_argument(
        "--quantization",
        choices=sorted(QUANTIZATIONS),
        help="quantize the weights on load; default: none (as the checkpoint ships)",
    )
    parser.add_argument(
        "--kv-cache-dtype",
        default="auto",
        choices=list(KV_CACHE_DTYPES),
        help="KV cache element type (vLLM backends)",
    )
    parser.add_argument(
        "--num-gpus",
        type=int,
        metavar="N",
        help="GPUs to split the model over; default: 1 with --gpu, else the fewest that fit",
    )
    parser.add_argument(
        "--pipeline-parallel",
        type=int,
        default=1,
        metavar="P",
        help="vLLM pipeline stages: layers split into P runs, each on --num-gpus / P GPUs "
        "(tensor parallel); kept when choosing the fewest GPUs",
    )
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        metavar="N",
        help='GPUs in one machine; more than this spans nodes (distributed="ray"); '
        "default: every GPU on one node",
    )
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        metavar="FRACTION",
        help="share of each GPU vLLM may use; default: 0.9",
    )
    parser.add_argument(
        "--max-model-len",
        type=int,
        metavar="TOKENS",
        help="context length priced; default: the model's maximum (the app's default is 8192)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="sequences running at once, each up to --max-model-len",
    )
    parser.add_argument(
        "--points",
        "--capture",
        dest="capture",
        action="append",
        default=[],
        help="a point (every layer) or address to capture; repeat or comma-join; default: none",
    )
    parser.add_argument(
        "--steer",
        action="append",
        default=[],
        help="a point or address to steer (write); repeat or comma-join; default: none",
    )
    parser.add_argument(
        "--lens-sets",
        type=int,
        default=0,
        metavar="N",
        help="fitted-lens sets held resident (n_layers × d_model² each); default: 0",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=int,
        metavar="TOKENS",
        help="vLLM's prefill chunk; default: vLLM's for the card (8192, or 16384 on large GPUs)",
    )
    parser.add_argument(
        "--attn-implementation",
        choices=("sdpa", "eager"),
        help="HF attention on the eager backend; default: sdpa",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=2048,
        metavar="TOKENS",
        help="prompt length for the prefill speed and in-flight captures",
    )
    parser.add_argument("--offline", action="store_true", help="never try the Hub")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--list-models", action="store_true", help="print the bundled model ids and exit"
    )
    parser.add_argument(
        "--list-gpus", action="store_true", help="print the GPU catalogue with sources and exit"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="also print every calibrated constant with its source",
    )
    parser.add_argument("--version", action="version", version=f"interp-sizer {__version__}")
    return parser


def as_flags(message: str) -> str:
    """A library message in the words of this command: `num_gpus=2` becomes `--num-gpus 2`."""
    for name in SizingRequest.__dataclass_fields__:
        flag = "--" + name.replace("_", "-")
        message = re.sub(rf"\b{name}=", f"{flag} ", message)
        message = re.sub(rf"(?<![-\w.]){name}\b(?!\()", flag, message)
    return message.replace("--capture", "--points")


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _speed(fit: GpuFit) -> str:
    t = fit.throughput
    if t is None or not fit.fits:
        return "-"  # a speed for a configuration that cannot start would mislead
    return f"{t.decode_tokens_per_s:,.0f}"


def render(report: SizingReport) -> str:
    """The readable report: selected GPU's terms, the fit table, the snippet."""
    fit = report.selected
    model = report.model
    lines = [
        f"{model.model_id} ({model.facts.architecture}, from {model.origin}) on "
        f"{fit.num_gpus} x {fit.gpu.name}, backend {report.request.backend}, "
        f"{report.precision}",
        f"weights {_gib(report.weights_bytes)} ({model.inventory.source}); KV "
        f"{report.kv_bytes_per_token / 1024:.1f} KiB per token per GPU "
        f"({report.kv_values_per_token_layer} values per layer); max_model_len "
        f"{report.max_model_len:,}",
        "",
    ]
    rows = [["term", "GiB", "where", "how"]]
    for term in fit.terms:
        rows.append([term.label, f"{term.bytes / GIB:.2f}", term.side, term.provenance])
    lines += [_table(rows), ""]
    if fit.pipeline_parallel > 1:
        lines += _stage_lines(report)
    verdict = "FITS" if fit.fits else "DOES NOT FIT"
    lines.append(
        f"{verdict}: {fit.kv_tokens:,} KV tokens, {fit.max_concurrency:.1f} sequences of "
        f"{report.max_model_len:,}; longest context at concurrency "
        f"{report.request.concurrency}: {fit.max_context:,}"
    )
    lines.extend(f"  - {as_flags(problem)}" for problem in fit.problems)
    if fit.advice:
        lines.append("  try: " + as_flags("; ".join(fit.advice)))
    if fit.throughput is not None:
        t = fit.throughput
        low, high = t.range(t.decode_tokens_per_s)
        lines.append(
            f"decode ~{t.decode_tokens_per_s:,.0f} tok/s ({low:,.0f}-{high:,.0f}) over "
            f"{t.sequences} sequence(s) at {t.context:,} context, limited by {t.limiter}; "
            f"prefill ~{t.prefill_tokens_per_s:,.0f} tok/s for {t.prompt_tokens:,}-token prompts"
        )
    lines += ["", f"across GPUs ({report.fits[0].num_gpus} each):"]
    rows = [["gpu", "fits", "KV tokens", "max ctx", "decode tok/s", "limit / why not"]]
    for row in report.fits:
        rows.append(
            [
                row.gpu.name,
                "yes" if row.fits else "no",
                f"{row.kv_tokens:,}",
                f"{row.max_context:,}",
                _speed(row),
                as_flags(row.limit),
            ]
        )
    lines.append(_table(rows))
    lines.append("decode tok/s: a roofline estimate (+-30%), not a measurement; see --explain")
    if fit.pipeline_parallel > 1:
        lines.append(
            "pipeline stages run one after another for a stream: no speedup for one sequence "
            "over one stage's tensor-parallel group"
        )
    if report.smallest is not None:
        lines.append(f"smallest fit: {report.smallest.num_gpus} x {report.smallest.gpu.name}")
    else:
        lines.append("nothing in the catalogue fits up to 8 GPUs with these settings")
    lines.extend(f"note: {note}" for note in report.notes)
    lines += ["", report.snippet.rstrip()]
    return "\n".join(lines)


def _stage_lines(report: SizingReport) -> list[str]:
    """The stages: what each holds, its weights and KV per GPU, and which one was priced."""
    fit = report.selected
    priced = fit.stages[fit.priced_stage]
    lines = [
        f"{fit.pipeline_parallel} pipeline stages x {fit.tensor_parallel} GPUs (tensor "
        f"parallel) on {report.nodes} node(s); terms above: one GPU of {priced.label}",
    ]
    rows = [["stage", "layers", "holds", "weights GiB", "per GPU GiB", "KV KiB/token/GPU"]]
    for stage in fit.stages:
        rows.append(
            [
                str(stage.index),
                f"{stage.first_layer}-{stage.stop_layer - 1}",
                ", ".join(stage.holds) or "-",
                f"{stage.weights_bytes / GIB:.2f}",
                f"{stage.weights_per_gpu / GIB:.2f}",
                f"{stage.kv_bytes_per_token / 1024:.1f}",
            ]
        )
    return [*lines, _table(rows), ""]


# `--list-gpus`: each column's JSON key, its heading in the table, and the GpuSpec field it shows.
_GPU_COLUMNS = (
    ("gpu", "gpu", "name"),
    ("memory_gib_usable", "GiB usable", "memory_gib"),
    ("bandwidth_tb_s", "TB/s", "bandwidth_tb_s"),
    ("bf16_tflops", "bf16 TFLOP/s", "bf16_tflops"),
    ("source", "source", "source"),
)


def _gpu_json(gpu: GpuSpec) -> dict[str, object]:
    return {key: getattr(gpu, field) for key, _, field in _GPU_COLUMNS}


def _gpu_row(gpu: GpuSpec) -> list[str]:
    values = (getattr(gpu, field) for _, _, field in _GPU_COLUMNS)
    return [value if isinstance(value, str) else f"{value:g}" for value in values]


def _explain() -> str:
    rows = [["constant", "value", "unit", "source"]]
    rows += [[c.name, f"{c.value:g}", c.unit, c.source] for c in CALIBRATIONS]
    return _table(rows)


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_models:
        ids = list(known_model_ids())
        print(json.dumps(ids, indent=2) if args.json else "\n".join(ids))
        return 0
    if args.list_gpus:
        if args.json:
            print(json.dumps([_gpu_json(g) for g in GPUS], indent=2))
            return 0
        rows = [[heading for _, heading, _ in _GPU_COLUMNS], *(_gpu_row(g) for g in GPUS)]
        print(_table(rows))
        return 0
    if not args.model:
        print("interp-size: a MODEL is needed (or --list-models / --list-gpus)", file=sys.stderr)
        return 2
    # Each flag named after a SizingRequest field sets it (every field has one but lens_dtype).
    given = vars(args)
    fields = {name: given[name] for name in SizingRequest.__dataclass_fields__ if name in given}
    fields.update(capture=_split(args.capture), steer=_split(args.steer))
    try:
        report = size(args.model, gpu=args.gpu, hub=False if args.offline else None, **fields)
    except InterpError as error:
        print(f"interp-size: {as_flags(str(error))}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report))
        if args.explain:
            print()
            print(_explain())
    return 0 if report.selected.fits else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
