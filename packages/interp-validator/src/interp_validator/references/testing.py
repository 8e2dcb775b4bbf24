"""Test support: the reference environments, or a skip that CI cannot miss.

Building the pinned environments takes minutes and needs the package index, so an ordinary test
run does not build them: tests that need one call `env_python_or_skip(name)`, which returns the
environment's python when it is already built and skips otherwise, through
`interp_core.testing.resources.require`. When INTERP_REQUIRE names `validator-envs` (CI sets
it), the environment is built on the spot instead, and a failure to build fails the test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from interp_core.testing.resources import require, required
from interp_validator.envs import ensure_env, env_dir, env_python, env_status

__all__ = ["RESOURCE", "env_python_or_skip", "run_in_env"]

RESOURCE = "validator-envs"


def env_python_or_skip(name: str) -> Path:
    """The built environment's python; build it if INTERP_REQUIRE names validator-envs."""
    if RESOURCE in required():
        return ensure_env(name)
    python = env_python(env_dir(name))
    if env_status(name) is None:
        message = (
            f"{RESOURCE} is not available here: the {name} environment is not built. Build it "
            f"with `python -m interp_validator.envs {name}`, or set INTERP_REQUIRE={RESOURCE} "
            "to build it during the test run"
        )
        pytest.skip(message)
    require(RESOURCE, executable=str(python))  # built: the interpreter must be runnable
    return python


def run_in_env(
    python: Path, script: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    """Run `script` with an environment's `python`; the test fails with its stderr's tail unless
    it exits 0. Our own venv's PYTHONPATH, PYTHONHOME and VIRTUAL_ENV are left out, so the
    script imports the environment's pinned packages, never ours; `env` adds variables."""
    clean = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    run = subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        check=False,
        timeout=timeout,
    )
    if run.returncode != 0:
        pytest.fail(f"{script.name} exited {run.returncode}:\n{run.stderr[-4000:]}")
    return run
