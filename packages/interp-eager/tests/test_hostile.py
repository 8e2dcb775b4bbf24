"""Can a hostile request touch another on the eager backend? The hostile-input harness.

Hypothesis draws mixes of valid and hostile requests (`interp_core.testing.hostile_strategies`:
bad and extreme steering specs, scales, positions, capture points, sampling values, prompts,
streams abandoned after a step, tasks cancelled mid-request) and runs each against one tiny Llama
in float32, either one request after another on one event loop or dealt to three threads at once.
After every mix:

1. a request that succeeds alone returns exactly (bit for bit) what it returned alone, and one
   refused alone is refused inside the mix with the same class;
2. nothing returned holds a NaN or an infinity, and nothing raised an exception other than an
   `InterpError` (the failure shows the request);
3. a plain capture and a greedy generation afterwards equal the baseline taken before any mix,
   and `torch.nn.functional.softmax` is torch's own again.

Each example starts from a clean model: if the previous one left it changed (check 3 failed), a
fresh one is loaded, so a falsifying example and its shrinks stand on their own.

Seeds: each test runs twice, under the fixed seed `hostile.FIXED_SEED` and under a rotating one
(INTERP_HOSTILE_SEED when set, else today's date as YYYYMMDD), so CI explores new mixes every
day; every failure names the seed that reproduces it. Budget: 40 examples in all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from interp_core.backends import load_model
from interp_core.testing import hostile
from interp_core.testing.hostile import Numerics, Outcome, Request
from interp_core.testing.hostile_strategies import Menu, bounded, menu_for, mixes, plain_requests
from interp_testmodels.families import build_family
from interp_testmodels.tensors import tensor_from

pytestmark = pytest.mark.slow

_SOFTMAX = torch.nn.functional.softmax


def _diff(a: Any, b: Any) -> float:
    if not isinstance(a, torch.Tensor) or tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return float("inf")
    if torch.equal(a, b):
        return 0.0
    return float((a.double() - b.double()).abs().nan_to_num(float("inf")).max())


EXACT = Numerics(finite=lambda t: bool(torch.isfinite(t).all()), diff=_diff, tolerance=0.0)


class Harness(hostile.SoloHarness):
    """The model under test, its solo results (cached per distinct request) and the baseline."""

    def __init__(self) -> None:
        self.path = str(build_family("llama"))
        self.model = self._load()
        self.menu: Menu = menu_for(self.model)
        super().__init__(plain_requests(self.menu), EXACT)

    def _load(self) -> Any:
        model = load_model(self.path, backend="eager", dtype="float32")
        model.hf_model  # noqa: B018 - load the weights before the first example
        return model

    def alone(self, request: Request) -> Outcome:
        mix = hostile.run_mix(self.model, [request], concurrent=False, tensor=tensor_from)
        return asyncio.run(mix)[0]

    def residue(self) -> list[str]:
        """What the model kept from earlier calls (check 3), torch's patched functions included."""
        found = super().residue()
        if torch.nn.functional.softmax is not _SOFTMAX:
            found.append("  torch.nn.functional.softmax is still patched after the mix")
        return found

    def fresh(self) -> None:
        """Start the next example from a clean model and torch."""
        torch.nn.functional.softmax = _SOFTMAX
        self.model = self._load()
        self.solos.clear()


@pytest.fixture(scope="module")
def harness() -> Harness:
    return Harness()


def _run(harness: Harness, data: Any, threads: int, seed_value: int) -> None:
    if harness.residue():  # the previous example left something behind (and failed for it)
        harness.fresh()
    mix = data.draw(mixes(harness.menu, min_size=2, max_size=6), label="mix")
    solos = harness.solo_runs(mix, seed_value)
    if threads == 1:
        how = "one after another"
        run = hostile.run_mix(harness.model, mix, concurrent=False, tensor=tensor_from)
        outcomes = asyncio.run(run)
    else:
        how = f"from {threads} threads"
        outcomes = hostile.run_mix_in_threads(
            harness.model, mix, threads=threads, tensor=tensor_from
        )
    problems = hostile.judge(mix, outcomes, solos, EXACT) + harness.residue()
    assert not problems, hostile.report(mix, outcomes, problems, how, seed_value)


def _hostile_test(seed_value: int, examples: int, threads: int) -> Any:
    @bounded(seed_value, examples)
    @given(data=st.data())
    def test(harness: Harness, data: Any) -> None:
        _run(harness, data, threads, seed_value)

    return test


ROTATING = hostile.rotating_seed()

test_mixes_one_after_another_fixed_seed = _hostile_test(hostile.FIXED_SEED, 12, threads=1)
test_mixes_one_after_another_rotating_seed = _hostile_test(ROTATING, 12, threads=1)
test_mixes_from_three_threads_fixed_seed = _hostile_test(hostile.FIXED_SEED, 8, threads=3)
test_mixes_from_three_threads_rotating_seed = _hostile_test(ROTATING, 8, threads=3)
