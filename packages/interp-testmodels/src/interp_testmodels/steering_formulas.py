"""The lens-space steering ops written out by hand, for tests on every backend.

The formulas as docs/guides/steering.md states them, per row, in float64, independent of
`interp_torch.steering` (which they check): one copy, so the eager and the vLLM tests judge
each backend by the same arithmetic.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["lens_op_by_hand"]


def lens_op_by_hand(spec: Any, h: torch.Tensor) -> torch.Tensor:
    """`h` after `spec` (op add with normalize, norm_add, ablate or swap), per row, float64."""
    h = h.double()
    v = torch.tensor(spec.values(), dtype=torch.float64)
    d = v / v.norm()
    along = (h @ d).unsqueeze(-1)
    if spec.op == "add":
        return h + spec.scale * d
    if spec.op == "norm_add":
        added = spec.scale * h.norm(dim=-1, keepdim=True) * d
        if spec.max_fraction is None:
            return h + added
        cap = spec.max_fraction * h.norm(dim=-1, keepdim=True)
        size = added.norm(dim=-1, keepdim=True)
        return h + torch.where(size > cap, added * cap / size, added)
    if spec.op == "ablate":
        return h - along * d
    t = torch.tensor(spec.target_values(), dtype=torch.float64)
    return h + along * (t / t.norm() - d)
