"""Does the hostile-input harness catch what it hunts, and only that?

The harness (`interp_core.testing.hostile`, `hostile_strategies`) runs in the eager and vLLM
suites; here it runs against the torch-free fake backend, clean and with one deliberate defect at
a time: steering that outlives its request, a suspended stream that keeps its steering, a raw
exception on a huge position, NaN from a huge scale. Each defect must be reported, naming the
request; the clean backend must pass the same mixes, and every request the strategies call valid
must succeed on it.
"""

from __future__ import annotations

import asyncio
import datetime
import math
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from fake_backend import FakeModel, FakeTensor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp_core.cache import ActivationCache
from interp_core.errors import InterpError
from interp_core.steering import SteeringSpec
from interp_core.testing import hostile
from interp_core.testing.hostile import (
    PURE_PYTHON,
    Outcome,
    Prompt,
    Request,
    Spec,
    Vector,
    against_solo,
    alone,
)
from interp_core.testing.hostile_strategies import menu_for, requests

PROMPT = Prompt((1, 5, 9, 3))
STEER = (Spec("resid_post.0", Vector("random", 6, seed=1), scale=3.0),)
GREEDY = (("max_new_tokens", 3), ("temperature", 0.0))


class Leaky(FakeModel):
    """Steering outlives its request: a plain call reuses the last specs it saw."""

    last: tuple[SteeringSpec, ...] = ()

    def _specs(self, steering: Any) -> tuple[SteeringSpec, ...]:
        specs = super()._specs(steering)
        if specs:
            self.last = specs
        return specs or self.last


