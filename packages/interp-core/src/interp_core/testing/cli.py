"""Does a command-line tool end quietly when its reader is gone (`interp ... | head`)?

`assert_quiet_on_closed_pipe(module, *args)` runs `python -m module args` with its stdout closed
before anything is read: the tool must exit as a process killed by SIGPIPE does (141, the shell's
128 + 13) and print no traceback. Each package's CLI test calls it; the check is written once.
"""

from __future__ import annotations

import subprocess
import sys

__all__ = ["assert_quiet_on_closed_pipe"]


def assert_quiet_on_closed_pipe(module: str, *args: str, timeout: float = 60) -> None:
    """`python -m module args` with its reader gone: exit status 141 and no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=timeout)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141, (proc.returncode, err)
