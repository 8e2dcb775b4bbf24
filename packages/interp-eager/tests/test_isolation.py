"""Can one call touch another? Threads, suspended streams and overflowing steering.

The rule under test (see the package README): one `EagerModel` serves one forward pass at a time.
Every call that runs the model takes the model's lock for its forward passes, so calls from
several threads queue instead of sharing hooks; nothing is patched process-wide (attn_scores and
router writes intercept torch functions through a thread-local function mode, only while the
attention or router module runs); a stream holds its steering and the lock only while it runs its
own forward pass for a step, never between yields. Steering whose result must overflow the model
dtype is refused before any work, and a write that still produces inf/NaN is refused after it,
naming the point, the scale and the dtype.

Thread interleavings are forced, not hoped for: a test hook pauses one thread inside its forward
pass while another thread makes its call. A bounded `join` only decides how long the paused
thread waits for the other one to finish; under the rule the other one is queued behind it, and
the assertions hold however long either waits.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from eager_helpers import decoder_layers, forward_hook, hook_ids, model, prompt_ids

from interp_core import load_model, sync
from interp_core.errors import SteeringSpecError
from interp_core.steering import SteeringSpec
from interp_eager.model import EagerModel
from interp_testmodels.families import build_family

_SOFTMAX = torch.nn.functional.softmax
_CAT = torch.cat
_LINEAR = torch.nn.functional.linear
_POINTS = ["resid_post.1", "attn_scores.0", "attn_scores.1"]
_WAIT = 30.0  # the longest a paused thread waits for its release (a safety net, never reached)


def _push(m: EagerModel, scale: float = 8.0) -> SteeringSpec:
    direction = torch.randn(m.d_model, generator=torch.Generator().manual_seed(0))
    return SteeringSpec("resid_post.0", direction, scale=scale)


def _snapshot(cache: Any, points: list[str]) -> dict[str, torch.Tensor]:
    return {p: cache[p].clone() for p in points}


def _start() -> tuple[EagerModel, set[tuple[str, int]], torch.Tensor, SteeringSpec, dict]:
    """The tiny Llama, its hooks before the test, the prompt, a strong push and the unsteered
    snapshot of `_POINTS`: where each isolation test starts."""
    m = model("llama")
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    spec = _push(m)
    return m, hooks, ids, spec, _snapshot(m.run_with_cache(ids, _POINTS), _POINTS)


def _differ(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> list[str]:
    """The points whose tensors are not exactly the expected ones (empty: all equal)."""
    return [p for p in expected if not torch.equal(got[p], expected[p])]


class _Worker(threading.Thread):
    """A thread that runs `call` once and keeps its result or its exception."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as error:  # reported by the test, never swallowed
            self.error = error

    def outcome(self) -> Any:
        self.join(_WAIT)
        assert not self.is_alive(), "a worker never finished"
        if self.error is not None:
            raise self.error
        return self.result


