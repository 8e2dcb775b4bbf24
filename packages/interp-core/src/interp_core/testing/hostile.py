"""Can one request touch another? The hostile-input harness: request mixes, and how to judge one.

Hypothesis draws mixes of requests (`hostile_strategies.mixes`): valid ones beside malformed and
extreme ones (bad steering specs, scales like 1e300, positions like 2**63, unknown or ill-typed
capture points, sampling values of the wrong range or type), tasks cancelled mid-request and
streams abandoned after a step. A backend's suite runs each mix against one model (`run_mix`:
concurrently on a serving backend, sequentially or from several threads on an in-process one)
and then demands:

1. isolation: a request that succeeds alone returns the same inside the mix, and one refused
   alone is refused inside it with the same class (`against_solo`; each distinct request's solo
   result is computed once and cached by the suite's `SoloHarness`);
2. soundness: everything returned is finite, or the call raised an `InterpError` — any other
   exception, and any NaN or infinity in a result, is a bug (`alone`);
3. no residue: a plain request afterwards equals the baseline taken before any mix.

Requests are plain, hashable, printable data (`Request`, `Spec`, `Vector`, `Prompt`), turned
into real arguments only when run, so a falsifying example reads as the input that broke the
backend and the same request can run alone and in any mix. Tensors never appear here: a suite
passes a `tensor(values, dtype_name)` factory for tensor-valued prompts and vectors, and a
`Numerics` saying how to test its tensors for finiteness and closeness (exact on eager,
relative 1e-5 on vLLM).

Seeds: each suite runs the harness once under `FIXED_SEED` and once under `rotating_seed()` (the
INTERP_HOSTILE_SEED environment variable, else today's date as YYYYMMDD), and names the seed in
every failure (`seed_note`) so the run can be repeated exactly.

This module imports only the standard library and interp-core; hypothesis is imported only inside
the functions of `hostile_strategies`, so neither the core's purity test nor a core-only install
needs it.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import math
import os
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from interp_core.errors import InterpError
from interp_core.testing.compare import flatten, max_abs_diff, shape_of

__all__ = [
    "FIXED_SEED",
    "GENERATING",
    "KINDS",
    "PURE_PYTHON",
    "SEED_VAR",
    "Numerics",
    "Outcome",
    "Prompt",
    "Request",
    "SoloHarness",
    "Spec",
    "Vector",
    "against_solo",
    "alone",
    "judge",
    "report",
    "rotating_seed",
    "run_mix",
    "run_mix_in_threads",
    "run_request",
    "seed_note",
]

FIXED_SEED = 1212
SEED_VAR = "INTERP_HOSTILE_SEED"
KINDS = ("capture", "generate", "stream", "capture_generation", "lens", "abandon", "cancel")
GENERATING = ("generate", "stream", "capture_generation", "abandon")

TensorFactory = Callable[[Any, str], Any]


def rotating_seed() -> int:
    """INTERP_HOSTILE_SEED when set, else today's date as an int (YYYYMMDD): new every day."""
    raw = os.environ.get(SEED_VAR, "").strip()
    if raw:
        return int(raw)
    return int(datetime.date.today().strftime("%Y%m%d"))


def seed_note(seed: int) -> str:
    return f"[hypothesis seed {seed}: rerun this exact run with {SEED_VAR}={seed}]"


