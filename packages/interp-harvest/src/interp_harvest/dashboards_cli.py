"""`interp harvest dashboards MODEL --data PATH --sae PATH ... --out DIR`: the dashboards job.

Each SAE's dashboards land in `DIR/<SAE folder name>/` as Neuronpedia batch files
(`batch-N.json`), `statistics.safetensors` and `dashboards.json` (see
`interp_harvest.neuronpedia_batch`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from interp_core.errors import InvalidArgument
from interp_harvest.cli_loading import (
    add_job,
    add_run_control,
    config_facts,
    job_keywords,
    load_from_args,
)

__all__ = ["add_dashboards"]


def add_dashboards(jobs: Any) -> None:
    """Add the `dashboards` job to `interp harvest`'s subcommands."""
    parser = add_job(
        jobs,
        "dashboards",
        "SAE feature dashboards over a corpus, as Neuronpedia batch JSON",
        _run,
        "output folder",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        points=False,
    )
    parser.add_argument(
        "--sae", required=True, action="append", type=Path, help="SAE folder (repeatable)"
    )
    parser.add_argument("--top-k", type=int, default=20, help="top examples per feature")
    parser.add_argument("--intervals", type=int, default=5, help="activation intervals sampled")
    parser.add_argument(
        "--samples-per-interval", type=int, default=5, help="examples sampled per interval"
    )
    parser.add_argument("--bins", type=int, default=50, help="histogram bins")
    parser.add_argument("--logits", type=int, default=10, help="top and bottom logits per feature")
    parser.add_argument("--no-logits", action="store_true", help="leave the logit tables out")
    parser.add_argument("--seed", type=int, default=0, help="seed of the interval samples")
    parser.add_argument(
        "--features-per-batch", type=int, default=128, help="features per batch-N.json"
    )
    parser.add_argument("--model-id", help="Neuronpedia model id (default: the model's name)")
    parser.add_argument(
        "--sae-set",
        action="append",
        help="Neuronpedia SAE set, one per --sae (default: the SAE folder's name)",
    )
    parser.add_argument("--dataset", default="", help="dataset name written into each feature")
    add_run_control(
        parser,
        resume="continue a killed run from the checkpoint it left in --out",
        dry_run="load the SAEs, print what the job will hold and run and the sizer's price on a "
        "GPU; load no model, run nothing",
    )
    parser.add_argument(
        "--gpu", help="the GPU --dry-run prices the job on (default: the smallest that fits)"
    )


def _run(args: argparse.Namespace) -> int:
    from interp_harvest.corpus import Corpus
    from interp_harvest.dashboards import DashboardSettings, harvest_dashboards
    from interp_harvest.neuronpedia_batch import write_dashboards
    from interp_harvest.plan import check_batch_size

    if args.sae_set and len(args.sae_set) != len(args.sae):
        message = f"{len(args.sae_set)} --sae-set for {len(args.sae)} --sae: give one per SAE"
        raise InvalidArgument(message)
    if args.features_per_batch < 1:
        message = f"--features-per-batch {args.features_per_batch}: pass a positive int"
        raise InvalidArgument(message)
    # Refused before a model load that can take minutes.
    check_batch_size(args.batch_size)
    settings = DashboardSettings(
        top_k=args.top_k,
        intervals=args.intervals,
        samples_per_interval=args.samples_per_interval,
        bins=args.bins,
        logits=args.logits,
        seed=args.seed,
    )
    corpus = Corpus(args.data, text_field=args.text_field)
    if args.dry_run:
        return _dry_run(args, settings)
    model = load_from_args(args)
    results = harvest_dashboards(
        model,
        corpus,
        args.sae,
        settings=settings,
        logits=not args.no_logits,
        checkpoint=args.out,
        resume=args.resume,
        **job_keywords(args),
    )
    summary = write_dashboards(
        results,
        args.out,
        model.tokenizer,
        model_id=args.model_id or Path(args.model).name,
        dataset=args.dataset,
        features_per_batch=args.features_per_batch,
        sae_sets=args.sae_set,
    )
    for entry in summary["saes"]:
        print(
            f"{entry['name']} ({entry['address']}): {entry['d_sae']:,} features over "
            f"{entry['tokens_considered']:,} tokens, {entry['dead_features']:,} never fired; "
            f"{len(entry['batches'])} batch files in {args.out / entry['name']}"
        )
    return 0


def _dry_run(args: argparse.Namespace, settings: Any) -> int:
    """The plan from the model's config and the SAEs' files: what the job holds and runs."""
    from interp_core.shapes import point_shape
    from interp_harvest.batches import whole_contexts
    from interp_harvest.dashboards import check_logit_tables, load_saes
    from interp_harvest.dashboards_plan import DashboardsPlan

    facts = config_facts(args.model)
    saes = load_saes(args.sae)
    for _, sae in saes:
        point_shape(sae.address, facts, 1, 1)  # refuses (PointUnsupported) a point it lacks
    check_logit_tables(saes, facts.d_model, not args.no_logits)
    plan = DashboardsPlan(
        tuple((name, str(sae.address), int(sae.d_sae)) for name, sae in saes),
        whole_contexts(args.tokens, args.context_size),
        args.context_size,
        args.batch_size,
        settings,
        None if args.no_logits else (facts.vocab_size, facts.d_model),
        args.features_per_batch,
    )
    print(plan.summary())
    from interp_harvest.gpu_price import price_on_gpu

    for line in price_on_gpu(args.model, args.backend, plan, args.batch_size, args.gpu, passes=2):
        print(line)
    print("  (the model's memory; the SAEs' weights and the job's memory above come on top)")
    return 0