class StickyStream(FakeModel):
    """A stream's steering stays on the model while the stream is suspended."""

    held: tuple[SteeringSpec, ...] = ()

    def _specs(self, steering: Any) -> tuple[SteeringSpec, ...]:
        return self.held + super()._specs(steering)

    async def generate_stream(self, tokens: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self.held = super()._specs(kwargs.get("steering"))
        try:
            async for step in super().generate_stream(tokens, **kwargs):
                yield step
        finally:
            self.held = ()


class Crashy(FakeModel):
    """A position past the prompt reaches indexing unchecked."""

    def _specs(self, steering: Any) -> tuple[SteeringSpec, ...]:
        specs = super()._specs(steering)
        if any(s.positions and max(s.positions) >= 100 for s in specs):
            raise IndexError("index 999 is out of bounds for dimension 1 with size 4")
        return specs


class Overflowing(FakeModel):
    """A scale beyond the dtype yields NaN silently."""

    def _capture_now(self, tokens: Any, points: Sequence[Any], specs: Any) -> Any:
        cache = super()._capture_now(tokens, points, specs)
        if any(abs(s.scale) > 1e100 for s in specs):
            nan = {a: FakeTensor(_nan_like(cache[a].tolist())) for a in cache}
            return ActivationCache(nan, output=cache.output)
        return cache


def _nan_like(data: Any) -> Any:
    return [_nan_like(x) for x in data] if isinstance(data, list) else math.nan


def _problems(model: Any, mix: Sequence[Request], *, concurrent: bool = False) -> list[str]:
    # Alone means on a model nothing else ran on (the suites check that with a baseline).
    solos = [asyncio.run(hostile.run_mix(type(model)(), [r], concurrent=False))[0] for r in mix]
    outcomes = asyncio.run(hostile.run_mix(model, mix, concurrent=concurrent))
    return hostile.judge(mix, outcomes, solos, PURE_PYTHON)


EVERY_KIND = (
    Request("abandon", PROMPT, steering=STEER, sampling=GREEDY, turns=1),
    Request("capture", PROMPT, points=("resid_post.1", "mlp_act.0"), steering=STEER),
    Request("capture", PROMPT, points=("resid_post.1",)),
    Request("generate", PROMPT, sampling=GREEDY),
    Request("stream", PROMPT, steering=STEER, sampling=(*GREEDY, ("seed", 3))),
    Request("capture_generation", PROMPT, points=("resid_pre.1",), sampling=GREEDY),
    Request("lens", PROMPT, steering=STEER, lens=(("top_k", 3),)),
    Request("cancel", PROMPT, sampling=GREEDY, turns=1, inner="stream"),
    Request(
        "capture",
        PROMPT,
        points=("resid_post.0",),
        steering=(Spec("resid_post.0", Vector("random", 6), positions=(999,)),),
    ),
)


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
def test_a_clean_backend_passes_a_mix_of_every_kind(concurrent: bool) -> None:
    model = FakeModel()
    assert _problems(model, EVERY_KIND, concurrent=concurrent) == []
    outcomes = asyncio.run(hostile.run_mix(model, EVERY_KIND, concurrent=concurrent))
    statuses = [o.status for o in outcomes]
    assert statuses[:7] == ["ok"] * 7
    assert statuses[7] in ("cancelled", "ok")  # where the cancel lands is the schedule's call
    assert statuses[8] == "ok"  # the clean fake masks positions: one past the prompt is no-op
    assert len(outcomes[0].value["tokens"]) == 1  # abandoned after one step


def test_a_clean_backend_passes_from_threads() -> None:
    model = FakeModel()
    solos = [asyncio.run(hostile.run_mix(model, [r], concurrent=False))[0] for r in EVERY_KIND]
    outcomes = hostile.run_mix_in_threads(model, EVERY_KIND, threads=3)
    assert hostile.judge(EVERY_KIND, outcomes, solos, PURE_PYTHON) == []


@pytest.mark.parametrize(
    ("flawed", "mix", "start", "fragment"),
    [
        # steering that outlives its request
        (
            Leaky,
            [Request("capture", PROMPT, points=("resid_post.1",), steering=STEER), EVERY_KIND[2]],
            "request 1: Request('capture'",
            "cache.resid_post.1: differs from its solo run",
        ),
        # a steered stream abandoned, then a plain capture: the suspended stream kept its steering
        (StickyStream, [EVERY_KIND[0], EVERY_KIND[2]], "request 1:", "differs from its solo run"),
    ],
    ids=["steering-outlives-its-request", "suspended-stream-keeps-its-steering"],
)
def test_a_leak_into_the_next_request_is_caught(
    flawed: type, mix: list[Request], start: str, fragment: str
) -> None:
    assert _problems(FakeModel(), mix) == []
    problems = _problems(flawed(), mix)
    assert len(problems) == 1
    assert problems[0].startswith(start)
    assert fragment in problems[0]


def test_a_raw_exception_fails_naming_the_request_and_a_refusal_does_not() -> None:
    huge = EVERY_KIND[8]
    outcome = asyncio.run(hostile.run_request(Crashy(), huge))
    assert outcome.status == "crashed"
    problem = alone(huge, outcome, PURE_PYTHON)
    assert problem is not None
    assert "non-library exception (crashed: IndexError: index 999 is out of bounds" in problem
    empty = Request(
        "capture",
        PROMPT,
        points=("resid_post.0",),
        steering=(Spec("resid_post.0", Vector("random", 6), positions=()),),
    )
    refused = asyncio.run(hostile.run_request(Crashy(), empty))
    assert refused.status == "refused"  # SteeringSpec refuses empty positions: an InterpError
    assert alone(empty, refused, PURE_PYTHON) is None


def test_non_finite_results_fail() -> None:
    big = Request(
        "capture",
        PROMPT,
        points=("resid_post.1",),
        steering=(Spec("resid_post.0", Vector("random", 6), scale=1e300),),
    )
    assert alone(big, asyncio.run(hostile.run_request(FakeModel(), big)), PURE_PYTHON) is None
    outcome = asyncio.run(hostile.run_request(Overflowing(), big))
    assert alone(big, outcome, PURE_PYTHON) == "returned non-finite values at cache.resid_post.1"


def test_an_outcome_that_depends_on_the_neighbours_fails() -> None:
    request = EVERY_KIND[2]
    ok = Outcome("ok", {"cache": {"resid_post.1": FakeTensor([[1.0, 2.0]])}})
    refused = Outcome("refused", error=InterpError("no"))
    near = Outcome("ok", {"cache": {"resid_post.1": FakeTensor([[1.0, 2.0 + 1e-9]])}})
    assert "succeeds alone but inside the mix refused" in (
        against_solo(request, refused, ok, PURE_PYTHON) or ""
    )
    assert "is refused alone" in (against_solo(request, ok, refused, PURE_PYTHON) or "")
    assert against_solo(request, near, ok, PURE_PYTHON) is not None  # exact: 1e-9 is a change
    loose = hostile.Numerics(PURE_PYTHON.finite, PURE_PYTHON.diff, tolerance=1e-6)
    assert against_solo(request, near, ok, loose) is None
    unseeded = Request("generate", PROMPT, sampling=(("temperature", 1.0),))
    assert not unseeded.comparable  # fresh randomness: nothing to compare
    assert (
        against_solo(
            unseeded, Outcome("ok", {"tokens": (1,)}), Outcome("ok", {"tokens": (2,)}), PURE_PYTHON
        )
        is None
    )


def test_lens_tokens_may_trade_places_only_within_the_tolerance() -> None:
    request = EVERY_KIND[6]
    loose = hostile.Numerics(PURE_PYTHON.finite, PURE_PYTHON.diff, tolerance=1e-5)

    def lens(*row: tuple[int, float]) -> Outcome:
        return Outcome("ok", {"lens": ((0, (row,)),)})

    solo = lens((4, 0.5), (7, 0.2), (9, 0.1000001))
    swapped_edge = lens((4, 0.5), (7, 0.2), (2, 0.1000000))  # 2 and 9 tie at the edge
    assert against_solo(request, swapped_edge, solo, loose) is None
    moved = lens((4, 0.5), (7, 0.2), (9, 0.12))
    assert "probabilities" in (against_solo(request, moved, solo, loose) or "")
    stranger = lens((4, 0.5), (2, 0.2), (9, 0.1000001))  # a clear rank-2 token replaced
    assert "is not in the solo top-k" in (against_solo(request, stranger, solo, loose) or "")


def test_a_broken_input_factory_is_reported_as_a_harness_bug() -> None:
    def factory(values: Any, dtype: str) -> Any:
        raise RuntimeError("no such dtype")

    request = Request("capture", Prompt((1, 2), "int64"), points=("resid_post.0",))
    outcome = asyncio.run(hostile.run_request(FakeModel(), request, tensor=factory))
    assert outcome.status == "harness"
    assert (alone(request, outcome, PURE_PYTHON) or "").startswith("HARNESS BUG")


def test_a_thread_that_never_finishes_is_reported_as_a_hang() -> None:
    release = threading.Event()

    class Stuck(FakeModel):
        async def capture(self, *args: Any, **kwargs: Any) -> Any:
            release.wait()  # blocks its thread until the test has seen the report
            return await super().capture(*args, **kwargs)

    try:
        with pytest.raises(AssertionError, match=r"requests \[0\] .* never finished"):
            hostile.run_mix_in_threads(Stuck(), [EVERY_KIND[2]], threads=1, timeout=0.05)
    finally:
        release.set()


_CLEAN = FakeModel()
_VALID, _HOSTILE = requests(menu_for(_CLEAN, tensors=False))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=_VALID)
def test_every_request_the_strategies_call_valid_succeeds_on_a_clean_backend(
    request: Request,
) -> None:
    outcome = asyncio.run(hostile.run_request(_CLEAN, request))
    assert outcome.status == "ok", (request, outcome.describe())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=st.one_of(_VALID, _HOSTILE))
