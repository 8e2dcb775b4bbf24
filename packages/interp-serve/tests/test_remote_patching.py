"""Patches, ablations and a patching sweep over HTTP equal the same calls in-process (eager).

The session's one server and in-process model (conftest), no engine of its own. A patch travels
as the set specs it expands into, in the one wire form of every write.
"""

from __future__ import annotations

from typing import Any

import pytest
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


def test_patch_rows_travel_as_safetensors_exactly() -> None:
    from interp_core.cache import ActivationCache
    from interp_core.errors import SteeringSpecError
    from interp_core.writes import spec_from_wire, spec_to_wire
    from interp_serve.patch_wire import KEY, pack_patch_values, unpack_patch_values

    rows = torch.randn(2, 64, dtype=torch.float32, generator=torch.Generator().manual_seed(1))
    wide = Ablation("resid_pre.0", kind="mean", mean=[1 / 3] * 64).to_specs()  # no float32 form
    specs = [
        *patch_from(ActivationCache({"resid_pre.0": rows[None]}), "resid_pre.0", [0, 1]).to_specs(),
        *wide,
    ]
    wire = [spec_to_wire(s) for s in specs]
    packed = pack_patch_values(wire)
    assert all(set(p["vector"]) == {KEY} for p in packed)
    back = [spec_from_wire(s) for s in unpack_patch_values(packed)]
    for spec, got in zip(specs, back, strict=True):
        assert got.values() == spec.values() and got.positions == spec.positions
    with pytest.raises(SteeringSpecError, match="not readable safetensors"):
        unpack_patch_values([{**packed[0], "vector": {KEY: "bm90IHNhZmV0ZW5zb3Jz"}}])


def test_per_row_patches_over_http_equal_in_process(remote: Any, local: Any) -> None:
    from interp_core.errors import SteeringSpecError

    cache = sync.capture(local, [CLEAN], ["resid_pre.1", "value.0"])
    writes = [
        patch_from(cache, "resid_pre.1", [2, 4], batch_rows=0),
        patch_from(cache, "value.0", heads=[1], batch_rows=1),  # a kv head (grouped-query)
        Ablation("mlp_act.0", neurons=[1, 6], positions=[3], batch_rows=1),
    ]
    batch = [CORRUPT, CLEAN]
    want = torch.as_tensor(sync.capture(local, batch, ["lm_head"], steering=writes)["lm_head"])
    got = torch.as_tensor(sync.capture(remote, batch, ["lm_head"], steering=writes)["lm_head"])
    assert torch.allclose(got.float(), want.float(), atol=1e-5, rtol=0)
    plain = torch.as_tensor(sync.capture(local, batch, ["lm_head"])["lm_head"])
    assert (want[0] - plain[0]).abs().max() > 1e-3 and (want[1] - plain[1]).abs().max() > 1e-3
    with pytest.raises(SteeringSpecError, match="names batch rows"):
        sync.capture(
            remote, batch, ["lm_head"], steering=patch_from(cache, "resid_pre.1", batch_rows=2)
        )
