"""Patches, ablations and a patching sweep over HTTP equal the same calls in-process (eager).

The session's one server and in-process model (conftest), no engine of its own. A patch travels
as the set specs it expands into, in the one wire form of every write.
"""

from __future__ import annotations

from typing import Any

import torch

from interp_core import Ablation, LogitDiff, patch_from, sync
from interp_torch.patching import patch_sweep

CLEAN = [0, 87, 261, 571, 267, 279, 325]
CORRUPT = [0, 87, 261, 378, 74, 315, 281]


def _logits(model: Any, steering: Any) -> torch.Tensor:
    out = sync.capture(model, [CORRUPT], ["lm_head"], steering=steering)["lm_head"]
    return torch.as_tensor(out).float()


def test_patches_and_ablations_over_http_equal_in_process(remote: Any, local: Any) -> None:
    cache = sync.capture(local, [CLEAN], ["resid_pre.1", "z.0"])
    writes = [
        patch_from(cache, "resid_pre.1", [2, 4]),
        patch_from(cache, "z.0", heads=[1]),
        Ablation("mlp_act.0", neurons=[1, 6], positions=[3]),
        Ablation("value.1", heads=[0]),  # sized with the served facts on the client
    ]
    want = _logits(local, writes)
    assert (want - _logits(local, None)).abs().max() > 1e-3
    assert torch.allclose(_logits(remote, writes), want, atol=1e-5, rtol=0)


def test_a_sweep_over_http_equals_in_process(remote: Any, local: Any) -> None:
    metric = LogitDiff(CLEAN[3], CORRUPT[3])
    ours = patch_sweep(remote, CLEAN, CORRUPT, metric, point="resid_pre", layers=[1])
    want = patch_sweep(local, CLEAN, CORRUPT, metric, point="resid_pre", layers=[1])
    assert ours.shape == (1, len(CLEAN)) and float(want.std()) > 1e-3
    assert torch.allclose(ours, want, atol=1e-5, rtol=0)