@contextmanager
def _pause_inside(m: EagerModel, layer: int) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Pause the first thread that runs `layer` of `m` until released; (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    owner: list[int] = []

    def hook(module: Any, args: Any, output: Any) -> None:
        if not owner:
            owner.append(threading.get_ident())
        if owner[0] == threading.get_ident() and not release.is_set():
            entered.set()
            release.wait(_WAIT)

    with forward_hook(decoder_layers(m.hf_model)[layer], hook):
        try:
            yield entered, release
        finally:
            release.set()


# --- finding 3: threads --------------------------------------------------------------------------
def test_a_plain_capture_beside_a_paused_steered_capture_is_exactly_unsteered() -> None:
    m, hooks, ids, spec, baseline = _start()
    solo = _snapshot(m.run_with_cache(ids, _POINTS, steering=spec), _POINTS)
    assert _differ(solo, baseline)  # the push is strong enough to see
    with _pause_inside(m, 1) as (entered, release):
        steered = _Worker(lambda: _snapshot(m.run_with_cache(ids, _POINTS, steering=spec), _POINTS))
        steered.start()
        assert entered.wait(_WAIT)
        plain = _Worker(lambda: _snapshot(m.run_with_cache(ids, _POINTS), _POINTS))
        plain.start()
        plain.join(2.0)  # on the bug it finishes here, inside the steered pass's hooks
        release.set()
        assert _differ(plain.outcome(), baseline) == []
        assert _differ(steered.outcome(), solo) == []
    assert hook_ids(m) == hooks
    assert torch.nn.functional.softmax is _SOFTMAX


def test_attention_captures_on_two_models_leave_softmax_unpatched() -> None:
    first = model("llama")
    second = load_model(str(build_family("llama")), backend="eager")
    assert isinstance(second, EagerModel)
    ids = prompt_ids(first)
    points = ["attn_scores.0", "attn_scores.1"]
    expected = _snapshot(first.run_with_cache(ids, points), points)
    # First enters, then second enters, then first leaves, then second leaves: a session that
    # restores the softmax it found would put the first session's wrapper back for good.
    with _pause_inside(first, 1) as (first_in, first_go):
        a = _Worker(lambda: _snapshot(first.run_with_cache(ids, points), points))
        a.start()
        assert first_in.wait(_WAIT)
        with _pause_inside(second, 0) as (second_in, second_go):
            b = _Worker(lambda: _snapshot(second.run_with_cache(ids, points), points))
            b.start()
            assert second_in.wait(_WAIT)
            first_go.set()
            assert _differ(a.outcome(), expected) == []
            second_go.set()
            assert _differ(b.outcome(), expected) == []
    assert torch.nn.functional.softmax is _SOFTMAX
    assert torch.cat is _CAT
    assert torch.nn.functional.linear is _LINEAR


def test_many_threads_mixing_steered_and_plain_calls_each_get_their_solo_result() -> None:
    m, hooks, ids, spec, baseline = _start()
    solo = _snapshot(m.run_with_cache(ids, _POINTS, steering=spec), _POINTS)
    greedy = m.generate_sync(ids, max_new_tokens=3, temperature=0.0, steering=spec).token_ids
    lens = m.logit_lens_sync(ids, top_k=2).logits
    start = threading.Barrier(6)

    def plain() -> list[bool]:
        start.wait(_WAIT)
        return [
            _differ(_snapshot(m.run_with_cache(ids, _POINTS), _POINTS), baseline) == []
            for _ in range(6)
        ]

    def steered() -> list[bool]:
        start.wait(_WAIT)
        runs = [m.run_with_cache(ids, _POINTS, steering=spec) for _ in range(6)]
        return [_differ(_snapshot(run, _POINTS), solo) == [] for run in runs]

    def generating() -> list[bool]:
        start.wait(_WAIT)
        made = [
            m.generate_sync(ids, max_new_tokens=3, temperature=0.0, steering=spec) for _ in "ab"
        ]
        return [g.token_ids == greedy for g in made]

    def lensing() -> list[bool]:
        start.wait(_WAIT)
        return [torch.equal(m.logit_lens_sync(ids, top_k=2).logits, lens) for _ in "ab"]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so the calls really interleave
    try:
        workers = [_Worker(f) for f in (plain, plain, steered, steered, generating, lensing)]
        for worker in workers:
            worker.start()
        outcomes = [worker.outcome() for worker in workers]
    finally:
        sys.setswitchinterval(interval)
    assert all(all(outcome) for outcome in outcomes), outcomes
    assert hook_ids(m) == hooks
    assert torch.nn.functional.softmax is _SOFTMAX


# --- finding 4: suspended streams ----------------------------------------------------------------
def test_a_suspended_sync_stream_leaves_no_steering_on_the_model() -> None:
    m, hooks, ids, spec, baseline = _start()
    whole = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, steering=spec)
    stream = sync.generate_stream(m, ids, max_new_tokens=6, temperature=0.0, steering=spec)
    try:
        first = next(stream)
        assert hook_ids(m) == hooks
        assert _differ(_snapshot(m.run_with_cache(ids, _POINTS), _POINTS), baseline) == []
        rest = list(stream)
    finally:
        stream.close()
    assert [first.token_id, *(s.token_id for s in rest)] == list(whole.token_ids)
    assert hook_ids(m) == hooks


def test_a_suspended_async_stream_leaves_no_steering_on_the_model() -> None:
    m, hooks, ids, spec, baseline = _start()
    whole = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, steering=spec)

    async def interleave() -> tuple[list[int], dict[str, torch.Tensor], bool]:
        stream = m.generate_stream(ids, max_new_tokens=6, temperature=0.0, steering=spec)
        tokens = [(await anext(stream)).token_id]
        clean = hook_ids(m) == hooks
        plain = _snapshot(await m.capture(ids, _POINTS), _POINTS)
        tokens += [step.token_id async for step in stream]
        return tokens, plain, clean

    tokens, plain, clean = asyncio.run(interleave())
    assert clean
    assert _differ(plain, baseline) == []
    assert tokens == list(whole.token_ids)


