"""What the harvest commands share: the arguments every job takes, and once they are parsed the
model they load (any `load_model` keyword from `--option KEY=JSON`) and the progress bar
(`--no-progress`). Its own
module so that each job's command module imports it without importing the `interp harvest`
command table, which imports them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from interp_core.cli_common import HelpFormatter, add_option_argument, load_options
from interp_harvest.packing import BOS_POLICIES


def load_from_args(args: argparse.Namespace, **fixed: Any) -> Any:
    from interp_core import load_model

    return load_model(args.model, backend=args.backend, **{**load_options(args.option), **fixed})


def add_replica_arguments(parser: argparse.ArgumentParser) -> None:
    """`--replicas N` on Ray, where the cluster is and what each replica takes of it."""
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="replicas of the model on Ray, each running forwards (1: in this process)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="the Ray cluster the replicas run on (default: RAY_ADDRESS, else a local Ray)",
    )
    parser.add_argument("--replica-cpus", type=float, default=1, help="CPUs per replica")
    parser.add_argument("--replica-gpus", type=float, default=0, help="GPUs per replica")


def replica_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """The replica keywords of the job, refused (a bad count, no Ray) before any model load;
    the replicas load the model with the same `--option`s as this process."""
    from interp_harvest.replicas import check_replicas

    check_replicas(args.replicas, args.ray_address, cpus=args.replica_cpus, gpus=args.replica_gpus)
    return {
        "replicas": args.replicas,
        "ray_address": args.ray_address,
        "load_options": load_options(args.option),
        "replica_cpus": args.replica_cpus,
        "replica_gpus": args.replica_gpus,
    }


def add_run_control(parser: argparse.ArgumentParser, *, resume: str, dry_run: str) -> None:
    """A job's `--resume` and `--dry-run` flags, with what each does for that job."""
    parser.add_argument("--resume", action="store_true", help=resume)
    parser.add_argument("--dry-run", action="store_true", help=dry_run)


def config_facts(model: str) -> Any:
    """The `ModelFacts` of `model` read from its config alone (the dry runs load no weights)."""
    from interp_core.cli import load_config
    from interp_core.facts import ModelFacts

    _, config = load_config(model)
    return ModelFacts.from_config(config)


def job_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords every job function takes from `add_job_arguments`' arguments."""
    return {
        "tokens": args.tokens,
        "context_size": args.context_size,
        "bos": args.bos,
        "batch_size": args.batch_size,
        "on_progress": progress_from_args(args),
    }


def progress_from_args(args: argparse.Namespace) -> Any:
    from interp_harvest.progress import ProgressBar

    return None if args.no_progress else ProgressBar()


def add_job_parser(
    jobs: Any, name: str, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A job's subcommand of `interp harvest`: whole flag names only, defaults in the help."""
    return jobs.add_parser(
        name,
        help=help,
        description=description,
        allow_abbrev=False,
        formatter_class=HelpFormatter,
    )


def add_job(
    jobs: Any,
    name: str,
    help: str,
    run: Any,
    out: str,
    description: str | None = None,
    **common: Any,
) -> argparse.ArgumentParser:
    """A job's subcommand with the arguments every job takes (`add_job_arguments`, given
    `common`), its `--out` (`out`: what it names) and the function that runs it; the job adds
    its own flags."""
    parser = add_job_parser(jobs, name, help, description)
    add_job_arguments(parser, **common)
    parser.add_argument("--out", required=True, type=Path, help=out)
    parser.set_defaults(run=run)
    return parser


def add_job_arguments(
    parser: argparse.ArgumentParser, *, points: bool = True, backend: str = "auto"
) -> None:
    """The arguments every job takes: the model, the corpus and its packing, the backend, the
    batch, `load_model` options and the progress bar; `points=False` for a job that reads no
    `--points` (the lens reads every layer's residual, the dashboards their SAEs' points)."""
    parser.add_argument("model", help="a model folder or repo id, as load_model takes it")
    parser.add_argument("--data", required=True, type=Path, help="corpus file or folder")
    if points:
        parser.add_argument(
            "--points",
            required=True,
            action="extend",
            nargs="+",
            metavar="ADDRESS",
            help="points to read (repeatable): resid_post.6 mlp_out.3 ...",
        )
    parser.add_argument("--tokens", required=True, type=int, help="token budget")
    parser.add_argument("--context-size", required=True, type=int, help="tokens per context")
    parser.add_argument("--backend", default=backend, help="registered backend")
    parser.add_argument(
        "--bos", default="context", choices=BOS_POLICIES, help="BOS policy (see the harvest guide)"
    )
    parser.add_argument("--text-field", default="text", help="jsonl/parquet/arrow text field")
    parser.add_argument("--batch-size", type=int, default=8, help="contexts per forward")
    add_option_argument(parser)
    parser.add_argument("--no-progress", action="store_true", help="draw no progress bar")
