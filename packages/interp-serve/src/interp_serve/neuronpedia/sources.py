"""Neuronpedia's sources (`6-res-jb`: layer, then set) as the SAEs this server loaded.

A source is the name an SAE was loaded under (`--sae 6-res-jb=PATH`), so the operator's
command line is the whole mapping. A source set is the part after the first dash: every loaded
SAE named `<layer>-<set>` belongs to the set `<set>`. Names that do not follow that pattern
still serve every single-source route; they are in no set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_core.points import POINTS

__all__ = ["hook_name", "in_set", "pick_source", "set_of"]

_SOURCE = re.compile(r"(\d+)-(.+)")


def set_of(name: str) -> str | None:
    """The source set of a source name, or None when the name is not `<layer>-<set>`."""
    match = _SOURCE.fullmatch(name)
    return match.group(2) if match else None


def _served(saes: Mapping[str, Any]) -> str:
    return ", ".join(sorted(saes)) or "none (start the server with --sae LAYER-SET=PATH)"


def pick_source(saes: Mapping[str, Any], source: str) -> Any:
    """The SAE loaded as `source`, or a refusal naming the sources that are served."""
    sae = saes.get(source)
    if sae is None:
        message = (
            f"source {source!r} is not served here; the served sources are {_served(saes)} "
            f"(load one with --sae {source}=PATH)"
        )
        raise InvalidArgument(message)
    return sae


def in_set(saes: Mapping[str, Any], source_set: str, selected: Sequence[str]) -> list[str]:
    """The sources of `source_set` to read: `selected` (each checked to be in the set), or
    every loaded source of the set when `selected` is empty."""
    members = [name for name in saes if set_of(name) == source_set]
    if not members:
        sets = sorted({s for s in map(set_of, saes) if s is not None})
        message = (
            f"source set {source_set!r} has no source served here; the served sets are "
            f"{', '.join(sets) or 'none'} (sources are named LAYER-SET, e.g. 6-res-jb)"
        )
        raise InvalidArgument(message)
    if not selected:
        return members
    for name in selected:
        pick_source(saes, name)
        if name not in members:
            message = (
                f"selected source {name!r} is not in the source set {source_set!r}; that "
                f"set's sources are {', '.join(members)}"
            )
            raise InvalidArgument(message)
    return list(dict.fromkeys(selected))


def hook_name(sae: Any) -> str:
    """The TransformerLens hook name an SAE reads at, as Neuronpedia names hooks: the one its
    file gave, else the registry's TransformerLens name for its address."""
    given = (getattr(sae, "extra", None) or {}).get("hook_name")
    if isinstance(given, str) and given:
        return given
    address: Address = sae.address
    template = POINTS[address.name].equivalent("transformer_lens").name
    if template is None:
        return str(address)
    return template.replace("{L}", str(address.layer))
