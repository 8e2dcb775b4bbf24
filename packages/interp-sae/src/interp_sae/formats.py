"""Read an SAE from a local folder in the format it was published in.

- SAELens v6: `cfg.json` + `sae_weights.safetensors`; architectures standard, jumprelu, topk,
  gated, transcoder and jumprelu_transcoder. The hook is `metadata.hook_name` (a
  TransformerLens name); a transcoder's output hook is `metadata.hook_name_out`.
- Gemma Scope: `params.npz` (W_enc, W_dec, b_enc, b_dec, threshold), JumpReLU. The file names no
  hook; the release folder does (`gemma-scope-2b-pt-res/layer_20/...`), else pass `address=`.
- EleutherAI sparsify: `cfg.json` + `sae.safetensors` in a folder named for its hookpoint (a HF
  module name such as `layers.10` or `layers.10.mlp`), TopK; a transcoder (`transcode: true`)
  reads the module's input and writes its output.

Every input-handling switch a format has is honoured or refused with the reason: SAELens'
`apply_b_dec_to_input` and run-time `normalize_activations` (layer_norm, constant_norm_rescale)
are honoured; `expected_average_only_in` and `covariance_whitening` need statistics the folder
does not carry, `hook_head_index` reads one head of a point our addresses hold whole, and skip
transcoders decode from their input too: those are refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interp_core.address import Address, AddressLike, to_address
from interp_core.errors import CapabilityUnsupported
from interp_sae.hooks import GEMMA_SCOPE_KINDS, UnknownHook, address_for_module, address_for_tl_hook
from interp_sae.memory import check_fits, npz_shapes, safetensors_shapes
from interp_sae.sae import SAE

__all__ = ["FORMATS", "detect_format", "load_sae"]

FORMATS = ("saelens", "gemma-scope", "sparsify")

_SAELENS = {
    "standard": ("relu", False),
    "jumprelu": ("jumprelu", False),
    "topk": ("topk", False),
    "gated": ("gated", False),
    "transcoder": ("relu", True),
    "jumprelu_transcoder": ("jumprelu", True),
}
_STATELESS_NORMS = ("none", "layer_norm", "constant_norm_rescale")


def _refuse(what: str, why: str, instead: str) -> CapabilityUnsupported:
    error = CapabilityUnsupported.build(what, why, instead)
    assert isinstance(error, CapabilityUnsupported)
    return error


def detect_format(path: Path) -> str:
    """Which format the folder (or .npz file) at `path` holds; refuses anything else."""
    if path.is_file() and path.suffix == ".npz":
        return "gemma-scope"
    if path.is_dir():
        if (path / "cfg.json").is_file() and (path / "sae_weights.safetensors").is_file():
            return "saelens"
        if (path / "cfg.json").is_file() and (path / "sae.safetensors").is_file():
            return "sparsify"
        if (path / "params.npz").is_file():
            return "gemma-scope"
    what = f"no SAE found at {path}"
    if not path.exists():
        raise _refuse(what, "the path does not exist", "pass a local folder")
    raise _refuse(
        what,
        "it holds none of cfg.json + sae_weights.safetensors (SAELens), params.npz (Gemma "
        "Scope) or cfg.json + sae.safetensors (sparsify)",
        "point at the folder of one SAE (for a multi-layer release, the layer's own folder)",
    )


def load_sae(
    path: str | Path,
    *,
    address: AddressLike | None = None,
    write_address: AddressLike | None = None,
    device: str | torch.device = "cpu",
    memory_budget_bytes: int | None = None,
) -> SAE:
    """Load the SAE (or transcoder) stored at `path`, its hook mapped onto our address.

    `address` (and `write_address` for a transcoder) name the point when the file cannot, e.g.
    Gemma Scope outside its release folders; when the file does name a hook, they must agree
    with it. Memory is checked from the file headers before any weight is read:
    `memory_budget_bytes`, else the free memory of `device`.
    """
    folder = Path(path).expanduser()
    kind = detect_format(folder)
    target = torch.device(device)
    given = _given(address), _given(write_address)
    if kind == "saelens":
        sae = _saelens(folder, given, target, memory_budget_bytes)
    elif kind == "sparsify":
        sae = _sparsify(folder, given, target, memory_budget_bytes)
    else:
        sae = _gemma_scope(folder, given, target, memory_budget_bytes)
    return sae


def _given(address: AddressLike | None) -> Address | None:
    return None if address is None else to_address(address)


def _resolve(
    mapper: Callable[[], Address] | None, given: Address | None, what: str, source: str
) -> Address:
    """Map the file's hook (`mapper`, None when it names none), or take the caller's address.

    A hook that maps onto no point is refused (naming the nearest address) unless the caller
    says which address the SAE reads: then that is the caller's statement, not a guess.
    """
    found = None
    if mapper is not None:
        try:
            found = mapper()
        except UnknownHook:
            if given is None:
                raise
    return _settle(found, given, what, source)


def _settle(found: Address | None, given: Address | None, what: str, source: str) -> Address:
    """The address from the file unless the caller gave one; a disagreement is refused."""
    if found is not None and given is not None and found != given:
        error = _refuse(
            f"{source} is an SAE at {found}, but {what}={str(given)!r} was passed",
            "its hook name says where it was trained",
            f"drop {what}=, or pass {what}={str(found)!r}",
        )
        raise error
    if found is None and given is None:
        error = _refuse(
            f"{source} does not say where it reads",
            "the format names no hook there",
            f"pass {what}= (e.g. load_sae(path, {what}='resid_post.10'))",
        )
        raise error
    result = found if found is not None else given
    assert result is not None
    return result


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: _float(v) for k, v in load_file(str(path)).items()}


def _float(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))


def _need(weights: dict[str, Any], names: tuple[str, ...], source: str) -> None:
    missing = [n for n in names if n not in weights]
    if missing:
        error = _refuse(
            f"{source} lacks {', '.join(missing)}",
            f"it holds {', '.join(sorted(weights))}",
            "check that the folder holds the SAE the cfg.json describes",
        )
        raise error


# --- SAELens --------------------------------------------------------------------------------------


def _saelens(
    folder: Path, given: tuple[Address | None, Address | None], device: torch.device, budget: Any
) -> SAE:
    cfg = json.loads((folder / "cfg.json").read_text())
    meta = cfg.get("metadata") or {}
    source = f"the SAELens SAE at {folder}"
    arch = cfg.get("architecture", "standard")
    if arch not in _SAELENS:
        why = (
            "a skip transcoder's output also depends on its input (W_skip), which decode() "
            "does not take"
            if "skip" in arch
            else f"interp-sae reads {', '.join(_SAELENS)}"
        )
        error = _refuse(f"{source} has architecture {arch!r}", why, "convert it to one of those")
        raise error
    activation, transcoder = _SAELENS[arch]
    norm = cfg.get("normalize_activations", "none") or "none"
    if norm not in _STATELESS_NORMS:
        error = _refuse(
            f"{source} has normalize_activations={norm!r}",
            "its inputs must be scaled by dataset statistics the folder does not carry",
            "fold them into the weights (SAELens: fold_activation_norm_scaling_factor or "
            "fold_activation_whitening) and save it with normalize_activations='none'",
        )
        raise error
    head = meta.get("hook_head_index", cfg.get("hook_head_index"))
    if head is not None:
        error = _refuse(
            f"{source} reads head {head} only (hook_head_index)",
            "our addresses hold every head of a point; an SAE of one head's slice would need "
            "its columns picked out before encoding",
            "slice the head out of a capture of the point and call sae.encode on it",
        )
        raise error
    hook = meta.get("hook_name") or cfg.get("hook_name") or cfg.get("hook_point")
    address = _resolve(hook and (lambda: address_for_tl_hook(hook)), given[0], "address", source)
    write = address
    if transcoder:
        out = meta.get("hook_name_out") or cfg.get("hook_name_out")
        write = _resolve(
            out and (lambda: address_for_tl_hook(out)), given[1], "write_address", source
        )
    weights_path = folder / "sae_weights.safetensors"
    check_fits(safetensors_shapes(weights_path), device, budget, source)
    weights = _read_safetensors(weights_path)
    if "log_threshold" in weights and "threshold" not in weights:
        weights["threshold"] = weights.pop("log_threshold").exp()  # older JumpReLU checkpoints
    scale = weights.pop("scaling_factor", None)
    if scale is not None and not bool((scale == 1).all()):
        error = _refuse(
            f"{source} carries a finetuning scaling_factor",
            "that pre-6.0 feature rescales features before decoding",
            "fold it into W_dec and drop it, or re-save with SAELens 6",
        )
        raise error
    base = ("W_enc", "W_dec", "b_dec")
    extra = {"gated": ("b_gate", "r_mag", "b_mag"), "jumprelu": ("threshold", "b_enc")}
    _need(weights, base + extra.get(activation, ("b_enc",)), source)
    input_bias = None
    if cfg.get("apply_b_dec_to_input", True) and not transcoder:
        input_bias = weights["b_dec"]
    k = cfg.get("k") if activation == "topk" else None
    if activation == "topk" and not isinstance(k, int):
        error = _refuse(f"{source} is topk without an int k", f"cfg k={k!r}", "set k in cfg.json")
        raise error
    return SAE(
        address=address,
        write_address=write,
        activation=activation,  # type: ignore[arg-type]
        W_enc=weights["W_enc"],
        # Gated SAEs have no b_enc: their two paths carry b_gate and b_mag instead.
        b_enc=weights["b_mag"] if activation == "gated" else weights["b_enc"],
        W_dec=weights["W_dec"],
        b_dec=weights["b_dec"],
        input_bias=input_bias,
        threshold=weights.get("threshold"),
        k=k,
        rescale_by_decoder_norm=bool(cfg.get("rescale_acts_by_decoder_norm", False)),
        b_gate=weights.get("b_gate"),
        r_mag=weights.get("r_mag"),
        b_mag=weights.get("b_mag"),
        normalize=norm,
        format="SAELens",
        source=str(folder),
        extra={"hook_name": hook, "architecture": arch},
    ).to(device)


# --- Gemma Scope ----------------------------------------------------------------------------------

_GEMMA_RELEASE = re.compile(r"gemma-scope-[\w.-]*?-(res|mlp|att|transcoders)(?:-[\w.-]+)?$")


def _gemma_scope_address(path: Path) -> tuple[Address | None, str]:
    """The address the release folders name (`...-res/layer_20/...`), else None with why."""
    kind = layer = None
    for part in path.resolve().parts:
        release = _GEMMA_RELEASE.match(part)
        if release:
            kind = release.group(1)
        found = re.fullmatch(r"layer_(\d+)", part)
        if found:
            layer = int(found.group(1))
    if kind is None or layer is None:
        return None, "no gemma-scope-*-res|mlp|att/layer_N folders on its path"
    if kind not in GEMMA_SCOPE_KINDS:
        return None, f"Gemma Scope {kind} read and write points other than their folder names"
    return address_for_tl_hook(GEMMA_SCOPE_KINDS[kind].replace("{L}", str(layer))), ""


def _gemma_scope(
    path: Path, given: tuple[Address | None, Address | None], device: torch.device, budget: Any
) -> SAE:
    npz = path if path.is_file() else path / "params.npz"
    source = f"the Gemma Scope SAE at {npz}"
    found, why = _gemma_scope_address(npz)
    if found is None and given[0] is None:
        error = _refuse(
            f"{source} does not say where it reads", why, "pass address= (e.g. 'resid_post.20')"
        )
        raise error
    address = _settle(found, given[0], "address", source)
    write = given[1] or address
    check_fits(npz_shapes(npz), device, budget, source)
    with np.load(npz) as archive:
        weights = {k: _float(torch.from_numpy(np.array(archive[k]))) for k in archive.files}
    _need(weights, ("W_enc", "W_dec", "b_enc", "b_dec", "threshold"), source)
    return SAE(
        address=address,
        write_address=write,
        activation="jumprelu",
        W_enc=weights["W_enc"],
        b_enc=weights["b_enc"],
        W_dec=weights["W_dec"],
        b_dec=weights["b_dec"],
        threshold=weights["threshold"],
        format="Gemma Scope",
        source=str(npz),
    ).to(device)


# --- EleutherAI sparsify --------------------------------------------------------------------------


def _sparsify(
    folder: Path, given: tuple[Address | None, Address | None], device: torch.device, budget: Any
) -> SAE:
    cfg = json.loads((folder / "cfg.json").read_text())
    source = f"the sparsify SAE at {folder}"
    if cfg.get("activation", "topk") != "topk":
        error = _refuse(
            f"{source} uses activation {cfg['activation']!r}",
            "interp-sae reads sparsify's TopK coders",
            "use a topk checkpoint",
        )
        raise error
    if cfg.get("skip_connection"):
        error = _refuse(
            f"{source} has a skip connection",
            "its output also depends on its input (W_skip), which decode() does not take",
            "use a checkpoint without skip_connection",
        )
        raise error
    transcode = bool(cfg.get("transcode", False))
    hookpoint = folder.name
    side = "input" if transcode else "output"
    address = _resolve(lambda: address_for_module(hookpoint, side), given[0], "address", source)
    write = address
    if transcode:
        write = _resolve(
            lambda: address_for_module(hookpoint, "output"), given[1], "write_address", source
        )
    weights_path = folder / "sae.safetensors"
    check_fits(safetensors_shapes(weights_path), device, budget, source)
    weights = _read_safetensors(weights_path)
    if "W_skip" in weights:
        error = _refuse(f"{source} has W_skip", "see skip_connection", "use one without")
        raise error
    _need(weights, ("encoder.weight", "encoder.bias", "W_dec", "b_dec"), source)
    k = cfg.get("k")
    if not isinstance(k, int):
        error = _refuse(f"{source} has no int k", f"cfg k={k!r}", "set k in cfg.json")
        raise error
    return SAE(
        address=address,
        write_address=write,
        activation="topk",
        W_enc=weights["encoder.weight"].T.contiguous(),
        b_enc=weights["encoder.bias"],
        W_dec=weights["W_dec"],
        b_dec=weights["b_dec"],
        input_bias=None if transcode else weights["b_dec"],
        k=k,
        format="sparsify",
        source=str(folder),
        extra={"hookpoint": hookpoint},
    ).to(device)
