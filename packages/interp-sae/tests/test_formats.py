"""Each format read from disk: Gemma Scope and sparsify against their formulas written by hand,
hook names mapped onto our addresses, and every unsupported input refused with its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from interp_sae import UnknownHook, address_for_module, address_for_tl_hook, load_sae
from sae_files import write_gemma_scope, write_saelens, write_sparsify

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument, PointUnsupported

D_IN, D_SAE = 16, 64


def _x(rows: int = 10, seed: int = 7) -> torch.Tensor:
    return torch.randn(rows, D_IN, generator=torch.Generator().manual_seed(seed))


# --- Gemma Scope ----------------------------------------------------------------------------------


def test_gemma_scope_equals_the_jumprelu_formula(tmp_path: Path) -> None:
    folder = tmp_path / "gemma-scope-2b-pt-res" / "layer_5" / "width_16k" / "average_l0_71"
    p = {
        k: torch.from_numpy(v) for k, v in write_gemma_scope(folder, d_in=D_IN, d_sae=D_SAE).items()
    }
    sae = load_sae(folder)
    assert sae.address == Address("resid_post", 5) == sae.write_address
    assert (sae.d_in, sae.d_sae) == (D_IN, D_SAE)
    x = _x()
    pre = x @ p["W_enc"] + p["b_enc"]  # Gemma Scope subtracts nothing from the input
    expected = (pre > p["threshold"]).float() * torch.relu(pre)
    features = sae.encode(x)
    assert float((features - expected).abs().max()) <= 1e-6
    assert 0 < int((expected > 0).sum()) < expected.numel()
    recon = expected @ p["W_dec"] + p["b_dec"]
    assert float((sae.decode(features) - recon).abs().max()) <= 1e-6


@pytest.mark.parametrize(("kind", "point"), [("mlp", "mlp_out_post"), ("att", "z")])
def test_gemma_scope_release_folders_name_the_point(tmp_path: Path, kind: str, point: str) -> None:
    folder = tmp_path / f"gemma-scope-9b-it-{kind}" / "layer_3" / "width_1m" / "average_l0_9"
    write_gemma_scope(folder, d_in=D_IN, d_sae=D_SAE)
    assert load_sae(folder / "params.npz").address == Address(point, 3)


def test_gemma_scope_elsewhere_needs_the_address(tmp_path: Path) -> None:
    write_gemma_scope(tmp_path / "x", d_in=D_IN, d_sae=D_SAE)
    with pytest.raises(CapabilityUnsupported, match="pass address="):
        load_sae(tmp_path / "x")
    assert load_sae(tmp_path / "x", address="resid_pre.1").address == Address("resid_pre", 1)


def test_an_address_contradicting_the_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "gemma-scope-2b-pt-res" / "layer_5"
    write_gemma_scope(folder, d_in=D_IN, d_sae=D_SAE)
    with pytest.raises(CapabilityUnsupported, match=r"resid_post\.5.*address='resid_post\.6'"):
        load_sae(folder, address="resid_post.6")


# --- sparsify -------------------------------------------------------------------------------------


def _sparsify_by_hand(w: dict[str, torch.Tensor], x: torch.Tensor, k: int, transcode: bool):
    sae_in = x if transcode else x - w["b_dec"]
    pre = torch.relu(sae_in @ w["encoder.weight"].T + w["encoder.bias"])
    values, indices = pre.topk(k, dim=-1)
    dense = torch.zeros_like(pre).scatter(-1, indices, values)
    return dense, dense @ w["W_dec"] + w["b_dec"]


@pytest.mark.parametrize(
    ("hookpoint", "transcode", "read", "write"),
    [
        ("layers.4", False, "resid_post.4", "resid_post.4"),
        ("model.layers.2.mlp", False, "mlp_out.2", "mlp_out.2"),
        ("layers.1.self_attn", False, "attn_out.1", "attn_out.1"),
        ("layers.3.mlp", True, "mlp_in.3", "mlp_out.3"),
        ("layers.0", True, "resid_pre.0", "resid_post.0"),
    ],
)
def test_sparsify_equals_the_topk_formula(
    tmp_path: Path, hookpoint: str, transcode: bool, read: str, write: str
) -> None:
    k = 6
    w = write_sparsify(tmp_path / hookpoint, d_in=D_IN, d_sae=D_SAE, k=k, transcode=transcode)
    sae = load_sae(tmp_path / hookpoint)
    assert (sae.address, sae.write_address) == (Address.parse(read), Address.parse(write))
    assert sae.is_transcoder is transcode
    x = _x()
    dense, recon = _sparsify_by_hand(w, x, k, transcode)
    features = sae.encode(x)
    assert float((features - dense).abs().max()) <= 1e-6
    assert int((features != 0).sum(dim=-1).max()) == k
    assert float((sae.decode(features) - recon).abs().max()) <= 1e-6
    top = sae.encode_topk(x, k)
    assert torch.equal(top.indices.sort(dim=-1).values, dense.topk(k).indices.sort(dim=-1).values)


def test_sparsify_hookpoints_that_mean_different_tensors_by_family_are_refused(
    tmp_path: Path,
) -> None:
    # Llama's post_attention_layernorm is the pre-MLP norm, Gemma-2's the post-attention one.
    write_sparsify(tmp_path / "layers.2.post_attention_layernorm", d_in=D_IN, d_sae=D_SAE, k=4)
    with pytest.raises(UnknownHook, match=r"nearest address is \w+\.2"):
        load_sae(tmp_path / "layers.2.post_attention_layernorm")


# --- SAELens: addresses and refusals --------------------------------------------------------------


@pytest.mark.parametrize(
    ("hook", "address"),
    [
        ("blocks.0.hook_resid_pre", "resid_pre.0"),
        ("blocks.7.hook_resid_post", "resid_post.7"),
        ("blocks.3.hook_resid_mid", "resid_mid.3"),
        ("blocks.2.attn.hook_z", "z.2"),
        ("blocks.2.hook_attn_out", "attn_out_post.2"),
        ("blocks.2.hook_mlp_out", "mlp_out_post.2"),
        ("blocks.2.mlp.hook_post", "mlp_act.2"),
        ("blocks.2.mlp.hook_in", "mlp_in.2"),
    ],
)
def test_transformer_lens_hooks_map_through_the_registry(hook: str, address: str) -> None:
    assert address_for_tl_hook(hook) == Address.parse(address)


@pytest.mark.parametrize(
    ("hook", "nearest"),
    [
        ("blocks.4.ln2.hook_normalized", "mlp_in.4"),
        ("blocks.4.hook_resid_pots", "resid_post.4"),
    ],
)
def test_unmapped_hooks_are_refused_naming_the_nearest_address(hook: str, nearest: str) -> None:
    with pytest.raises(UnknownHook) as excinfo:
        address_for_tl_hook(hook)
    assert isinstance(excinfo.value, PointUnsupported)
    assert f"nearest address is {nearest}" in str(excinfo.value)


def test_hooks_of_points_no_sae_reads_are_refused_naming_the_point() -> None:
    with pytest.raises(UnknownHook, match=r"is attn_probs\.4.*no fixed width"):
        address_for_tl_hook("blocks.4.attn.hook_pattern")


def test_module_names_map_input_and_output() -> None:
    assert address_for_module("layers.9") == Address("resid_post", 9)
    assert address_for_module("layers.9", "input") == Address("resid_pre", 9)
    assert address_for_module("layers.9.mlp", "input") == Address("mlp_in", 9)


def _write_mlp_transcoder(folder: Path, **options: Any) -> None:
    """A SAELens transcoder reading layer 1's MLP input; `options` add its output side."""
    write_saelens(
        folder,
        "transcoder",
        d_in=D_IN,
        d_sae=D_SAE,
        hook_name="blocks.1.mlp.hook_in",
        apply_b_dec_to_input=False,
        **options,
    )


