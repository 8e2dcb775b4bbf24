"""Which of our addresses does an SAE's hook name mean?

SAE files name the activation they were trained on in another tool's words: SAELens in
TransformerLens hook names (`blocks.10.hook_resid_post`), EleutherAI sparsify in Hugging Face
module names (`layers.10`, `layers.10.mlp`), Gemma Scope only in its folder names (`res`, `mlp`,
`att`). The answers come from the point registry's engine equivalents (`interp_core.points`):
its TransformerLens column for hook names, and its nnsight column (which mirrors the HF module
tree) for module names. Nothing here restates which tensor a point is.

A name the registry does not map is refused (`UnknownHook`) with the nearest address, never
guessed: a hook that is merely close (TransformerLens' `ln2.hook_normalized` is the MLP input
before the norm's weight) is a different tensor.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from interp_core.address import Address
from interp_core.errors import PointUnsupported
from interp_core.point_spec import Scope, Width
from interp_core.points import POINTS

__all__ = [
    "GEMMA_SCOPE_KINDS",
    "HookRow",
    "UnknownHook",
    "address_for_module",
    "address_for_tl_hook",
    "hook_table",
]


class UnknownHook(PointUnsupported):
    """An SAE's hook name that maps onto none of our points."""


# Hooks people meet in SAE files that are close to a point but are not it, with the reason.
_NOT_A_POINT = {
    "ln1.hook_normalized": (
        "attn_in",
        "TransformerLens' ln1.hook_normalized is the attention input before the norm's weight "
        "is applied, while attn_in includes it",
    ),
    "ln2.hook_normalized": (
        "mlp_in",
        "TransformerLens' ln2.hook_normalized is the MLP input before the norm's weight is "
        "applied, while mlp_in includes it",
    ),
    "hook_embed": (
        "embeddings",
        "hook_embed is the bare table lookup, before any embedding multiplier, and carries no "
        "layer",
    ),
}

# Gemma Scope names its SAEs by folder (gemma-scope-2b-pt-res/layer_20/...): the kind of site.
# The address each means, in TransformerLens words, as the Gemma Scope release trained them.
GEMMA_SCOPE_KINDS = {
    "res": "blocks.{L}.hook_resid_post",
    "mlp": "blocks.{L}.hook_mlp_out",
    "att": "blocks.{L}.attn.hook_z",
}


# HF modules whose names mean one tensor in every family the registry covers. Deeper names do not:
# Llama's post_attention_layernorm is the pre-MLP norm, Gemma-2's the post-attention one.
_FAMILY_FREE_MODULES = ("layers.{L}", "layers.{L}.self_attn", "layers.{L}.mlp")


def _encodable(name: str) -> bool:
    """Points an SAE can read: fixed width per token, floating point."""
    spec = POINTS[name]
    return spec.width is not Width.SCORES and spec.dtype_kind == "float"


def _tl_templates() -> dict[str, str]:
    """TransformerLens template (`blocks.{L}.hook_resid_post`) -> point, from the registry."""
    found: dict[str, str] = {}
    for spec in POINTS.values():
        name = spec.equivalent("transformer_lens").name
        if name is None or spec.scope is not Scope.LAYER or "{L}" not in name:
            continue
        found.setdefault(name, spec.name)
    return found


def _module_templates() -> dict[tuple[str, str], str]:
    """(HF module template `layers.{L}.mlp`, "input"/"output") -> point, from nnsight's names."""
    found: dict[tuple[str, str], str] = {}
    for spec in POINTS.values():
        name = spec.equivalent("nnsight").name
        if name is None or spec.scope is not Scope.LAYER:
            continue
        pattern = r"model\.model\.(layers\[\{L\}\][\w.]*?)\.(input|output)(\[0\])?"
        match = re.fullmatch(pattern, name)
        if match is None:
            continue
        module = match.group(1).replace("[{L}]", ".{L}")
        if module in _FAMILY_FREE_MODULES:
            found.setdefault((module, match.group(2)), spec.name)
    return found


_TL = _tl_templates()
_MODULES = _module_templates()


def _split_layer(name: str, prefix: str) -> tuple[str, int] | None:
    """(`prefix.{L}.rest` template, layer) for `prefix.<digits>.rest`, else None."""
    match = re.fullmatch(rf"{re.escape(prefix)}\.(\d+)((?:\.[\w.]+)?)", name)
    if match is None:
        return None
    return f"{prefix}.{{L}}{match.group(2)}", int(match.group(1))