def test_an_abandoned_stream_leaves_nothing_behind() -> None:
    m = model("llama")
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    baseline = _snapshot(m.run_with_cache(ids, _POINTS), _POINTS)
    stream = m.generate_stream(ids, max_new_tokens=6, temperature=0.0, steering=_push(m))
    # One step, then dropped: only the loop's own shutdown closes it, and nothing else runs it.
    asyncio.run(anext(stream))
    assert hook_ids(m) == hooks
    assert _differ(_snapshot(m.run_with_cache(ids, _POINTS), _POINTS), baseline) == []


# --- finding 5: finite inputs that overflow ------------------------------------------------------
@pytest.fixture(scope="module")
def half() -> EagerModel:
    loaded = load_model(str(build_family("llama")), backend="eager", dtype="float16")
    assert isinstance(loaded, EagerModel)
    return loaded


def _unit(width: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    vector = torch.zeros(width, dtype=dtype)
    vector[0] = 1.0
    return vector


@pytest.mark.parametrize(
    ("make", "fix"),
    [
        (lambda m: SteeringSpec("resid_post.0", _unit(m.d_model), scale=1e300), r"\|scale\|·max"),
        (
            lambda m: SteeringSpec(
                "resid_post.0", torch.full((m.d_model,), 1e300, dtype=torch.float64)
            ),
            r"rescale the vector",
        ),
        (
            lambda m: SteeringSpec("resid_post.0", [1e30] * m.d_model, op="orthogonal"),
            r"unit vector",
        ),
        (
            lambda m: SteeringSpec("resid_post.0", _unit(m.d_model), op="orthogonal", scale=1e300),
            r"keep \|scale\| below",
        ),
        (
            lambda m: SteeringSpec(
                "resid_post.0", _unit(m.d_model), op="projection_cap", max=1e300
            ),
            r"within ±",
        ),
    ],
    ids=["scale 1e300", "float64 vector of 1e300", "huge direction", "orthogonal 1e300", "cap"],
)
def test_steering_that_must_overflow_is_refused_before_any_work(
    make: Callable[[EagerModel], SteeringSpec], fix: str
) -> None:
    m = model("llama")
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    before = m.forward_logits(ids)
    spec = make(m)
    for call in (
        lambda: m.run_with_cache(ids, ["resid_post.1"], steering=spec),
        lambda: m.generate_sync(ids, max_new_tokens=2, temperature=0.0, steering=spec),
    ):
        with pytest.raises(SteeringSpecError, match=fix) as raised:
            call()
        assert "resid_post.0" in str(raised.value)
        assert "float32" in str(raised.value)
    assert hook_ids(m) == hooks
    assert torch.equal(m.forward_logits(ids), before)


def test_a_half_model_refuses_a_scale_beyond_float16(half: EagerModel) -> None:
    ids = prompt_ids(half)
    spec = SteeringSpec("resid_post.0", _unit(half.d_model), scale=1e5)
    with pytest.raises(SteeringSpecError, match=r"scale=100000\.0 on a float16 model"):
        half.run_with_cache(ids, ["resid_post.1"], steering=spec)
    # The same spec fits a float32 model and steers it finitely.
    wide = model("llama").run_with_cache(ids, ["resid_post.1"], steering=spec)["resid_post.1"]
    assert bool(torch.isfinite(wide).all())


def test_a_write_that_overflows_is_refused_naming_point_scale_and_dtype(half: EagerModel) -> None:
    hooks = hook_ids(half)
    ids = prompt_ids(half)
    plain = half.run_with_cache(ids, ["resid_post.1"])["resid_post.1"].clone()
    # Each spec fits float16 alone (60000 < 65504); together they add 120000 to one channel.
    specs = [SteeringSpec("resid_post.0", _unit(half.d_model), scale=60000.0)] * 2
    for call in (
        lambda: half.run_with_cache(ids, ["resid_post.1"], steering=specs),
        lambda: half.generate_sync(ids, max_new_tokens=2, temperature=0.0, steering=specs),
    ):
        with pytest.raises(SteeringSpecError) as raised:
            call()
        message = str(raised.value)
        assert "resid_post.0" in message
        assert "scale=60000.0" in message
        assert "float16" in message
        assert "non-finite" in message
    assert hook_ids(half) == hooks
    assert torch.equal(half.run_with_cache(ids, ["resid_post.1"])["resid_post.1"], plain)
