"""TransformerLens's own patching sweeps on a model folder, to check ours against.

`tl_patch_sweeps` runs `references/runner_tl_patching.py` with the pinned `refs` environment's
python (TransformerLens 3.9's HookedTransformer, no weight processing) and returns its
`get_act_patch_resid_pre` grid (`[layers, positions]`) and its
`get_act_patch_attn_head_out_all_pos` grid (`[layers, heads]`) for the logit difference
`logits[-1, correct] − logits[-1, incorrect]`. Compare them with
`interp_torch.patching.patch_sweep(model, clean, corrupt, LogitDiff(correct, incorrect),
point="resid_pre")` and `(..., point="z", per="head")`: the same convention (run the corrupted
prompt, patch in the clean activation) and the same shapes.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interp_validator.references import ENGINE_ENV, ReferenceEngineError

__all__ = ["tl_patch_sweeps"]

_SCRIPT = Path(__file__).parent / "references" / "runner_tl_patching.py"


def tl_patch_sweeps(
    model_dir: str | os.PathLike[str],
    clean: Sequence[int],
    corrupt: Sequence[int],
    correct: int,
    incorrect: int,
    *,
    python: str | os.PathLike[str] | None = None,
    timeout: float = 600,
) -> dict[str, Any]:
    """TransformerLens's resid_pre and head-output patching grids (torch tensors), by name."""
    if len(clean) != len(corrupt):
        message = "TransformerLens patches position by position: the prompts need equal length"
        raise ValueError(message)
    if python is None:
        from interp_validator.envs import ensure_env

        python = ensure_env(ENGINE_ENV["tl_hooked"])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    with tempfile.TemporaryDirectory(prefix="interp-tl-patching-") as work:
        out = Path(work) / "sweeps.safetensors"
        job = {
            "model_dir": str(model_dir),
            "clean": [int(t) for t in clean],
            "corrupt": [int(t) for t in corrupt],
            "correct": int(correct),
            "incorrect": int(incorrect),
            "out": str(out),
        }
        job_path = Path(work) / "job.json"
        job_path.write_text(json.dumps(job))
        proc = subprocess.run(
            [str(python), str(_SCRIPT), str(job_path)],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0 or not out.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
            message = f"the TransformerLens patching runner failed ({proc.returncode}):\n{tail}"
            raise ReferenceEngineError(message)
        from safetensors.torch import load_file

        return dict(load_file(str(out)))
