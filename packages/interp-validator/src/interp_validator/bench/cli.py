"""`interp-bench`: run the speed benchmarks and write JSON plus a Markdown table.

    interp-bench [--only P1,P2,P3,P4,L,S,F,G,R] [--repeats 10] [--warmup 2]
                 [--engines tl_bridge,...] [--out DIR] [--merge] [--json] [--check]
    interp-bench --suite gpu [--gpu-models meta-llama/Llama-3.1-8B,...]   # on a CUDA machine

Every figure is a ratio measured side by side (see `interp_validator.bench`). Reference engines
run in their pinned environments, created on first use (`interp-validate --setup` does it ahead).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from interp_core.cli_common import HelpFormatter, quiet_broken_pipe
from interp_validator.__about__ import __version__
from interp_validator.bench.workloads import (
    REFERENCE_BENCH_ENGINES,
    WORKLOAD_SUMMARIES,
    WORKLOADS,
    run_benchmarks,
)

__all__ = ["main"]


class _GpuSwitchMoved(argparse.Action):
    """`--gpu` names a GPU in `interp-size`; here the GPU suite is `--suite gpu`."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error("--gpu is not a switch here: run the GPU suite with --suite gpu")


def _epilog() -> str:
    lines = ["workloads (--only):"]
    lines += [f"  {name:<3} {WORKLOAD_SUMMARIES[name]}" for name in WORKLOADS]
    lines += [
        "",
        "Values are medians over --repeats after --warmup; ratios compare variants timed side "
        "by side, each the median of the paired rounds' ratios with their spread [least–greatest, "
        "pairs]. --check exits 1 when a row of this run misses its goal.",
        "examples:",
        "  interp-bench --only P1,P2 --engines ''   (ours only, a few minutes)",
        "  interp-bench --only F --out packages/interp-validator/results --merge",
        "  interp-bench --suite gpu                 (a CUDA machine)",
    ]
    return "\n".join(lines)


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _add_list(
    parser: argparse.ArgumentParser, flag: str, default: list[str] | None, metavar: str, help: str
) -> None:
    """A comma-separated list of names (`_list`)."""
    parser.add_argument(flag, type=_list, default=default, metavar=metavar, help=help)


def _check_names(
    parser: argparse.ArgumentParser, flag: str, kind: str, given: list[str], known: Sequence[str]
) -> None:
    """Exit through `parser.error` on the first of `given` that is not one of `known`."""
    unknown = [name for name in given if name not in known]
    if unknown:
        parser.error(f"{flag}: unknown {kind} {unknown[0]!r}; choose from {', '.join(known)}")


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="interp-bench",
        description=__doc__.splitlines()[0],
        formatter_class=HelpFormatter,
        epilog=_epilog(),
        allow_abbrev=False,  # `--gpu` must not silently mean `--gpu-models`
    )
    parser.add_argument("--version", action="version", version=f"interp-validator {__version__}")
    _add_list(
        parser,
        "--only",
        list(WORKLOADS),
        "NAMES",
        "workloads to run, comma-separated (listed below)",
    )
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per variant")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first")
    _add_list(
        parser,
        "--engines",
        list(REFERENCE_BENCH_ENGINES),
        "NAMES",
        "reference engines for P1/P2, comma-separated (empty string: none)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="folder for bench.json/.md"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other workloads' rows already in DIR/bench.json; replace only those run",
    )
    parser.add_argument(
        "--suite",
        choices=("cpu", "gpu"),
        default="cpu",
        help="cpu: the workloads below; gpu: random models of real shapes on a CUDA GPU",
    )
    parser.add_argument("--gpu", nargs=0, action=_GpuSwitchMoved, help=argparse.SUPPRESS)
    _add_list(
        parser,
        "--gpu-models",
        None,
        "IDS",
        "model ids whose bundled configs the GPU suite builds; default: Llama-3.1-8B",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a row measured in this run misses its goal (after writing the results)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the JSON document instead of the Markdown table (both are still written)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    _check_names(parser, "--only", "workload", args.only, WORKLOADS)
    _check_names(parser, "--engines", "engine", args.engines, REFERENCE_BENCH_ENGINES)
    try:
        if args.suite == "gpu":
            from interp_validator.bench.gpu import DEFAULT_GPU_MODELS, run_gpu_suite

            result = run_gpu_suite(args.gpu_models or DEFAULT_GPU_MODELS)
        else:
            result = run_benchmarks(
                only=args.only, repeats=args.repeats, warmup=args.warmup, engines=args.engines
            )
    except (ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    missed = result.missed()  # this run's rows only, before committed ones are merged in
    args.out.mkdir(parents=True, exist_ok=True)
    previous = args.out / "bench.json"
    if args.merge and previous.is_file():
        result = result.merged_into(json.loads(previous.read_text()), set(args.only))
    (args.out / "bench.json").write_text(result.to_json() + "\n")
    table = result.markdown()
    (args.out / "bench.md").write_text(table)
    print(result.to_json() if args.json else table)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}", file=sys.stderr)
    if args.check and missed:
        for row in missed:
            print(f"goal missed: {row.workload} {row.variant}: {row.ratio_text()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
