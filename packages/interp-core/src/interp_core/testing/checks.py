"""What must every backend's model do, checked on a live (tiny) model?

Each `check_*` function takes a model and raises `AssertionError` naming every problem it found,
or `unittest.SkipTest` when the check cannot apply (e.g. a model serving no writable point);
pytest reports both properly, and they can be called directly from any test runner. They drive
the model through the sync free functions, so loop-bound models (vLLM) work unchanged.

Tolerances: `atol`/`rtol` default to exact equality for the identities (capture leaves logits
unchanged, a zero steer changes nothing, two captures agree); a backend with nondeterministic
kernels loosens them explicitly. The steering-arithmetic check compares the backend's float32 (or
lower) arithmetic with the float64 reference, so it always needs a tolerance.
"""

from __future__ import annotations

import inspect
import math
import unittest
from collections.abc import Callable, Iterable
from typing import Any

from interp_core import sync
from interp_core.address import Address
from interp_core.cache import ActivationCache
from interp_core.errors import InterpError, PointUnsupported
from interp_core.facts import ModelFacts
from interp_core.points import PointSpec, Scope, absence_reason, get_point, point_names, points_for
from interp_core.protocol import InterpModel
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult, Support
from interp_core.sampling import check_lens_top_k, check_sampling
from interp_core.shapes import point_shape, point_width
from interp_core.steering import SteeringSpec, apply_reference_rows, check_vector_values, steer
from interp_core.testing.compare import assert_close, shape_of, to_nested

__all__ = [
    "ASYNC_METHODS",
    "BAD_SAMPLING",
    "CHECKS",
    "DEFAULT_PROMPT",
    "SYNC_METHODS",
    "check_argument_refusals",
    "check_capture_is_deterministic",
    "check_capture_leaves_logits_unchanged",
    "check_captures_refused",
    "check_generation",
    "check_logit_lens",
    "check_protocol_surface",
    "check_refusals",
    "check_shapes",
    "check_steer_context_matches_explicit",
    "check_steering_matches_reference",
    "check_zero_steering_is_identity",
    "run_checks",
    "sample_layers",
    "served_addresses",
]

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog"
ASYNC_METHODS = ("capture", "capture_generation", "generate", "logit_lens", "warmup", "shutdown")
SYNC_METHODS = ("to_tokens", "to_str_tokens", "to_string", "points", "supports")
PROPERTIES = ("model_id", "backend_name", "facts", "n_layers", "d_model", "tokenizer")


class _Problems:
    """Collects every failure of a check so one run reports them all."""

    def __init__(self, check: str, model: Any, *, atol: float = 0.0, rtol: float = 0.0) -> None:
        self.check = check
        self.model = model
        self.atol, self.rtol = atol, rtol  # the check's tolerance, for `close`
        self.items: list[str] = []

    def add(self, text: str) -> None:
        self.items.append(text)

    def close(self, got: Any, want: Any, what: str) -> None:
        """`assert_close` at the check's tolerance, its failure recorded rather than raised."""
        try:
            assert_close(got, want, atol=self.atol, rtol=self.rtol, what=what)
        except AssertionError as exc:
            self.add(str(exc))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        backend = getattr(self.model, "backend_name", "?")
        who = f"{backend} model {getattr(self.model, 'model_id', '?')}"
        lines = "\n  - ".join(self.items)
        message = f"{self.check} failed on the {who}:\n  - {lines}"
        raise AssertionError(message)


