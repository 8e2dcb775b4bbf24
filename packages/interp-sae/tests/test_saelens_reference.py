"""Our SAELens reader against SAELens itself: encode and decode agree within 1e-6.

SAELens 6.54 pulls TransformerLens and its own transformers pins, so it runs in the pinned
environment `sae-lens` (interp_validator.envs), as the validator's reference engines do: tiny
random SAEs of every architecture are written to disk, SAELens loads each with
`SAE.load_from_disk` and encodes the same rows in a subprocess, and the results come back as
.npz files. Without the environment the test skips, unless INTERP_REQUIRE names
validator-envs (then it is built, and a failure fails).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from interp_sae import load_sae
from sae_files import write_saelens

from interp_core.address import Address

D_IN, D_SAE, ROWS = 16, 48, 12
RUNNER = Path(__file__).with_name("saelens_runner.py")

# name -> (architecture, write_saelens keywords, the address our reader must give)
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "standard": ("standard", {"hook_name": "blocks.2.hook_resid_post"}, "resid_post.2"),
    "standard-no-b-dec-in": (
        "standard",
        {"hook_name": "blocks.0.hook_resid_pre", "apply_b_dec_to_input": False},
        "resid_pre.0",
    ),
    "layer-norm": (
        "standard",
        {"hook_name": "blocks.1.hook_resid_mid", "normalize": "layer_norm"},
        "resid_mid.1",
    ),
    "constant-norm": (
        "standard",
        {"hook_name": "blocks.1.hook_mlp_out", "normalize": "constant_norm_rescale"},
        "mlp_out_post.1",
    ),
    "hook-z": (
        "standard",
        {"hook_name": "blocks.3.attn.hook_z", "reshape": "hook_z"},
        "z.3",
    ),
    "jumprelu": ("jumprelu", {"hook_name": "blocks.2.hook_resid_post"}, "resid_post.2"),
    "topk": ("topk", {"hook_name": "blocks.2.hook_resid_post", "k": 5}, "resid_post.2"),
    "topk-rescaled": (
        "topk",
        {"hook_name": "blocks.2.hook_resid_post", "k": 7, "rescale": True},
        "resid_post.2",
    ),
    "gated": ("gated", {"hook_name": "blocks.1.hook_attn_out"}, "attn_out_post.1"),
    "transcoder": (
        "transcoder",
        {
            "hook_name": "blocks.1.mlp.hook_in",
            "hook_name_out": "blocks.1.hook_mlp_out",
            "apply_b_dec_to_input": False,
            "d_out": 20,
        },
        "mlp_in.1",
    ),
    "jumprelu-transcoder": (
        "jumprelu_transcoder",
        {
            "hook_name": "blocks.0.mlp.hook_in",
            "hook_name_out": "blocks.0.mlp.hook_out",
            "apply_b_dec_to_input": False,
        },
        "mlp_in.0",
    ),
}


@pytest.fixture(scope="module")
def saelens_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    from interp_validator.references.testing import env_python_or_skip, run_in_env

    python = env_python_or_skip("sae-lens")
    root = tmp_path_factory.mktemp("saelens")
    cases, ours = [], {}
    for index, (name, (arch, options, _)) in enumerate(CASES.items()):
        folder = root / name
        write_saelens(folder, arch, d_in=D_IN, d_sae=D_SAE, seed=index, **options)
        x = torch.randn(ROWS, D_IN, generator=torch.Generator().manual_seed(100 + index))
        shaped = x.reshape(ROWS, 4, 4) if options.get("reshape") == "hook_z" else x
        np.save(root / f"{name}.npy", shaped.numpy())
        cases.append(
            {"folder": str(folder), "inputs": str(root / f"{name}.npy"), "out": str(root / name)}
        )
        ours[name] = {"folder": folder, "x": x}
    (root / "cases.json").write_text(json.dumps(cases))
    run_in_env(python, RUNNER, str(root / "cases.json"))
    for name in CASES:
        with np.load(root / f"{name}.npz") as reference:
            ours[name].update(features=reference["features"], out=reference["out"])
    return ours


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_encode_and_decode_equal_saelens(name: str, saelens_results: dict[str, Any]) -> None:
    case = saelens_results[name]
    sae = load_sae(case["folder"])
    assert sae.address == Address.parse(CASES[name][2])
    features = sae.encode(case["x"])
    expected = torch.from_numpy(case["features"])
    assert float((features - expected).abs().max()) <= 1e-6
    assert int((expected > 0).sum()) > ROWS  # features fire: the comparison is not of zeros
    out = sae.decode(features, case["x"])
    assert float((out - torch.from_numpy(case["out"])).abs().max()) <= 1e-6
