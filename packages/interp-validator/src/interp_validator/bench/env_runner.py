"""A runner script kept loaded in a reference engine's pinned environment, asked one command a line.

The workloads that time a reference engine beside ours (A: TransformerLens's patching; the
harvest's H and D: SAELens's `CacheActivationsRunner` and sae-dashboard's `NeuronpediaRunner`)
start the engine's script once with the environment's python, so its model stays loaded, and
interleave their rounds with ours by writing one command a line to its stdin. The script reads its
job (a JSON file) from argv, answers `{"ready": true}` once loaded, then one JSON line per command;
`quit` ends it. The environment is found or built by `interp_validator.envs.ensure_env`, and the
script runs offline (no hub), on one torch thread, as the bench's own side does.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["EnvRunner"]


class EnvRunner:
    """`script` (a path) started with environment `env`'s python on `job`, in folder `work`."""

    def __init__(
        self,
        env: str,
        script: Path,
        job: dict[str, Any],
        work: Path,
        *,
        name: str = "runner",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        from interp_validator.envs import ensure_env

        python = ensure_env(env)
        path = work / f"{name}-job.json"
        path.write_text(json.dumps(job))
        variables = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        offline = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TQDM_DISABLE")
        variables.update(dict.fromkeys(offline, "1"))
        variables.update({"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"})
        variables.update(extra_env or {})
        self.name = name
        self.work = work
        pipes = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.PIPE)
        command = [str(python), str(script), str(path)]
        self.proc = subprocess.Popen(command, text=True, env=variables, cwd=work, **pipes)
        self.ready = self._answer()  # {"ready": true, ...}

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                assert self.proc.stderr is not None
                tail = "\n".join(self.proc.stderr.read().splitlines()[-10:])
                message = f"the {self.name} runner stopped:\n{tail}"
                raise RuntimeError(message)
            if line.startswith("{"):  # a library's own prints are not answers
                return dict(json.loads(line))

    def ask(self, command: str) -> dict[str, Any]:
        """Send one command; its JSON answer (an answer holding "error" is raised)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        if "error" in answer:
            message = f"the {self.name} runner refused {command!r}: {answer['error']}"
            raise RuntimeError(message)
        return answer

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask("quit")
            except (BrokenPipeError, RuntimeError):
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> EnvRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
