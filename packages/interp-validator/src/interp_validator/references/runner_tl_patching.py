"""Reference runner for TransformerLens's own activation patching (`transformer_lens.patching`).

Executed with the `refs` environment's python; imports only TransformerLens, transformers,
torch, safetensors and the standard library. Reads one JSON job (model folder, clean and
corrupted token ids, the logit-difference pair) and writes, as safetensors, what
`get_act_patch_resid_pre` (layer × position) and `get_act_patch_attn_head_out_all_pos`
(layer × head, patching `hook_z`) return for that logit difference at the last position. The
model is HookedTransformer built with no weight processing (`runner_tl._hooked`), so its
activations are the raw HF ones our backends read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _runner_common as common
import runner_tl


class Patching(NamedTuple):
    """What a TransformerLens patching sweep of one job reads; `transformer_lens.patching` is
    `patching`, the metric the logit difference at the last position."""

    model: Any
    patching: Any
    corrupt: torch.Tensor
    clean_cache: Any
    metric: Callable[[torch.Tensor], torch.Tensor]


def prepare(spec: dict[str, Any], key: str, out_dir: Path) -> Patching:
    """The job's model (HookedTransformer, no weight processing), its clean run's cache, the
    corrupted ids and the metric, gradients off: shared with the bench's runner
    (`interp_validator/bench/runner_patching.py`), which times the same sweep."""
    job = common.Job({"index": 0, "key": key, "tokens": [], "reads": [], **spec}, out_dir)
    torch.set_grad_enabled(False)
    model = runner_tl._hooked(job)
    from transformer_lens import patching

    clean = torch.tensor([spec["clean"]], dtype=torch.long)
    corrupt = torch.tensor([spec["corrupt"]], dtype=torch.long)
    correct, incorrect = int(spec["correct"]), int(spec["incorrect"])

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return (logits[:, -1, correct] - logits[:, -1, incorrect]).mean()

    _, clean_cache = model.run_with_cache(clean)
    return Patching(model, patching, corrupt, clean_cache, metric)


def main(job_path: str) -> int:
    spec = json.loads(Path(job_path).read_text())
    setup = prepare(spec, "patching", Path(spec["out"]).parent)
    from safetensors.torch import save_file

    args = (setup.model, setup.corrupt, setup.clean_cache, setup.metric)
    resid = setup.patching.get_act_patch_resid_pre(*args)
    heads = setup.patching.get_act_patch_attn_head_out_all_pos(*args)
    tensors = {"resid_pre": resid.float().contiguous(), "z_heads": heads.float().contiguous()}
    save_file(tensors, spec["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