def test_requests_are_hashable_printable_data(request: Request) -> None:
    assert {request: 1}[request] == 1  # solo results are cached by request
    assert repr(request).startswith(f"Request({request.kind!r}, <prompt ")


def test_the_rotating_seed_follows_the_variable_else_the_date(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(hostile.SEED_VAR, "424242")
    assert hostile.rotating_seed() == 424242
    monkeypatch.delenv(hostile.SEED_VAR)
    assert hostile.rotating_seed() == int(datetime.date.today().strftime("%Y%m%d"))
    assert "INTERP_HOSTILE_SEED=7" in hostile.seed_note(7)


class _Solos(hostile.SoloHarness):
    """A harness stub: fixed solo outcomes, no plain requests, a residue it can be told to show."""

    def __init__(self, outcomes: dict[Request, Outcome], residue: list[str]) -> None:
        self.outcomes, self.left = outcomes, residue
        self.ran: list[Request] = []
        super().__init__([], PURE_PYTHON)

    def alone(self, request: Request) -> Outcome:
        self.ran.append(request)
        return self.outcomes[request]

    def residue(self) -> list[str]:
        return list(self.left)


def test_solo_runs_run_each_request_once_and_name_one_that_breaks_the_model_alone() -> None:
    plain = Request("capture", PROMPT, points=("resid_post.1",))
    steered = Request("capture", PROMPT, points=("resid_post.1",), steering=STEER)
    ok = {plain: Outcome("ok", 1.0), steered: Outcome("ok", 2.0)}
    stub = _Solos(ok, [])
    mix = [plain, steered, plain]
    assert stub.solo_runs(mix, 7) == [ok[plain], ok[steered], ok[plain]]
    assert stub.ran == [plain, steered]  # cached: each distinct request ran alone once
    # A new request that leaves the model changed fails as run alone, and is not cached.
    broken = _Solos({plain: Outcome("ok", 1.0)}, ["resid_post.1 differs from the baseline"])
    with pytest.raises(AssertionError, match="alone, one after another") as caught:
        broken.solo_runs([plain], 7)
    assert "INTERP_HOSTILE_SEED=7" in str(caught.value)
    assert broken.solos == {}
