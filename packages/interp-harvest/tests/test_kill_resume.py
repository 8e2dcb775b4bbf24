"""A run killed with SIGKILL mid-shard and resumed ends byte-identical to an uninterrupted run."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interp_harvest import harvest_activations
from interp_harvest.shards import read_manifest

_SCRIPT = Path(__file__).with_name("_killed_harvest.py")


@pytest.mark.slow
def test_a_sigkilled_run_resumes_to_identical_shards(
    model_path: str, eager_model: Any, corpus_file: Path, reference_run: Path, tmp_path: Path
) -> None:
    from harvest_helpers import JOB

    out = tmp_path / "harvest"
    # Shard 0 is two forwards (3 + 1 contexts): the third forward is inside shard 1.
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), model_path, str(corpus_file), str(out), "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    manifest = read_manifest(out)
    assert manifest is not None and not manifest["complete"]
    assert [e["file"] for e in manifest["shards"]] == ["shard-00000.safetensors"]
    resumed = harvest_activations(eager_model, corpus_file, out, **JOB, resume=True)
    assert resumed["complete"]
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert files == {p.name: p.read_bytes() for p in sorted(reference_run.iterdir())}
