"""The SAEs a server loads at start (`--sae [NAME=]PATH`), and the steering built from them.

interp-sae is an optional dependency (`pip install 'interpoint-serve[sae]'`): it brings torch, which
a server of a non-torch backend need not carry, so it is imported here only when a server is
asked to load SAEs, never when interp_serve is imported. Requests name an SAE by the name it was
loaded under; `GET /v1/saes` lists them. A feature steered or clamped in a request becomes the
SAE's own `SteeringSpec` (`sae.steering`, `sae.clamp`), so over HTTP and in-process the same
spec is applied.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from interp_core.errors import ConfigError, InterpError, InvalidArgument
from interp_core.protocol import InterpModel

__all__ = [
    "feature_specs",
    "import_interp_sae",
    "load_saes",
    "parse_sae_arg",
    "pick",
    "sae_rows",
]

INSTALL = "pip install 'interpoint-serve[sae]' (or pip install interpoint-sae)"


def import_interp_sae() -> Any:
    """interp_sae, or a refusal saying how to install it."""
    try:
        return importlib.import_module("interp_sae")
    except ImportError as error:
        message = (
            f"--sae needs the interp-sae package, which is not installed here ({error}); "
            f"{INSTALL}, or serve without --sae"
        )
        raise ConfigError(message) from error


def parse_sae_arg(value: str) -> tuple[str, str]:
    """`NAME=PATH` or `PATH` (named after its folder) -> (name, path)."""
    name, sep, path = value.partition("=")
    if sep and name and "/" not in name and "\\" not in name and path:
        return name, path
    return Path(value).expanduser().name or value, value


def load_saes(values: Sequence[str], model: InterpModel | None = None) -> dict[str, Any]:
    """Each `--sae` value loaded with `interp_sae.load_sae` (which checks memory first), on
    the model's device.

    With `model`, each SAE's width is checked against the point it reads on that model, so a
    server never starts with an SAE its model cannot feed.
    """
    interp_sae = import_interp_sae()
    # Next to the activations: a model that encodes in its workers (vLLM) loads its own copies
    # there, so the server's copy only builds steering specs and stays on the CPU.
    device = "cpu"
    if model is not None and getattr(model, "worker_features", None) is None:
        device = str(getattr(model, "device", "cpu"))
    loaded: dict[str, Any] = {}
    for value in values:
        name, path = parse_sae_arg(value)
        if name in loaded:
            message = f"two --sae values are named {name!r}; name them apart with --sae NAME=PATH"
            raise InvalidArgument(message)
        loaded[name] = interp_sae.load_sae(path, device=device)
        if model is not None:
            _check_width(name, loaded[name], model)
    return loaded


def _check_width(name: str, sae: Any, model: InterpModel) -> None:
    from interp_core.shapes import point_shape

    try:
        shape = point_shape(sae.address, model.facts, 1, 1)
    except InterpError:
        return  # the model refuses the point in its own words when it is asked for it
    width = math.prod(int(d) for d in shape[2:]) if len(shape) > 2 else int(shape[-1])
    if width != sae.d_in:
        message = (
            f"the SAE {name!r} reads {sae.address} with d_in={sae.d_in}, but this model's "
            f"{sae.address} is {width} wide; it was trained on another model: serve it with "
            f"that model, or load an SAE for this one"
        )
        raise InvalidArgument(message)


def sae_rows(saes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What `GET /v1/saes` lists for each loaded SAE."""
    return [
        {
            "name": name,
            "address": str(sae.address),
            "write_address": str(sae.write_address),
            "d_in": sae.d_in,
            "d_sae": sae.d_sae,
            "activation": sae.activation,
            "format": sae.format,
            "transcoder": sae.is_transcoder,
        }
        for name, sae in saes.items()
    ]


def pick(saes: Mapping[str, Any], name: str) -> Any:
    """The SAE loaded as `name`, or a refusal naming those that are."""
    sae = saes.get(name)
    if sae is None:
        served = ", ".join(sorted(saes)) or "none (start the server with --sae PATH)"
        message = f"no SAE named {name!r} is loaded on this server; loaded: {served} (GET /v1/saes)"
        raise InvalidArgument(message)
    return sae


def feature_specs(
    saes: Mapping[str, Any], add: Sequence[Any] = (), clamp: Sequence[Any] = ()
) -> list[Any]:
    """SteeringSpecs for a request's `features` (add) and `clamp` entries, in that order."""
    specs = [
        pick(saes, item.sae).steering(item.feature, item.strength, item.positions) for item in add
    ]
    specs += [
        pick(saes, item.sae).clamp(item.feature, item.value, item.positions) for item in clamp
    ]
    return specs
