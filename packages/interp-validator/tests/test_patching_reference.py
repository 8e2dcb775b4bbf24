"""Our patching sweeps against TransformerLens's own patching functions, on the same folder.

TransformerLens (the pinned `refs` environment, HookedTransformer with no weight processing)
runs `get_act_patch_resid_pre` and `get_act_patch_attn_head_out_all_pos`; the eager backend
runs `patch_sweep` with the same convention (corrupted run, clean activation patched in) and the
same logit difference. Measured: ≤ 3.1e-6 apart on the tiny Llama (grouped-query) in float32.
Skipped where the environment is not built, unless INTERP_REQUIRE names validator-envs.
"""

from __future__ import annotations

import pytest
import torch

from interp_core import LogitDiff, load_model
from interp_testmodels.families import build_family
from interp_torch.patching import patch_sweep
from interp_validator.patching import tl_patch_sweeps
from interp_validator.references.testing import env_python_or_skip

pytestmark = pytest.mark.slow


def test_sweeps_equal_transformer_lens_patching() -> None:
    python = env_python_or_skip("refs")
    folder = str(build_family("llama"))
    model = load_model(folder, backend="eager", dtype="float32")
    clean = model.to_tokens("the cat sat on the mat today")[0].tolist()
    corrupt = model.to_tokens("the dog ran in the park today")[0].tolist()
    assert clean[3] != corrupt[3]
    theirs = tl_patch_sweeps(folder, clean, corrupt, clean[3], corrupt[3], python=python)
    metric = LogitDiff(clean[3], corrupt[3])
    resid = patch_sweep(model, clean, corrupt, metric, point="resid_pre")
    heads = patch_sweep(model, clean, corrupt, metric, point="z", per="head")
    assert resid.shape == theirs["resid_pre"].shape == (model.facts.n_layers, len(clean))
    assert heads.shape == theirs["z_heads"].shape == (model.facts.n_layers, model.facts.n_heads)
    assert float(resid.std()) > 1e-2 and float(heads.std()) > 1e-2  # the grids say something
    assert torch.allclose(resid, theirs["resid_pre"], atol=1e-4, rtol=0)
    assert torch.allclose(heads, theirs["z_heads"], atol=1e-4, rtol=0)