# --- what a request is ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Vector:
    """A steering vector by recipe: `kind` random (seeded Gaussian × magnitude), fill (every
    element = magnitude), zeros, nan / inf (random with one bad element), nested, text, empty.
    `form` "list" passes Python floats; any other form is a tensor dtype name for the factory."""

    kind: str
    width: int
    seed: int = 0
    magnitude: float = 1.0
    form: str = "list"

    def values(self) -> Any:
        rng = random.Random(self.seed)
        gauss = [rng.gauss(0.0, 1.0) * self.magnitude for _ in range(self.width)]
        if self.kind == "random":
            return gauss
        if self.kind == "fill":
            return [float(self.magnitude)] * self.width
        if self.kind == "zeros":
            return [0.0] * self.width
        if self.kind in ("nan", "inf"):
            gauss[self.seed % max(1, self.width)] = math.nan if self.kind == "nan" else math.inf
            return gauss
        if self.kind == "nested":
            return [gauss]
        if self.kind == "text":
            return "0.5"
        return []  # empty

    def build(self, tensor: TensorFactory | None) -> Any:
        values = self.values()
        if self.form == "list" or self.kind in ("nested", "text") or tensor is None:
            return values
        return tensor(values, self.form)

    def __repr__(self) -> str:
        form = "" if self.form == "list" else f" as {self.form}"
        size = f"{self.magnitude!r}×" if self.kind in ("random", "fill") else ""
        return f"<{size}{self.kind}[{self.width}] seed {self.seed}{form}>"


@dataclass(frozen=True)
class Spec:
    """The arguments of one `SteeringSpec`, any of which may be wrong; built when run."""

    point: Any
    vector: Vector
    op: Any = "add"
    scale: Any = 1.0
    positions: Any = None
    min: Any = None
    max: Any = None

    def __repr__(self) -> str:
        bits = [_short(self.point), repr(self.vector), f"op={self.op!r}", f"scale={self.scale!r}"]
        if self.positions is not None:
            bits.append(f"positions={_short(self.positions)}")
        if (self.min, self.max) != (None, None):
            bits.append(f"min={self.min!r}, max={self.max!r}")
        return f"Spec({', '.join(bits)})"

    def build(self, vector: Any) -> Any:
        from interp_core.steering import SteeringSpec

        positions = list(self.positions) if isinstance(self.positions, tuple) else self.positions
        return SteeringSpec(self.point, vector, self.op, self.scale, positions, self.min, self.max)


@dataclass(frozen=True)
class Prompt:
    """Token ids: a tuple (one prompt), a tuple of tuples (a batch) or anything else; `form`
    "list" passes them as Python lists, any other form is a tensor dtype name."""

    ids: Any
    form: str = "list"

    def build(self, tensor: TensorFactory | None) -> Any:
        as_lists = _lists(self.ids)
        if self.form == "list" or tensor is None:
            return as_lists
        return tensor(as_lists, self.form)

    def __repr__(self) -> str:
        form = "" if self.form == "list" else f" as {self.form}"
        return f"<prompt {_short(self.ids)}{form}>"


@dataclass(frozen=True)
class Request:
    """One call. `kind` is a protocol method, or abandon (a stream dropped after `turns` steps,
    never closed) or cancel (`inner` run as a task, cancelled after `turns` loop turns).
    `steering` is a tuple of `Spec` (passed as a list), one `Spec` (passed bare), None, or junk
    passed as is; `sampling` and `lens` are keyword arguments as (name, value) pairs."""

    kind: str
    prompt: Prompt
    points: Any = ()
    steering: Any = None
    sampling: tuple[tuple[str, Any], ...] = ()
    lens: tuple[tuple[str, Any], ...] = ()
    turns: int = 1
    inner: str = "generate"

    def __repr__(self) -> str:
        bits = [repr(self.kind), repr(self.prompt)]
        if self.points != ():
            bits.append(f"points={_short(self.points)}")
        if self.steering is not None:
            bits.append(f"steering={self.steering!r}")
        if self.sampling:
            bits.append(f"sampling={dict(self.sampling)!r}")
        if self.lens:
            bits.append(f"lens={dict(self.lens)!r}")
        if self.kind in ("abandon", "cancel"):
            bits.append(f"turns={self.turns}")
        if self.kind == "cancel":
            bits.append(f"inner={self.inner!r}")
        return f"Request({', '.join(bits)})"

    @property
    def comparable(self) -> bool:
        """Whether the outcome is a function of the request alone (so equals its solo run)."""
        if self.kind == "cancel":
            return False  # where the cancel lands depends on the schedule
        if self.kind not in GENERATING:
            return True
        args = dict(self.sampling)
        default = 0.0 if self.kind == "capture_generation" else 1.0
        temperature = args.get("temperature", default)
        greedy = isinstance(temperature, int | float) and temperature == 0
        return greedy or args.get("seed") is not None


