"""`interp-bench`: run the speed benchmarks and write JSON plus a Markdown table.

    interp-bench [--only P1,P2,P3,P4,L] [--repeats 10] [--warmup 2] [--engines tl_bridge,...]
                 [--out DIR]
    interp-bench --gpu [--gpu-models meta-llama/Llama-3.1-8B,...]   # on a CUDA machine

Every figure is a ratio measured side by side (see `interp_validator.bench`). Reference engines
run in their pinned environments, created on first use (`interp-validate --setup` does it ahead).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from interp_validator.bench.workloads import REFERENCE_BENCH_ENGINES, WORKLOADS, run_benchmarks

__all__ = ["main"]


def _list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interp-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=_list, default=list(WORKLOADS), help="workloads to run")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--engines",
        type=_list,
        default=list(REFERENCE_BENCH_ENGINES),
        help="reference engines for P1/P2 (empty string: none)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="run the GPU suite (random models of real shapes) instead of the CPU workloads",
    )
    parser.add_argument(
        "--gpu-models",
        type=_list,
        default=None,
        help="model ids whose stored configs the GPU suite builds (default: Llama-3.1-8B)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    unknown = [e for e in args.engines if e not in REFERENCE_BENCH_ENGINES]
    if unknown:
        parser.error(f"unknown engines {unknown}; choose from {', '.join(REFERENCE_BENCH_ENGINES)}")
    try:
        if args.gpu:
            from interp_validator.bench.gpu import DEFAULT_GPU_MODELS, run_gpu_suite

            result = run_gpu_suite(args.gpu_models or DEFAULT_GPU_MODELS)
        else:
            result = run_benchmarks(
                only=args.only, repeats=args.repeats, warmup=args.warmup, engines=args.engines
            )
    except (ValueError, RuntimeError) as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(result.to_json() + "\n")
    table = result.markdown()
    (args.out / "bench.md").write_text(table)
    print(table)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
