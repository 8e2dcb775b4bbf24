"""What every interp-engine command line shares: help that shows defaults, quiet broken pipes,
and `--option KEY=JSON` for the commands that load a model.

The four commands (`interp`, `interp-size`, `interp-validate`, `interp-bench`) are written in
three packages; what a user expects to be the same across them is written once here: every
option's help ends with its default, an epilog keeps its own line breaks, and `... | head`
ends the command without a `BrokenPipeError` traceback. `interp serve` and `interp harvest`
pass any `load_model` keyword through `--option KEY=JSON`, read here the same way for both.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from interp_core.errors import InvalidArgument

__all__ = [
    "BROKEN_PIPE_EXIT",
    "HelpFormatter",
    "add_option_argument",
    "load_options",
    "quiet_broken_pipe",
]

# What a shell reports for a writer killed by SIGPIPE (128 + 13); `set -o pipefail` sees it.
BROKEN_PIPE_EXIT = 141

Main = TypeVar("Main", bound=Callable[..., int])


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; each option's help followed by its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        shown = default not in (None, False, [], (), "", argparse.SUPPRESS)
        if shown and "%(default)" not in text and "default" not in text:
            if isinstance(default, list | tuple):
                text += f" (default: {','.join(map(str, default))})"
            else:
                text += " (default: %(default)s)"
        return text


def quiet_broken_pipe(main: Main) -> Main:
    """`main` that exits quietly when its reader goes away (`interp points M | head`).

    Python buffers stdout into a pipe, so the error can surface at any print or at the final
    flush; both are inside the wrapper. Pointing stdout at /dev/null afterwards keeps the
    interpreter's own flush at exit from raising the same error again.
    """

    @functools.wraps(main)
    def wrapper(argv: Sequence[str] | None = None) -> int:
        try:
            code = main(argv)
            sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return BROKEN_PIPE_EXIT
        return code

    return wrapper  # type: ignore[return-value]


def add_option_argument(parser: Any) -> None:
    """`--option KEY=JSON` (repeatable): any other `load_model` keyword, its value as JSON."""
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="any other load_model keyword, its value as JSON (e.g. --option requires_grad=true)",
    )


def load_options(pairs: Sequence[str]) -> dict[str, Any]:
    """The `load_model` keywords of `--option KEY=JSON` pairs; refused unless each is one."""
    options: dict[str, Any] = {}
    for item in pairs:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            message = f"--option {item!r} is not KEY=JSON; e.g. --option requires_grad=true"
            raise InvalidArgument(message)
        try:
            options[key] = json.loads(raw)
        except ValueError as error:
            message = f"--option {key}: {raw!r} is not JSON ({error}); quote strings: '\"x\"'"
            raise InvalidArgument(message) from error
    return options
