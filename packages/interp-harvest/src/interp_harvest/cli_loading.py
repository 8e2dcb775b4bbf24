"""What the harvest commands share once their arguments are parsed: the model they load (any
`load_model` keyword from `--option KEY=JSON`) and the progress bar (`--no-progress`). Its own
module so that each job's command module imports it without importing the `interp harvest`
command table, which imports them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from interp_core.errors import InvalidArgument


def load_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            message = f"--option {pair!r} is not KEY=JSON"
            raise InvalidArgument(message)
        try:
            options[key] = json.loads(value)
        except ValueError as error:
            message = f"--option {key}: {value!r} is not JSON ({error})"
            raise InvalidArgument(message) from error
    return options


def load_from_args(args: argparse.Namespace, **fixed: Any) -> Any:
    from interp_core import load_model

    return load_model(args.model, backend=args.backend, **{**load_options(args.option), **fixed})


def progress_from_args(args: argparse.Namespace) -> Any:
    from interp_harvest.progress import ProgressBar

    return None if args.no_progress else ProgressBar()