def _nearest(template: str, layer: int | None, known: list[str], lookup: dict[str, str]) -> str:
    near = difflib.get_close_matches(template, known, n=1, cutoff=0.0)
    if not near:
        return "resid_post"
    point = lookup[near[0]]
    shown = near[0].replace("{L}", str(layer)) if layer is not None else near[0]
    return f"{point}.{layer} ({shown})" if layer is not None else f"{point} ({shown})"


def address_for_tl_hook(hook: str) -> Address:
    """Our address for a TransformerLens hook name such as `blocks.10.hook_resid_post`."""
    split = _split_layer(hook.strip(), "blocks")
    if split is None:
        error = UnknownHook.build(
            f"the SAE hook {hook!r} is not a layer hook",
            "SAEs at points are read at blocks.<layer>.<hook> names",
            "pass the address explicitly (load_sae(path, address=...)) if you know the tensor",
        )
        raise error
    template, layer = split
    point = _TL.get(template)
    if point is not None and not _encodable(point):
        error = UnknownHook.build(
            f"the SAE hook {hook!r} is {point}.{layer}",
            f"{point} has no fixed width per token or holds integers, so no SAE reads it",
            "the nearest address an SAE can read is a residual or sublayer point",
        )
        raise error
    if point is not None:
        return Address(point, layer)
    tail = template.removeprefix("blocks.{L}.")
    if tail in _NOT_A_POINT:
        nearest, why = _NOT_A_POINT[tail]
        error = UnknownHook.build(
            f"the SAE hook {hook!r} maps onto no point",
            why,
            f"the nearest address is {nearest}.{layer}; an SAE trained on {tail} cannot be "
            "applied there as it is",
        )
        raise error
    nearest = _nearest(template, layer, sorted(_TL), _TL)
    error = UnknownHook.build(
        f"the SAE hook {hook!r} maps onto no point",
        "the point registry has no TransformerLens equivalent of that name",
        f"the nearest address is {nearest}; `interp points` lists the points",
    )
    raise error


def address_for_module(module: str, side: Literal["input", "output"] = "output") -> Address:
    """Our address for a HF module's output (or input) such as `layers.10` or `layers.10.mlp`.

    EleutherAI sparsify names its hookpoints so, relative to the decoder (a leading `model.`
    is dropped); an SAE reads the module's output, a transcoder reads its input.
    """
    name = module.strip().removeprefix("model.")
    split = _split_layer(name, "layers")
    known = sorted({m for m, s in _MODULES if s == side})
    lookup = {m: p for (m, s), p in _MODULES.items() if s == side}
    if split is None:
        error = UnknownHook.build(
            f"the SAE hookpoint {module!r} is not a decoder layer module",
            "hookpoints at points are layers.<layer> or a module inside one (Llama-style names)",
            "pass the address explicitly (load_sae(path, address=...)) if you know the tensor",
        )
        raise error
    template, layer = split
    point = lookup.get(template)
    if point is not None:
        return Address(point, layer)
    nearest = _nearest(template, layer, known, lookup)
    error = UnknownHook.build(
        f"the SAE hookpoint {module!r} ({side}) maps onto no point",
        "the point registry has no module path for that module's " + side,
        f"the nearest address is {nearest}; `interp points` lists the points",
    )
    raise error


@dataclass(frozen=True)
class HookRow:
    """One line of the format -> address table the docs show."""

    format: str
    hook: str
    address: str


def hook_table() -> list[HookRow]:
    """Every hook name each format can carry that maps onto a point, from the code above."""
    rows = [
        HookRow("SAELens", template, f"{point}.{{L}}")
        for template, point in _TL.items()
        if _encodable(point)
    ]
    for kind, template in GEMMA_SCOPE_KINDS.items():
        point = _TL[template]
        rows.append(HookRow("Gemma Scope", f"<release>-{kind}/layer_{{L}}", f"{point}.{{L}}"))
    for (module, side), point in _MODULES.items():
        role = "SAE" if side == "output" else "transcoder input"
        rows.append(HookRow(f"sparsify ({role})", module, f"{point}.{{L}}"))
    return rows
