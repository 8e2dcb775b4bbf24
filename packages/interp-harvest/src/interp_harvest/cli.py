"""`interp harvest activations|stats|lens MODEL --data PATH ...`: the dataset jobs from a shell.

Registered as a subcommand of the `interp` CLI through the `interp.commands` entry-point group.
The model is loaded through the registry (`--backend`, default auto); `--option KEY=JSON` passes
any other `load_model` keyword untouched. `--dry-run` prices the job from the model's config
alone (no weights are loaded) and checks the output disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from interp_core.errors import ConfigError
from interp_harvest.cli_loading import (
    add_job,
    add_job_parser,
    add_replica_arguments,
    add_run_control,
    config_facts,
    job_keywords,
    load_from_args,
    replica_keywords,
)
from interp_harvest.errors import DiskFull
from interp_harvest.plan import (
    DTYPE_BYTES,
    LAYOUTS,
    ActivationsPlan,
    check_batch_size,
    check_free_disk,
    plan_activations,
)

__all__ = ["main", "register"]


def register(subparsers: Any) -> None:
    """Add `harvest` (with its jobs as subcommands) to the `interp` CLI."""
    parser = add_job_parser(
        subparsers,
        "harvest",
        "dataset jobs: activations to sharded safetensors, per-point statistics, SAE feature "
        "dashboards",
        __doc__.split("\n\n")[0] if __doc__ else None,
    )
    jobs = parser.add_subparsers(dest="job", required=True)
    activations = add_job(
        jobs,
        "activations",
        "activations at points over a corpus, as checksummed resumable shards",
        _run_activations,
        "output folder",
    )
    activations.add_argument(
        "--dtype", default="float32", choices=sorted(DTYPE_BYTES), help="dtype the shards store"
    )
    activations.add_argument(
        "--shard-contexts", type=int, default=256, help="contexts per shard file"
    )
    activations.add_argument(
        "--format",
        default="safetensors",
        choices=LAYOUTS,
        help="output layout: shards + manifest, or SAELens's cached-activations datasets folder",
    )
    add_run_control(
        activations,
        resume="continue a killed run in --out",
        dry_run="print the plan, the disk check and the sizer's price on a GPU; run nothing",
    )
    activations.add_argument(
        "--gpu", help="the GPU --dry-run prices the job on (default: the smallest that fits)"
    )
    add_replica_arguments(activations)
    stats = add_job(
        jobs,
        "stats",
        "per-point mean / variance / norms over a corpus",
        _run_stats,
        "output .safetensors file",
    )
    stats.add_argument(
        "--exclude-bos", action="store_true", help="leave BOS positions out of the statistics"
    )
    lens = add_job(
        jobs,
        "lens",
        "fit a Jacobian lens (J_bar per layer) over a corpus, with gradients",
        _run_lens,
        'output file ({"J": ...}, .pt)',
        points=False,
        backend="eager",
    )
    lens.add_argument(
        "--layers", type=int, nargs="+", default=None, help="layers to fit (default: all)"
    )
    lens.add_argument(
        "--exclude-bos", action="store_true", help="leave BOS positions out of the mean"
    )

    from interp_harvest.dashboards_cli import add_dashboards

    add_dashboards(jobs)


def _run_activations(args: argparse.Namespace) -> int:
    from interp_harvest.corpus import Corpus

    # Refused before a model load that can take minutes.
    check_batch_size(args.batch_size)
    replicas = replica_keywords(args)
    corpus = Corpus(args.data, text_field=args.text_field)
    if args.dry_run:
        return _dry_run(args, _plan(args))
    try:
        # From config.json alone: a point or dtype the layout cannot hold is refused before a
        # model load that can take minutes. A model known only to its backend (a hub id, a
        # server's URL) is checked by the job itself once it is loaded.
        _plan(args)
    except ConfigError:
        pass
    from interp_harvest.activations import harvest_activations

    model = load_from_args(args)
    manifest = harvest_activations(
        model,
        corpus,
        args.out,
        points=args.points,
        resume=args.resume,
        **replicas,
        **_layout_keywords(args),
        **job_keywords(args),
    )
    print(
        f"{manifest['tokens']:,} tokens in {len(manifest['shards'])} shards at {args.out}"
        + (" (the corpus ran out before the budget)" if manifest.get("corpus_exhausted") else "")
    )
    return 0


def _plan(args: argparse.Namespace) -> ActivationsPlan:
    return plan_activations(
        config_facts(args.model),
        args.points,
        tokens=args.tokens,
        context_size=args.context_size,
        **_layout_keywords(args),
    )


def _layout_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """How the activations job stores what it reads: the plan and the run take the same."""
    return {"dtype": args.dtype, "contexts_per_shard": args.shard_contexts, "layout": args.format}


def _dry_run(args: argparse.Namespace, plan: ActivationsPlan) -> int:
    from interp_harvest.gpu_price import price_on_gpu

    print(plan.summary())
    for line in price_on_gpu(args.model, args.backend, plan, args.batch_size, args.gpu):
        print(line)
    from interp_harvest.replicas import uses_ray

    if uses_ray(args.replicas, args.ray_address):
        where = args.ray_address or os.environ.get("RAY_ADDRESS") or "a local Ray"
        print(
            f"replicas: {args.replicas} on Ray ({where}), each loading the model with "
            f"{args.replica_cpus:g} CPU and {args.replica_gpus:g} GPU; the price above is one "
            f"replica's, the files the same as one replica's"
        )
    try:
        free = check_free_disk(args.out, plan.total_bytes)
    except DiskFull as error:
        print(f"disk: {error}")
        return 1
    print(f"disk: {free:,} bytes free at {args.out}: fits")
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    from interp_harvest.stats import harvest_stats, write_stats

    check_batch_size(args.batch_size)
    model = load_from_args(args)
    stats = harvest_stats(
        model,
        args.data,
        points=args.points,
        exclude_bos=args.exclude_bos,
        text_field=args.text_field,
        **job_keywords(args),
    )
    path = write_stats(stats, args.out)
    for address, point in stats.items():
        print(
            f"{address}: {point.count:,} tokens, mean norm {point.norm_mean:.4g}, "
            f"max norm {point.norm_max:.4g}"
        )
    print(f"written to {path}")
    return 0


def _run_lens(args: argparse.Namespace) -> int:
    from interp_harvest.corpus import Corpus
    from interp_harvest.lens import fit_lens, write_lens

    check_batch_size(args.batch_size)
    corpus = Corpus(args.data, text_field=args.text_field)
    # The lens is a gradient: the model keeps its autograd graph (eager refuses otherwise).
    model = load_from_args(args, requires_grad=True)
    lens = fit_lens(
        model,
        corpus,
        layers=args.layers,
        exclude_bos=args.exclude_bos,
        **job_keywords(args),
    )
    path = write_lens(lens, args.out)
    layers = ", ".join(str(layer) for layer in sorted(lens.sums))
    print(f"J_bar for layers {layers} over {lens.count:,} tokens written to {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`interp harvest ...` as its own program (what `python -m interp_harvest` runs)."""
    from interp_core.cli import main as interp_main

    return interp_main(["harvest", *(sys.argv[1:] if argv is None else argv)])