# --- choosing what to probe ---------------------------------------------------------------------
def sample_layers(n_layers: int) -> tuple[int, ...]:
    """First, middle and last layer (fewer when the model is shallower)."""
    return tuple(sorted({0, n_layers // 2, n_layers - 1}))


def _addresses(
    spec: PointSpec, facts: ModelFacts, layers: Iterable[int], *, bare: bool
) -> list[Address]:
    if spec.scope is Scope.TRUNK:
        return [Address(spec.name)]
    streams: list[int | None] = [None]
    if spec.accepts_stream and facts.n_streams > 1:
        # The bare form is absent on a multi-stream trunk; probe it only when checking refusals.
        streams = ([None] if bare else []) + sorted({0, facts.n_streams - 1})
    return [Address(spec.name, layer, stream) for layer in layers for stream in streams]


def served_addresses(model: InterpModel, layers: Iterable[int] | None = None) -> list[Address]:
    """Every address of `model.points()` at the sampled layers that `model.supports`."""
    chosen = tuple(layers) if layers is not None else sample_layers(model.n_layers)
    found: list[Address] = []
    for spec in model.points():
        for address in _addresses(spec, model.facts, chosen, bare=False):
            if model.supports(address):
                found.append(address)
    return found


def _tokens(model: InterpModel, prompt: str) -> tuple[Any, int, int]:
    tokens = model.to_tokens(prompt)
    shape = shape_of(tokens)
    if len(shape) != 2:
        message = f"to_tokens({prompt!r}) must return [batch, seq] ids, got shape {shape}"
        raise AssertionError(message)
    return tokens, shape[0], shape[1]


def _readout(model: InterpModel) -> Address:
    """The point standing for "the logits": lm_head, else the last thing before it."""
    last = model.n_layers - 1
    stream = 0 if model.facts.n_streams > 1 else None
    for candidate in (
        Address("lm_head"),
        Address("final_norm"),
        Address("resid_post", last, stream),
    ):
        if model.supports(candidate):
            return candidate
    message = "the model serves none of lm_head, final_norm, resid_post at the last layer"
    raise unittest.SkipTest(message)


def _steer_target(model: InterpModel) -> Address:
    """A writable, served vector point at the middle layer (resid_post when possible)."""
    middle = model.n_layers // 2
    stream = 0 if model.facts.n_streams > 1 else None
    preferred = Address("resid_post", middle, stream)
    if model.supports(preferred):
        return preferred
    for address in served_addresses(model, [middle]):
        spec = get_point(address.name)
        if spec.writable and address.layer is not None and spec.width.token_major:
            if len(spec.width.per_token_dims(model.facts, layer=address.layer)) == 1:
                return address
    message = f"the model serves no writable vector point at layer {middle}"
    raise unittest.SkipTest(message)


def _steer_points(model: InterpModel) -> tuple[Address, list[Address]]:
    """The steer target and what to compare under a steer: it and the read-out (once if equal)."""
    target, readout = _steer_target(model), _readout(model)
    return target, [target] if readout == target else [target, readout]


def _direction(width: int) -> list[float]:
    # Deterministic, non-degenerate and of mixed sign, so every op visibly changes activations.
    return [math.sin(1.7 * i + 0.3) + 0.25 for i in range(width)]


# --- the checks ---------------------------------------------------------------------------------
def check_protocol_surface(model: Any, *, prompt: str = DEFAULT_PROMPT) -> None:
    """The model satisfies `InterpModel`, with async work methods and consistent facts."""
    problems = _Problems("check_protocol_surface", model)
    missing = [
        m
        for m in (*PROPERTIES, *ASYNC_METHODS, *SYNC_METHODS, "generate_stream")
        if not hasattr(model, m)
    ]
    if missing:
        problems.add(f"missing protocol members: {', '.join(missing)}")
        problems.raise_if_any()
    if not isinstance(model, InterpModel):
        problems.add("isinstance(model, interp_core.protocol.InterpModel) is False")
    for name in ASYNC_METHODS:
        if not inspect.iscoroutinefunction(getattr(model, name)):
            problems.add(f"{name} must be an async method (async def)")
    for name in (*SYNC_METHODS, "generate_stream"):
        if inspect.iscoroutinefunction(getattr(model, name)):
            problems.add(f"{name} must not be a coroutine function")
    facts = model.facts
    if not isinstance(facts, ModelFacts):
        problems.add(f"facts is a {type(facts).__name__}, not interp_core.facts.ModelFacts")
        problems.raise_if_any()
    if model.n_layers != facts.n_layers:
        problems.add(f"n_layers is {model.n_layers} but facts.n_layers is {facts.n_layers}")
    if model.d_model != facts.d_model:
        problems.add(f"d_model is {model.d_model} but facts.d_model is {facts.d_model}")
    for name in ("model_id", "backend_name"):
        value = getattr(model, name)
        if not isinstance(value, str) or not value:
            problems.add(f"{name} must be a non-empty str, got {value!r}")
    served = model.points()
    if not isinstance(served, tuple) or not all(isinstance(s, PointSpec) for s in served):
        problems.add("points() must return a tuple of interp_core.points.PointSpec")
    else:
        possible = {spec.name for spec in points_for(facts)}
        impossible = [spec.name for spec in served if spec.name not in possible]
        if impossible:
            problems.add(
                f"points() lists {', '.join(impossible)}, which the registry says this "
                f"{facts.architecture} does not have"
            )
    for form in ("resid_post.0", ("resid_post", 0), Address("resid_post", 0)):
        verdict = model.supports(form)
        if not isinstance(verdict, Support):
            problems.add(f"supports({form!r}) returned {type(verdict).__name__}, not Support")
    _, _, seq = _tokens(model, prompt)
    pieces = model.to_str_tokens(prompt)
    if len(pieces) != seq:
        problems.add(f"to_str_tokens gives {len(pieces)} tokens but to_tokens gives {seq}")
    problems.raise_if_any()


def check_shapes(model: Any, *, prompt: str = DEFAULT_PROMPT) -> None:
    """Every served point, at first/middle/last layer, has the registry's shape."""
    problems = _Problems("check_shapes", model)
    tokens, batch, seq = _tokens(model, prompt)
    addresses = served_addresses(model)
    if not addresses:
        problems.add("the model serves no point at all")
        problems.raise_if_any()
    cache = sync.capture(model, tokens, addresses)
    if not isinstance(cache, ActivationCache):
        problems.add(f"capture returned a {type(cache).__name__}, not an ActivationCache")
        problems.raise_if_any()
    for address in addresses:
        if address not in cache:
            problems.add(f"{address} was asked for but is missing from the cache")
            continue
        expected = point_shape(address, model.facts, batch, seq)
        got = shape_of(cache[address])
        if got != expected:
            problems.add(f"{address} has shape {got}; the registry says {expected}")
    problems.raise_if_any()


def check_refusals(model: Any, *, prompt: str = DEFAULT_PROMPT) -> None:
    """Points the model lacks are refused, by `supports` and by `capture`, with a reason."""
    problems = _Problems("check_refusals", model)
    facts = model.facts
    tokens, _batch, _seq = _tokens(model, prompt)
    probes: list[Address] = []
    for name in point_names():
        probes.extend(_addresses(get_point(name), facts, sample_layers(facts.n_layers), bare=True))
    refused = 0
    for address in probes:
        verdict = model.supports(address)
        reason = absence_reason(address.name, facts, address.layer, address.stream)
        if reason and verdict:
            problems.add(f"supports({address}) says yes, but the model has no such point: {reason}")
        if verdict:
            continue
        refused += 1
        if not verdict.reason:
            problems.add(f"supports({address}) refuses without a reason")
        _expect_refusal(model, tokens, address, problems)
    beyond = Address("resid_post", facts.n_layers)
    if model.supports(beyond):
        problems.add(f"supports({beyond}) says yes on a model with {facts.n_layers} layers")
    _expect_refusal(model, tokens, beyond, problems)
    problems.raise_if_any()


def _expect_refusal(model: Any, tokens: Any, address: Address, problems: _Problems) -> None:
    try:
        sync.capture(model, tokens, [address])
    except PointUnsupported as exc:
        text = str(exc).strip()
        if address.name not in text:
            problems.add(f"the refusal of {address} does not name the point: {text!r}")
        elif len(text) <= len(str(address)) + 20:
            problems.add(f"the refusal of {address} gives no reason: {text!r}")
    except Exception as exc:  # the wrong exception type is itself the finding
        problems.add(
            f"capture of {address} raised {type(exc).__name__} ({exc}), not PointUnsupported"
        )
    else:
        problems.add(f"capture of {address} returned a tensor, but the model refuses the point")


def check_capture_leaves_logits_unchanged(
    model: Any, *, prompt: str = DEFAULT_PROMPT, atol: float = 0.0, rtol: float = 0.0
) -> None:
    """Capturing other points alongside does not change the logits (or the last read-out)."""
    problems = _Problems("check_capture_leaves_logits_unchanged", model, atol=atol, rtol=rtol)
    tokens, _batch, _seq = _tokens(model, prompt)
    readout = _readout(model)
    others = [a for a in served_addresses(model) if a != readout]
    alone = sync.capture(model, tokens, [readout])[readout]
    together = sync.capture(model, tokens, [*others, readout])[readout]
    problems.close(together, alone, f"{readout} captured with {len(others)} other points")
    problems.raise_if_any()


def check_zero_steering_is_identity(
    model: Any, *, prompt: str = DEFAULT_PROMPT, atol: float = 0.0, rtol: float = 0.0
) -> None:
    """Adding a zero vector changes neither the steered point nor the logits."""
    problems = _Problems("check_zero_steering_is_identity", model, atol=atol, rtol=rtol)
    tokens, _batch, _seq = _tokens(model, prompt)
    target, points = _steer_points(model)
    zero = SteeringSpec(target, [0.0] * point_width(target, model.facts))
    plain = sync.capture(model, tokens, points)
    steered = sync.capture(model, tokens, points, steering=zero)
    for address in points:
        problems.close(steered[address], plain[address], f"{address} under a zero add at {target}")
    problems.raise_if_any()


def _reference_specs(target: Address, width: int) -> list[SteeringSpec]:
    direction = _direction(width)
    return [
        SteeringSpec(target, direction, op="add", scale=0.5),
        SteeringSpec(target, direction, op="add", scale=-2.0, positions=(0,)),
        SteeringSpec(target, direction, op="orthogonal", scale=0.0),
        SteeringSpec(target, direction, op="orthogonal", scale=3.0),
        SteeringSpec(target, direction, op="projection_cap", min=-0.05, max=0.05),
        # The lens-space ops: a bound that bites and one that does not, ablation, a swap.
        SteeringSpec(target, direction, op="norm_add", scale=0.5, max_fraction=0.2),
        SteeringSpec(target, direction, op="norm_add", scale=-0.1),
        SteeringSpec(target, direction, op="ablate"),
        SteeringSpec(target, direction, op="swap", target=list(reversed(direction))),
        SteeringSpec(target, direction, op="add", scale=0.5, normalize=True),
    ]


def check_steering_matches_reference(
    model: Any, *, prompt: str = DEFAULT_PROMPT, atol: float = 1e-4, rtol: float = 1e-4
) -> None:
    """The steered capture at the steered point equals `apply_reference` of the plain one.

    Captures at a steered point are post-intervention, so for each op (and a positions-limited
    add) the backend's result must match the pure-Python arithmetic contract row by row.
    """
    problems = _Problems("check_steering_matches_reference", model, atol=atol, rtol=rtol)
    tokens, _batch, _seq = _tokens(model, prompt)
    target = _steer_target(model)
    width = point_width(target, model.facts)
    plain = to_nested(sync.capture(model, tokens, [target])[target])
    for spec in _reference_specs(target, width):
        steered = sync.capture(model, tokens, [target], steering=spec)[target]
        expected = [apply_reference_rows(spec, rows) for rows in plain]
        problems.close(steered, expected, f"{target} steered by {spec!r}")
    problems.raise_if_any()


def check_steer_context_matches_explicit(
    model: Any, *, prompt: str = DEFAULT_PROMPT, atol: float = 0.0, rtol: float = 0.0
) -> None:
    """`with steer(model, spec)` steers exactly like `steering=spec`, and only inside the block."""
    problems = _Problems("check_steer_context_matches_explicit", model, atol=atol, rtol=rtol)
    tokens, _batch, _seq = _tokens(model, prompt)
    target, points = _steer_points(model)
    spec = SteeringSpec(target, _direction(point_width(target, model.facts)), scale=0.5)
    explicit = sync.capture(model, tokens, points, steering=spec)
    with steer(model, spec):
        inside = sync.capture(model, tokens, points)
    after = sync.capture(model, tokens, points)
    plain_target = sync.capture(model, tokens, [target])[target]
    for address in points:
        problems.close(inside[address], explicit[address], f"{address} inside steer() vs steering=")
    problems.close(after[target], plain_target, f"{target} after the steer() block ended")
    try:
        assert_close(explicit[target], plain_target, what="")
    except AssertionError:
        pass
    else:
        problems.add(f"steering={spec!r} left {target} unchanged: the model ignored it")
    problems.raise_if_any()


def check_capture_is_deterministic(
    model: Any, *, prompt: str = DEFAULT_PROMPT, atol: float = 0.0, rtol: float = 0.0
) -> None:
    """Two identical captures return identical tensors."""
    problems = _Problems("check_capture_is_deterministic", model, atol=atol, rtol=rtol)
    tokens, _batch, _seq = _tokens(model, prompt)
    points = served_addresses(model)
    first = sync.capture(model, tokens, points)
    second = sync.capture(model, tokens, points)
    for address in points:
        problems.close(second[address], first[address], f"{address} on a repeated capture")
    problems.raise_if_any()


def check_generation(
    model: Any, *, prompt: str = DEFAULT_PROMPT, max_new_tokens: int = 3, capture: bool = True
) -> None:
    """Greedy generate, generate_stream and capture_generation agree, with the right shapes.

    `capture=False` (a generate-only backend) leaves capture_generation out.
    """
    problems = _Problems("check_generation", model)
    tokens, batch, seq = _tokens(model, prompt)
    generation = sync.generate(model, tokens, max_new_tokens=max_new_tokens, temperature=0.0)
    if not isinstance(generation, Generation):
        problems.add(f"generate returned a {type(generation).__name__}, not a Generation")
        problems.raise_if_any()
    used = generation.sampling
    # Every result reports the settings it ran with, and who decided each (the caller here).
    if (
        getattr(used, "temperature", None) != 0.0
        or getattr(used, "sources", {}).get("temperature") != "caller"
    ):
        problems.add(
            f"generate(temperature=0.0).sampling is {used!r}; it must report the settings used "
            f"(interp_core.sampling.Sampling, from ModelBase.resolve_sampling) with "
            f"sources['temperature'] == 'caller'"
        )
    produced = len(generation.token_ids)
    if not 1 <= produced <= max_new_tokens:
        problems.add(f"generate(max_new_tokens={max_new_tokens}) produced {produced} tokens")
    steps = list(
        sync.generate_stream(model, tokens, max_new_tokens=max_new_tokens, temperature=0.0)
    )
    if not all(isinstance(step, GenerationStep) for step in steps):
        problems.add("generate_stream must yield GenerationStep objects")
    else:
        streamed = tuple(step.token_id for step in steps)
        if streamed != generation.token_ids:
            problems.add(
                f"generate_stream gave tokens {streamed}, generate gave {generation.token_ids}"
            )
        text = "".join(step.text for step in steps)
        if text != generation.text:
            problems.add(
                f"generate_stream texts join to {text!r}, generate gave {generation.text!r}"
            )
    if not capture:
        problems.raise_if_any()
        return
    stream = 0 if model.facts.n_streams > 1 else None
    middle = Address("resid_post", model.n_layers // 2, stream)
    target = middle if model.supports(middle) else _readout(model)
    captured_gen, cache = sync.capture_generation(
        model, tokens, [target], max_new_tokens=max_new_tokens
    )
    if captured_gen.token_ids != generation.token_ids:
        problems.add(
            f"capture_generation generated {captured_gen.token_ids}, greedy generate "
            f"{generation.token_ids}"
        )
    positions = seq + len(captured_gen.token_ids) - 1
    expected = point_shape(target, model.facts, batch, positions)
    got = shape_of(cache[target])
    if got != expected:
        problems.add(
            f"capture_generation's {target} has shape {got}; expected {expected} "
            f"(prompt {seq} + generated {len(captured_gen.token_ids)} - 1 positions)"
        )
    problems.raise_if_any()


def check_logit_lens(model: Any, *, prompt: str = DEFAULT_PROMPT, top_k: int = 3) -> None:
    """The lens reads every requested layer and position; its last layer agrees with lm_head."""
    problems = _Problems("check_logit_lens", model)
    tokens, _batch, seq = _tokens(model, prompt)
    layers = tuple(sorted({0, model.n_layers - 1}))
    lens = sync.logit_lens(model, tokens, list(layers), top_k=top_k)
    if not isinstance(lens, LensResult):
        problems.add(f"logit_lens returned a {type(lens).__name__}, not a LensResult")
        problems.raise_if_any()
    if tuple(lens.layers) != layers:
        problems.add(f"logit_lens(layers={list(layers)}) read layers {list(lens.layers)}")
        problems.raise_if_any()
    for layer in layers:
        rows = lens.predictions[layer]
        if len(rows) != seq:
            problems.add(f"layer {layer}: {len(rows)} positions, the prompt has {seq}")
            continue
        for position, row in enumerate(rows):
            if len(row) != top_k or not all(isinstance(p, LensPrediction) for p in row):
                problems.add(f"layer {layer} position {position}: expected {top_k} LensPrediction")
                break
            probs = [p.prob for p in row]
            if any(not 0.0 <= p <= 1.0 + 1e-6 for p in probs) or probs != sorted(
                probs, reverse=True
            ):
                problems.add(
                    f"layer {layer} position {position}: probs {probs} not in [0,1] descending"
                )
                break
    head = Address("lm_head")
    if model.supports(head) and model.facts.n_streams == 1:
        logits = to_nested(sync.capture(model, tokens, [head])[head])[0]
        last = lens.predictions[model.n_layers - 1]
        for position, (row_logits, row) in enumerate(zip(logits, last, strict=False)):
            best = max(row_logits)
            if row and row_logits[row[0].token_id] < best:
                problems.add(
                    f"position {position}: the lens's top token at the last layer is "
                    f"{row[0].token_id}, but lm_head's argmax scores higher"
                )
                break
    problems.raise_if_any()


# --- refusals every backend words alike -----------------------------------------------------------
# Sampling arguments each backend must refuse with the core's InvalidArgument, word for word.
BAD_SAMPLING: tuple[dict[str, Any], ...] = (
    {"max_new_tokens": 0},
    {"max_new_tokens": True},
    {"temperature": -1.0},
    {"temperature": math.nan},
    {"top_k": 0},
    {"top_p": 1.5},
    {"seed": -1},
)


class _OpaqueVector:
    """A 1-D array the core cannot read when a spec is built, as a backend tensor is: a `.shape`
    and `.tolist()`, nothing else. Its values are checked only when a backend uses them."""

    def __init__(self, values: list[float]) -> None:
        self._values = list(values)
        self.shape = (len(values),)

    def tolist(self) -> list[float]:
        return list(self._values)


def _core_refusal(call: Callable[[], Any]) -> InterpError:
    """The error the core's own check raises for an input (the words every backend must use)."""
    try:
        call()
    except InterpError as exc:
        return exc
    message = "the core accepted an input the conformance kit expects it to refuse"
    raise AssertionError(message)


def _expect_same_refusal(
    problems: _Problems, what: str, call: Callable[[], Any], expected: InterpError
) -> None:
    kind = type(expected).__name__
    try:
        call()
    except type(expected) as exc:
        if str(exc) != str(expected):
            problems.add(
                f"{what} refused with {str(exc)!r}; the core's words are {str(expected)!r}"
            )
    except Exception as exc:  # the wrong exception type is itself the finding
        problems.add(f"{what} raised {type(exc).__name__} ({exc}), not {kind}: {expected}")
    else:
        problems.add(f"{what} was accepted; every backend refuses it with {kind}: {expected}")


def check_argument_refusals(
    model: Any, *, prompt: str = DEFAULT_PROMPT, captures: bool = True
) -> None:
    """Bad arguments get the core's error class and message, word for word, on every backend.

    Sampling arguments (`interp_core.sampling`) on generate and generate_stream; with
    `captures`, also the logit lens's top_k and steering vectors (`interp_core.steering`): one
    of the wrong width, and arrays the core cannot read when the spec is built, holding a NaN
    or, for an op that needs a direction, only zeros.
    """
    problems = _Problems("check_argument_refusals", model)
    tokens, _batch, _seq = _tokens(model, prompt)
    for bad in BAD_SAMPLING:
        args: dict[str, Any] = {"max_new_tokens": 1, "temperature": 0.0, **bad}
        expected = _core_refusal(lambda args=args: check_sampling(**args))
        shown = ", ".join(f"{k}={v!r}" for k, v in bad.items())
        _expect_same_refusal(
            problems,
            f"generate({shown})",
            lambda args=args: sync.generate(model, tokens, **args),
            expected,
        )
        _expect_same_refusal(
            problems,
            f"generate_stream({shown})",
            lambda args=args: list(sync.generate_stream(model, tokens, **args)),
            expected,
        )
    if not captures:
        problems.raise_if_any()
        return
    _expect_same_refusal(
        problems,
        "logit_lens(top_k=0)",
        lambda: sync.logit_lens(model, tokens, top_k=0),
        _core_refusal(lambda: check_lens_top_k(0)),
    )
    target = _steer_target(model)
    width = point_width(target, model.facts)
    direction = _direction(width)
    wide = SteeringSpec(target, [*direction, 1.0])
    nan = SteeringSpec(target, _OpaqueVector([*direction[:-1], math.nan]))
    zero = SteeringSpec(target, _OpaqueVector([0.0] * width), op="orthogonal")
    cases = (
        (
            f"a vector of {width + 1} values at {target}",
            wide,
            lambda: wide.validate_for(model.facts),
        ),
        (f"a NaN in an array vector at {target}", nan, lambda: check_vector_values(nan)),
        (
            f"an all-zero array vector for orthogonal at {target}",
            zero,
            lambda: check_vector_values(zero),
        ),
    )
    for what, spec, core_check in cases:
        _expect_same_refusal(
            problems,
            f"capture with {what}",
            lambda spec=spec: sync.capture(model, tokens, [target], steering=spec),
            _core_refusal(core_check),
        )
    problems.raise_if_any()


CHECKS: dict[str, Callable[..., None]] = {
    "protocol_surface": check_protocol_surface,
    "shapes": check_shapes,
    "refusals": check_refusals,
    "capture_leaves_logits_unchanged": check_capture_leaves_logits_unchanged,
    "zero_steering_is_identity": check_zero_steering_is_identity,
    "steering_matches_reference": check_steering_matches_reference,
    "steer_context_matches_explicit": check_steer_context_matches_explicit,
    "capture_is_deterministic": check_capture_is_deterministic,
    "generation": check_generation,
    "logit_lens": check_logit_lens,
    "argument_refusals": check_argument_refusals,
}


def run_checks(model: Any, **options: Any) -> dict[str, str | None]:
    """Run every check outside pytest: name → None (passed), "skipped: ..." or the failure text.

    `options` (prompt, atol, rtol) go to each check that accepts them.
    """
    results: dict[str, str | None] = {}
    for name, check in CHECKS.items():
        accepted = inspect.signature(check).parameters
        kwargs = {k: v for k, v in options.items() if k in accepted}
        try:
            check(model, **kwargs)
        except unittest.SkipTest as exc:
            results[name] = f"skipped: {exc}"
        except AssertionError as exc:
            results[name] = str(exc)
        else:
            results[name] = None
    return results


def check_captures_refused(model: Any, *, prompt: str = DEFAULT_PROMPT) -> None:
    """A generate-only backend refuses every read and write up front, naming an alternative."""
    from interp_core.errors import InterpError
    from interp_core.steering import SteeringSpec

    problems = _Problems("check_captures_refused", model)
    tokens, _batch, _seq = _tokens(model, prompt)
    point = Address("resid_post", 0)
    verdict = model.supports(point)
    if verdict or not verdict.reason:
        problems.add(f"supports({point}) must refuse with a reason, got {verdict!r}")
    vector = _direction(model.d_model)
    attempts = {
        "capture": lambda: sync.capture(model, tokens, [point]),
        "capture_generation": lambda: sync.capture_generation(model, tokens, [point]),
        "logit_lens": lambda: sync.logit_lens(model, tokens),
        "generate(steering=...)": lambda: sync.generate(
            model, tokens, max_new_tokens=1, steering=SteeringSpec(point, vector)
        ),
    }
    for name, attempt in attempts.items():
        try:
            attempt()
        except InterpError as error:
            if "backend=" not in str(error):
                problems.add(f"{name} refused without naming a backend that serves it: {error}")
        else:
            problems.add(f"{name} succeeded on a backend that captures nothing")
    problems.raise_if_any()
