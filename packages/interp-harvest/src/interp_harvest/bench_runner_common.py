"""What the bench runners of H and D share (`bench_runner_saelens.py`,
`bench_runner_dashboard.py`): executed in the reference environments, never imported by the
package. Importing it sends the libraries' prints to stderr, so stdout carries the answers only.

`start(job_path)` reads the job, holds torch to one thread without gradients, and builds the
job's model as a HookedTransformer from its local folder with no weight processing (the
validator's `runner_tl` recipe, from the `references` folder the job names); `serve(run)` answers
`{"ready": true}`, then `run(number)`'s answer to each `run` command until `quit`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ANSWERS = sys.stdout
sys.stdout = sys.stderr  # the libraries' prints are not answers


def answer(value: dict[str, Any]) -> None:
    print(json.dumps(value), file=ANSWERS, flush=True)


def start(job_path: str) -> tuple[dict[str, Any], Any]:
    """The job and its model (HookedTransformer of `model_dir`, unprocessed)."""
    job = json.loads(Path(job_path).read_text())
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    sys.path.insert(0, job["references"])
    import _runner_common
    import runner_tl

    spec = {"index": 0, "key": "bench", "tokens": [], "reads": [], "model_dir": job["model_dir"]}
    return job, runner_tl._hooked(_runner_common.Job(spec, Path(job["work"])))


def serve(run: Callable[[int], dict[str, Any]]) -> int:
    answer({"ready": True})
    for number, line in enumerate(sys.stdin):
        command = line.strip()
        if command == "quit":
            break
        answer(run(number) if command == "run" else {"error": f"unknown command {command!r}"})
    return 0
