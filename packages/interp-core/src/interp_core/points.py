"""Which activations can a user name, what exactly is each one, and does a given model have it?

The public face of the point registry; each part lives in a module named for what it holds:

- `interp_core.point_table`: the 34 definitions (the registry data) and the name lists;
- `interp_core.point_spec`: `PointSpec` and the vocabulary its rows are written in (scope, width
  rule, role, engine equivalents);
- `interp_core.point_lookup`: names and synonyms: unknown names answered with the nearest point,
  and each reference engine's name for a point on a given model;
- `interp_core.presence`: which point exists on which model, decided from `ModelFacts` alone, so
  a sizer, a CLI or the docs can ask before any weights load; every "no" carries the reason and
  an alternative.

This module asks those questions by point name. Docs and the cheat sheet are generated from the
registry; nothing else restates these definitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interp_core.errors import PointUnsupported
from interp_core.point_lookup import equivalent_for, get_point
from interp_core.point_spec import ENGINES, Equivalent, PointSpec, Role, Scope, Width
from interp_core.point_table import (
    POINTS,
    hyper_connection_names,
    is_point,
    layer_point_names,
    point_names,
    stream_coordinate_names,
    trunk_point_names,
    writable_names,
)
from interp_core.presence import layer_ranges, reachable, why_absent

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = [
    "ENGINES",
    "POINTS",
    "Equivalent",
    "PointSpec",
    "Role",
    "Scope",
    "Width",
    "absence_reason",
    "equivalent_for",
    "get_point",
    "hyper_connection_names",
    "is_point",
    "layer_point_names",
    "layer_ranges",
    "point_names",
    "points_for",
    "require_point",
    "stream_coordinate_names",
    "trunk_point_names",
    "writable_names",
]


def absence_reason(
    name: str, facts: ModelFacts, layer: int | None = None, stream: int | None = None
) -> str | None:
    """None when the model has the point (at `layer`, or at some layer), else a sentence why not.

    On a multi-stream trunk the bare resid_pre / resid_mid / resid_post are absent (a stream
    coordinate is required); a stream coordinate on a single-stream trunk is absent too. A layer
    outside the model, a layer on a trunk point or a stream on a point that takes none raises
    PointUnsupported: those addresses are malformed for the model, not merely missing.
    """
    return get_point(name).absence_reason(facts, layer, stream)


def require_point(
    name: str, facts: ModelFacts, layer: int | None = None, stream: int | None = None
) -> PointSpec:
    """The spec when the model has the point, else PointUnsupported: what, why, what instead."""
    spec = get_point(name)
    found = why_absent(spec, facts, layer, stream)
    if found is None:
        return spec
    where = spec.name if layer is None else f"{spec.name} at layer {layer}"
    if stream is not None:
        where += f" stream {stream}"
    message = f"{where} is not available on {facts.architecture}"
    instead = found.instead and found.instead[0].upper() + found.instead[1:]
    raise PointUnsupported.build(message, found.why, instead)


def points_for(facts: ModelFacts) -> tuple[PointSpec, ...]:
    """The points this model has at some layer (or at trunk level), in registry order.

    On a multi-stream trunk resid_pre / resid_mid / resid_post are listed because their
    `.stream-K` forms exist, even though the bare forms are refused.
    """
    return tuple(spec for spec in POINTS.values() if reachable(spec, facts))
