"""`interp-validate`: compare backends with reference engines and write the report.

    interp-validate                              every runnable backend, every engine, every
                                                 family and SmolLM2-135M-Instruct
    interp-validate --backend eager --engine hf --family llama --family gemma2
    interp-validate --model path/to/model        a saved HF model folder (repeatable)
    interp-validate --setup                      build the reference engines' environments, exit
    interp-validate --baseline results/summary.json   also fail on a regression from it

Options take one name each and repeat (`--engine hf --engine nnsight`) or a comma list
(`--engine hf,nnsight`). Naming families or models limits the sweep to them; add
`--real-model` to include SmolLM2 as well. Exit status: 0 when every comparison passed or was
honestly not made (not expressible, refused, unsupported); 1 when any failed, a reference engine
crashed, or the sweep regressed from the baseline (a family x backend x engine cell with fewer
passes, or a non-pass record the baseline does not hold as one); 2 when the sweep cannot start
as asked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from interp_core.cli_common import HelpFormatter, quiet_broken_pipe
from interp_validator.__about__ import __version__

__all__ = ["main"]

DEFAULT_OUT = "validation-results"


def _names(values: list[str] | None) -> tuple[str, ...] | None:
    if not values:
        return None
    names = [part.strip() for value in values for part in value.split(",") if part.strip()]
    return tuple(dict.fromkeys(names))


def _epilog() -> str:
    """The names the options take, read from where they are defined (no torch import)."""
    from interp_validator.references import EXTRA_ENGINES, REFERENCE_ENGINES

    # interp_validator.engines.HF, spelled here: importing it loads torch, too slow for --help.
    hf_engine = "hf"

    try:
        from interp_testmodels import FAMILY_NAMES
    except ImportError:  # the `run` extra is not installed; the sweep will say so too
        families = "(install interpoint-validator[run] to list them)"
    else:
        families = ", ".join(FAMILY_NAMES)
    return (
        "Without --family or --model, a sweep runs every backend that runs here against every\n"
        "engine on every family and SmolLM2-135M-Instruct: about 30 minutes on a laptop CPU\n"
        "(more the first time, when the engines' environments are built). Narrow it with\n"
        "--backend/--engine/--family.\n\n"
        f"engines: {hf_engine} (in-process), {', '.join(REFERENCE_ENGINES)}; on request: "
        f"{', '.join(EXTRA_ENGINES)}\n"
        f"families: {families}\n"
        "backends: every registered one (`interp backends` lists them)\n\n"
        "examples:\n"
        "  interp-validate --backend eager --engine hf --family llama,gemma2   (seconds)\n"
        "  interp-validate --setup   (build the engines' environments once)\n\n"
        "Exit status: 0 all passed or honestly not made, 1 a failure, crash or regression, "
        "2 the sweep cannot start as asked."
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interp-validate",
        allow_abbrev=False,  # a shortened flag could be read as another one
        description=(
            "Compare interp-engine backends with reference engines (HF hooks, TransformerLens, "
            "nnsight, nnterp) point by point, and write the compact summary.json and report.md, "
            "errors-by-layer.png, and every record under full/."
        ),
        formatter_class=HelpFormatter,
        epilog=_epilog(),
    )
    parser.add_argument("--version", action="version", version=f"interp-validator {__version__}")
    parser.add_argument(
        "--backend", action="append", help="subject backend(s); default: every one that runs here"
    )
    parser.add_argument("--engine", action="append", help="reference engine(s); default: all")
    parser.add_argument(
        "--family", action="append", help="tiny-model family(ies); default: all of them"
    )
    parser.add_argument(
        "--model",
        action="append",
        type=Path,
        default=[],
        help="a saved HF model folder (repeatable); default: none",
    )
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="include SmolLM2-135M-Instruct when --family or --model narrow the sweep",
    )
    parser.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help="output folder")
    parser.add_argument(
        "--baseline",
        type=Path,
        help=(
            "a committed (compact) summary.json, may be the one --out rewrites; exit 1 when a "
            "cell has fewer passes than there or a new non-pass record appears; default: none"
        ),
    )
    parser.add_argument(
        "--setup",
        action="store_true",
        help=(
            "create the pinned environments of the chosen reference engines (minutes, once) "
            "and exit; a sweep otherwise creates them on first use"
        ),
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds per engine process")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="fold this sweep into the compact summary.json already under --out: the models "
        "swept replace their rows there, every other model's rows are kept",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (counts, failures, files written) instead of the summary lines",
    )
    return parser


def _setup(engines: tuple[str, ...] | None) -> int:
    """Build the pinned environments the chosen engines run in (all of them by default)."""
    from interp_validator.engines import default_engines, engine_env, known_engines
    from interp_validator.envs import EnvError, ensure_env

    chosen = engines or default_engines()
    unknown = [e for e in chosen if e not in known_engines()]
    if unknown:
        print(
            f"interp-validate: unknown reference engine {unknown[0]!r}; the engines are "
            f"{', '.join(known_engines())}",
            file=sys.stderr,
        )
        return 2
    names = dict.fromkeys(env for env in map(engine_env, chosen) if env is not None)
    for name in names:
        try:
            python = ensure_env(name)
        except EnvError as exc:
            print(f"interp-validate: setting up the {name} environment failed: {exc}")
            return 1
        print(f"{name}\t{python}")
    if not names:
        print("the chosen engines run in-process; nothing to set up")
    return 0


@quiet_broken_pipe
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # vLLM logs every engine start at INFO; a sweep starts one per model.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if args.setup:
        return _setup(_names(args.engine))
    try:
        from interp_validator.sweep import SweepError, SweepOptions, run_sweep
    except ImportError as exc:
        print(
            f"interp-validate needs the validator's run extra ({exc.name} is missing): "
            "pip install 'interpoint-validator[run]'",
            file=sys.stderr,
        )
        return 2
    from interp_validator.records import load_baseline, regressions
    from interp_validator.report import write_results

    # Read before the sweep: --baseline may name the summary.json this run rewrites.
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    committed = None
    if args.merge:
        summary = args.out / "summary.json"
        if not summary.is_file():
            print(
                f"interp-validate: --merge needs a compact {summary} to fold into", file=sys.stderr
            )
            return 2
        committed = json.loads(summary.read_text(encoding="utf-8"))
    narrowed = bool(args.family or args.model)
    options = SweepOptions(
        backends=_names(args.backend),
        engines=_names(args.engine),
        families=_names(args.family) if args.family else (() if narrowed else None),
        models=tuple(args.model),
        real_model=args.real_model or not narrowed,
        timeout=args.timeout,
        progress=not args.quiet,
    )
    try:
        result = run_sweep(options)
    except SweepError as exc:
        print(f"interp-validate: {exc}", file=sys.stderr)
        return 2
    command = ["interp-validate", *(argv if argv is not None else sys.argv[1:])]
    written = write_results(result, args.out, command=command, merge_into=committed)
    counts: dict[str, int] = {}
    for record in result.records:
        counts[record.status.value] = counts.get(record.status.value, 0) + 1
    worse: list[str] = []
    if baseline is not None:
        pairs = {(r.backend, r.engine) for r in result.records}
        # The models asked for (a model skipped here still loses its committed passes).
        models = {p.target.name for p in result.plans} | set(result.skipped_models)
        worse = regressions(baseline, result.records, pairs=pairs, models=models)
    code = 1 if result.failures or result.errors or worse else 0
    if args.json:
        print(
            json.dumps(
                {
                    "comparisons": len(result.records),
                    "seconds": round(result.seconds, 1),
                    "counts": counts,
                    "failures": [
                        {
                            "backend": r.backend,
                            "engine": r.engine,
                            "model": r.model,
                            "address": r.address,
                            "reason": r.reason,
                        }
                        for r in result.failures
                    ],
                    "engine_errors": result.errors,
                    "regressions": worse,
                    "written": [str(path) for path in written],
                    "exit_status": code,
                },
                indent=2,
            )
        )
        return code
    shown = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"{len(result.records)} comparisons in {result.seconds:.0f} s: {shown}")
    print(f"wrote {len(written)} files under {args.out}/ (report: {args.out / 'report.md'})")
    for record in result.failures[:20]:
        print(
            f"FAIL {record.backend} vs {record.engine} on {record.model} at {record.address}: "
            f"{record.reason}"
        )
    for error in result.errors:
        print(f"ERROR reference engine {error}")
    for line in worse:
        print(f"WORSE {line}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