def test_saelens_transcoder_reads_and_writes_at_its_two_hooks(tmp_path: Path) -> None:
    _write_mlp_transcoder(tmp_path / "tc", hook_name_out="blocks.1.hook_mlp_out", d_out=D_IN)
    sae = load_sae(tmp_path / "tc")
    assert (sae.address, sae.write_address) == (Address("mlp_in", 1), Address("mlp_out_post", 1))


def test_a_transcoder_without_an_output_hook_needs_write_address(tmp_path: Path) -> None:
    _write_mlp_transcoder(tmp_path / "tc")
    with pytest.raises(CapabilityUnsupported, match="write_address="):
        load_sae(tmp_path / "tc")
    assert load_sae(tmp_path / "tc", write_address="mlp_out.1").write_address == Address(
        "mlp_out", 1
    )


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"hook_head_index": 2}, "reads head 2 only"),
        ({"normalize": "expected_average_only_in"}, "dataset statistics"),
        ({"normalize": "covariance_whitening"}, "fold_activation_whitening"),
        ({"hook_name": "blocks.1.ln1.hook_normalized"}, "nearest address is attn_in.1"),
    ],
)
def test_saelens_input_handling_it_cannot_honour_is_refused(
    tmp_path: Path, options: dict, words: str
) -> None:
    kwargs = {"hook_name": "blocks.1.hook_resid_post", **options}
    write_saelens(tmp_path / "s", "standard", d_in=D_IN, d_sae=D_SAE, **kwargs)
    with pytest.raises(PointUnsupported if "nearest" in words else CapabilityUnsupported) as e:
        load_sae(tmp_path / "s")
    assert words in str(e.value)


