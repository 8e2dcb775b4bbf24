"""What every interp-engine command line shares: help that shows defaults, quiet broken pipes.

The four commands (`interp`, `interp-size`, `interp-validate`, `interp-bench`) are written in
three packages; what a user expects to be the same across them is written once here: every
option's help ends with its default, an epilog keeps its own line breaks, and `... | head`
ends the command without a `BrokenPipeError` traceback.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["BROKEN_PIPE_EXIT", "HelpFormatter", "quiet_broken_pipe"]

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
