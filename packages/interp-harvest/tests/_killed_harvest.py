"""Run the test job and SIGKILL this very process in the middle of its second shard.

Started by test_kill_resume.py as a subprocess: argv is MODEL CORPUS OUT KILL_AT_BATCH. The kill
comes from the job's own progress callback, so its moment is exact (after a given forward, before
that shard is written), with no timing involved.
"""

from __future__ import annotations

import os
import signal
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from harvest_helpers import JOB
    from interp_harvest import harvest_activations

    from interp_core import load_model

    torch.set_num_threads(1)
    model_path, corpus, out, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = load_model(model_path, backend="eager")
    forwards = 0

    def kill(_progress: object) -> None:
        global forwards
        forwards += 1
        if forwards == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    harvest_activations(model, corpus, out, **JOB, on_progress=kill)
    raise SystemExit("the job finished: the kill never came")