def _lists(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_lists(v) for v in value]
    return value


def _short(value: Any) -> str:
    text = repr(_lists(value))
    return text if len(text) <= 80 else f"{text[:60]}…({len(text)} chars)"


# --- running ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What one request did: ok (with its value), refused (an InterpError), cancelled, crashed
    (any other exception), or harness (the harness failed to build the input: a harness bug)."""

    status: str
    value: Any = None
    error: BaseException | None = field(default=None, repr=False)

    def describe(self) -> str:
        if self.error is not None:
            return f"{self.status}: {type(self.error).__name__}: {_clip(str(self.error))}"
        return self.status


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"


async def run_request(
    model: Any, request: Request, *, tensor: TensorFactory | None = None, held: list | None = None
) -> Outcome:
    """Run one request; never raises for anything the request itself causes."""
    try:
        prompt = request.prompt.build(tensor)
        vectors = _vectors(request.steering, tensor)
    except Exception as exc:  # the test's own factory failed: not the backend's fault
        return Outcome("harness", error=exc)
    try:
        value = await _call(model, request, prompt, vectors, [] if held is None else held)
    except InterpError as exc:
        return Outcome("refused", error=exc)
    except asyncio.CancelledError as exc:
        if _being_cancelled():
            raise  # the harness itself is stopping this request (a hang guard): let it
        if request.kind == "cancel":
            return Outcome("cancelled")
        return Outcome("crashed", error=exc)  # a cancel nobody asked for leaked into this one
    except Exception as exc:
        return Outcome("crashed", error=exc)
    return Outcome("ok", value)


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _vectors(steering: Any, tensor: TensorFactory | None) -> Any:
    if isinstance(steering, Spec):
        return steering.vector.build(tensor)
    if isinstance(steering, tuple):
        return [s.vector.build(tensor) if isinstance(s, Spec) else None for s in steering]
    return None


def _steering(steering: Any, vectors: Any) -> Any:
    if isinstance(steering, Spec):
        return steering.build(vectors)
    if isinstance(steering, tuple):
        return [
            s.build(v) if isinstance(s, Spec) else s for s, v in zip(steering, vectors, strict=True)
        ]
    return steering


async def _call(model: Any, request: Request, prompt: Any, vectors: Any, held: list) -> Any:
    steering = _steering(request.steering, vectors)  # SteeringSpec's own refusals count too
    sampling = dict(request.sampling)
    kind = request.kind
    if kind == "capture":
        cache = await model.capture(prompt, _lists(request.points), steering=steering)
        return {"cache": _tensors(cache)}
    if kind == "generate":
        generation = await model.generate(prompt, steering=steering, **sampling)
        return {"tokens": generation.token_ids}
    if kind == "stream":
        steps = [s async for s in model.generate_stream(prompt, steering=steering, **sampling)]
        return _steps(steps)
    if kind == "capture_generation":
        generation, cache = await model.capture_generation(
            prompt, _lists(request.points), steering=steering, **sampling
        )
        return {"tokens": generation.token_ids, "cache": _tensors(cache)}
    if kind == "lens":
        lens = dict(request.lens)
        layers = _lists(lens.pop("layers", None))
        if steering is None:
            return {"lens": _lens(await model.logit_lens(prompt, layers, **lens))}
        from interp_core.steering import steer

        with steer(model, steering):  # the lens takes no steering=; it honours active specs
            return {"lens": _lens(await model.logit_lens(prompt, layers, **lens))}
    if kind == "abandon":
        stream = model.generate_stream(prompt, steering=steering, **sampling)
        held.append(stream)  # suspended, never closed, until the mix is over
        steps = []
        for _ in range(request.turns):
            try:
                steps.append(await anext(stream))
            except StopAsyncIteration:
                break
        return _steps(steps)
    if kind == "cancel":
        inner = Request(
            request.inner, request.prompt, request.points, request.steering, request.sampling
        )
        task = asyncio.ensure_future(_call(model, inner, prompt, vectors, held))
        for _ in range(request.turns):
            await asyncio.sleep(0)
        task.cancel()
        return await task  # CancelledError unless it finished first
    message = f"unknown request kind {kind!r}"
    raise AssertionError(message)


def _tensors(cache: Any) -> dict[str, Any]:
    return {str(address): cache[address] for address in cache}


def _steps(steps: Sequence[Any]) -> dict[str, Any]:
    return {
        "tokens": tuple(s.token_id for s in steps),
        "logprobs": tuple(s.logprob for s in steps),
    }


def _lens(result: Any) -> tuple[Any, ...]:
    return tuple(
        (
            layer,
            tuple(tuple((p.token_id, p.prob) for p in row) for row in result.predictions[layer]),
        )
        for layer in result.layers
    )


async def run_mix(
    model: Any,
    requests: Sequence[Request],
    *,
    concurrent: bool,
    tensor: TensorFactory | None = None,
) -> list[Outcome]:
    """Run a mix on the current loop: all at once (gather) or one after another.

    Abandoned streams stay suspended until every request of the mix is done; then they are
    dropped without being closed, and the loop is given a few turns to finalize them.
    """
    held: list[Any] = []
    if concurrent:
        outcomes = list(
            await asyncio.gather(
                *(run_request(model, r, tensor=tensor, held=held) for r in requests)
            )
        )
    else:
        outcomes = [await run_request(model, r, tensor=tensor, held=held) for r in requests]
    if held:
        held.clear()
        gc.collect()  # a stream in a reference cycle is finalized now, not at some later call
        for _ in range(5):
            await asyncio.sleep(0)
    return outcomes


def run_mix_in_threads(
    model: Any,
    requests: Sequence[Request],
    *,
    threads: int,
    tensor: TensorFactory | None = None,
    timeout: float = 120.0,
) -> list[Outcome]:
    """Deal the requests round-robin to `threads` threads; each runs its share sequentially on
    its own event loop, all starting together. For models not bound to one event loop (eager).
    A thread still running after `timeout` seconds is reported as a hang (a deadlock)."""
    shares = [list(range(i, len(requests), threads)) for i in range(threads)]
    outcomes: list[Outcome | None] = [None] * len(requests)
    failures: list[BaseException] = []
    start = threading.Barrier(threads)

    def work(indices: list[int]) -> None:
        try:
            start.wait()
            share = [requests[i] for i in indices]
            got = asyncio.run(run_mix(model, share, concurrent=False, tensor=tensor))
        except BaseException as exc:  # run_request catches what requests raise; this is not that
            failures.append(exc)
            return
        for i, outcome in zip(indices, got, strict=True):
            outcomes[i] = outcome

    workers = [threading.Thread(target=work, args=(s,), daemon=True) for s in shares]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout)
    if failures:
        message = f"a worker thread failed outside any request: {failures[0]!r}"
        raise AssertionError(message) from failures[0]
    hung = [i for i, o in enumerate(outcomes) if o is None]
    if hung:
        message = f"requests {hung} of the mix never finished within {timeout:.0f} s (a deadlock?)"
        raise AssertionError(message)
    return [o for o in outcomes if o is not None]


# --- judging ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Numerics:
    """How a suite's tensors are judged: `finite(t)` is True when every element is finite;
    `diff(a, b)` is a non-negative distance (inf on a shape mismatch) that must not exceed
    `tolerance`; Python floats (log-probabilities, lens probabilities) are held to `tolerance`
    relative to max(1, |expected|)."""

    finite: Callable[[Any], bool]
    diff: Callable[[Any, Any], float]
    tolerance: float = 0.0


def _pure_diff(a: Any, b: Any) -> float:
    if shape_of(a) != shape_of(b):
        return math.inf
    return max_abs_diff(a, b)


PURE_PYTHON = Numerics(finite=lambda t: all(math.isfinite(x) for x in flatten(t)), diff=_pure_diff)


def alone(request: Request, outcome: Outcome, numerics: Numerics) -> str | None:
    """What is wrong with this outcome whatever else ran: a non-library exception, a harness
    failure, or a non-finite value in the result."""
    if outcome.status == "harness":
        return f"HARNESS BUG, not a backend bug: building the input failed ({outcome.describe()})"
    if outcome.status == "crashed":
        return f"raised a non-library exception ({outcome.describe()}); expected an InterpError"
    if outcome.status == "ok":
        bad = _non_finite(outcome.value, numerics, "")
        if bad:
            return f"returned non-finite values at {bad}"
    return None


def _non_finite(value: Any, numerics: Numerics, where: str) -> str | None:
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where or 'value'} ({value})"
    if isinstance(value, dict):
        for key, item in value.items():
            found = _non_finite(item, numerics, f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if isinstance(value, tuple | list):
        for index, item in enumerate(value):
            found = _non_finite(item, numerics, f"{where}[{index}]")
            if found:
                return found
        return None
    return None if numerics.finite(value) else where or "a tensor"


def against_solo(request: Request, mixed: Outcome, solo: Outcome, numerics: Numerics) -> str | None:
    """How the request's outcome inside a mix differs from its outcome alone (None: it does not,
    or the request is not deterministic enough to compare)."""
    if not request.comparable or "crashed" in (mixed.status, solo.status):
        return None  # crashes are reported by `alone`
    if mixed.status == "cancelled" or solo.status == "cancelled":
        return None
    if solo.status == "ok" and mixed.status != "ok":
        return f"succeeds alone but inside the mix {mixed.describe()}"
    if solo.status != "ok" and mixed.status == "ok":
        return f"is refused alone ({solo.describe()}) but succeeded inside the mix"
    if solo.status == "refused":
        if type(mixed.error) is not type(solo.error):
            return f"alone {solo.describe()}; inside the mix {mixed.describe()}"
        return None
    return _differ(mixed.value, solo.value, numerics, "")


def judge(
    mix: Sequence[Request],
    outcomes: Sequence[Outcome],
    solos: Sequence[Outcome],
    numerics: Numerics,
    *,
    label: str = "request",
) -> list[str]:
    """Every problem of a mix (checks 1 and 2), one line-pair per offending request."""
    found = []
    for index, (request, outcome, solo) in enumerate(zip(mix, outcomes, solos, strict=True)):
        problem = alone(request, outcome, numerics) or against_solo(
            request, outcome, solo, numerics
        )
        if problem:
            found.append(f"{label} {index}: {request!r}\n      {problem}")
    return found


def report(
    mix: Sequence[Request],
    outcomes: Sequence[Outcome],
    problems: Sequence[str],
    how: str,
    seed: int,
) -> str:
    """The failure message: the problems, then the whole mix with what each request did."""
    lines = [f"{len(problems)} problem(s) after a mix of {len(mix)} requests run {how}:"]
    lines += [f"  {p}" for p in problems]
    lines.append("the mix (outcome <- request):")
    for index, (request, outcome) in enumerate(zip(mix, outcomes, strict=True)):
        lines.append(f"  {index}: {outcome.describe()} <- {request!r}")
    lines.append(seed_note(seed))
    return "\n".join(lines)


class SoloHarness:
    """A suite's model under test, as the harness sees it: the plain requests' baseline, each
    distinct request's solo outcome (run once, cached) and what a plain request finds changed.

    A backend's suite subclasses it, saying how one request runs alone (`alone`), and calls
    `__init__` with its plain requests once its model is loaded (the baseline runs then).
    """

    def __init__(self, plain: Sequence[Request], numerics: Numerics) -> None:
        self.plain = list(plain)
        self.numerics = numerics
        self.solos: dict[Request, Outcome] = {}
        self.baseline = [self.alone(r) for r in self.plain]
        for request, outcome in zip(self.plain, self.baseline, strict=True):
            assert outcome.status == "ok", (request, outcome.describe())

    def alone(self, request: Request) -> Outcome:
        """`request` run by itself on the model under test."""
        raise NotImplementedError

    def solo(self, request: Request) -> Outcome:
        if request not in self.solos:
            self.solos[request] = self.alone(request)
        return self.solos[request]

    def residue(self) -> list[str]:
        """What the model kept from earlier calls (check 3): the plain requests against the
        baseline."""
        problems = judge(
            self.plain,
            [self.alone(r) for r in self.plain],
            self.baseline,
            self.numerics,
            label="plain request after the mix",
        )
        return [f"  {p}" for p in problems]

    def solo_runs(self, mix: Sequence[Request], seed: int) -> list[Outcome]:
        """Each request of `mix` run alone, before the mix (so untouched by it), in mix order.

        A request first seen here can break the model by itself: those are judged alone first,
        and on a problem their cached solos are dropped (they ran on a model that may have
        changed under them) and the failure names them as run alone, one after another.
        """
        fresh = [r for r in dict.fromkeys(mix) if r not in self.solos]
        solos = [self.solo(r) for r in mix]
        if fresh:
            first = [self.solos[r] for r in fresh]
            problems = judge(fresh, first, first, self.numerics) + self.residue()
            if problems:
                for request in fresh:
                    del self.solos[request]
                how = "alone, one after another"
                raise AssertionError(report(fresh, first, problems, how, seed))
        return solos


def _differ(got: Any, want: Any, numerics: Numerics, where: str) -> str | None:
    at = where or "the result"
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{at}: keys {sorted(got) if isinstance(got, dict) else got!r} vs {sorted(want)}"
        for key in want:
            if key == "lens":
                found = _lens_differ(got[key], want[key], numerics.tolerance)
            else:
                found = _differ(got[key], want[key], numerics, f"{where}.{key}" if where else key)
            if found:
                return found
        return None
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"{at}: {_short(got)} vs alone {_short(want)}"
        if all(isinstance(x, int) for x in want):
            return None if got == want else f"{at}: {_short(got)} vs alone {_short(want)}"
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            found = _differ(g, w, numerics, f"{where}[{index}]")
            if found:
                return found
        return None
    if want is None or isinstance(want, int | str):
        return None if got == want else f"{at}: {got!r} vs alone {want!r}"
    if isinstance(want, float):
        if isinstance(got, float) and abs(got - want) <= numerics.tolerance * max(1.0, abs(want)):
            return None
        return f"{at}: {got!r} vs alone {want!r}"
    distance = numerics.diff(got, want)
    if distance <= numerics.tolerance:
        return None
    return f"{at}: differs from its solo run by {distance:.3g} (tolerance {numerics.tolerance})"


def _lens_differ(got: Any, want: Any, tolerance: float) -> str | None:
    """Lens top-k lists agree when their probabilities agree within `tolerance`; two tokens
    whose probabilities are within tolerance of each other may trade places (at the edge of
    the top-k too), so membership is only demanded where the ranking is clear."""
    if [layer for layer, _ in got] != [layer for layer, _ in want]:
        return f"lens layers {[g for g, _ in got]} vs alone {[w for w, _ in want]}"
    for (layer, rows_got), (_, rows_want) in zip(got, want, strict=True):
        if len(rows_got) != len(rows_want):
            return f"lens layer {layer}: {len(rows_got)} positions vs alone {len(rows_want)}"
        for position, (row_g, row_w) in enumerate(zip(rows_got, rows_want, strict=True)):
            probs_g = sorted((p for _, p in row_g), reverse=True)
            probs_w = sorted((p for _, p in row_w), reverse=True)
            where = f"lens layer {layer} position {position}"
            if len(probs_g) != len(probs_w) or any(
                abs(a - b) > tolerance for a, b in zip(probs_g, probs_w, strict=True)
            ):
                return f"{where}: probabilities {probs_g} vs alone {probs_w}"
            mine, theirs = dict(row_g), dict(row_w)
            edge = min(probs_w) if probs_w else 0.0
            for token, prob in mine.items():
                if token in theirs:
                    if abs(prob - theirs[token]) > tolerance:
                        return f"{where}: token {token} p={prob} vs alone {theirs[token]}"
                elif prob > edge + tolerance:
                    return f"{where}: token {token} (p={prob}) is not in the solo top-k"
    return None