def test_skip_transcoders_and_unknown_architectures_are_refused(tmp_path: Path) -> None:
    write_saelens(
        tmp_path / "s", "standard", d_in=D_IN, d_sae=D_SAE, hook_name="blocks.0.hook_resid_post"
    )
    cfg = (tmp_path / "s" / "cfg.json").read_text()
    (tmp_path / "s" / "cfg.json").write_text(cfg.replace('"standard"', '"skip_transcoder"'))
    with pytest.raises(CapabilityUnsupported, match="W_skip"):
        load_sae(tmp_path / "s")


def test_memory_is_checked_before_loading_and_the_size_named(tmp_path: Path) -> None:
    write_saelens(
        tmp_path / "s", "standard", d_in=D_IN, d_sae=D_SAE, hook_name="blocks.0.hook_resid_post"
    )
    size = (2 * D_IN * D_SAE + D_SAE + D_IN) * 4
    with pytest.raises(CapabilityUnsupported, match=rf"needs {size / 1024:.1f} KiB on cpu"):
        load_sae(tmp_path / "s", memory_budget_bytes=size - 1)
    assert (
        load_sae(tmp_path / "s", memory_budget_bytes=size).nbytes == size + D_IN * 4
    )  # + input bias


def test_a_folder_without_an_sae_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CapabilityUnsupported, match="holds none of"):
        load_sae(tmp_path)


def test_wrong_widths_and_features_are_refused(tmp_path: Path) -> None:
    write_saelens(
        tmp_path / "s", "standard", d_in=D_IN, d_sae=D_SAE, hook_name="blocks.0.hook_resid_post"
    )
    sae = load_sae(tmp_path / "s")
    with pytest.raises(InvalidArgument, match="16 wide"):
        sae.encode(torch.zeros(3, D_IN + 1))
    with pytest.raises(InvalidArgument, match="out of range"):
        sae.steering(D_SAE, 1.0)
    assert np.isfinite(sae.encode(torch.zeros(3, D_IN)).numpy()).all()
