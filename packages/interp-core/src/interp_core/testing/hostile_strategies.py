"""What does the hostile-input harness throw at a backend? Hypothesis strategies of request mixes.

`mixes(menu)` draws tuples of `interp_core.testing.hostile.Request`: at least one valid request
beside others, each valid or hostile. A hostile request is wrong in one or a few fields at a
time: a prompt that is empty, ragged, out of the vocabulary, too long or of the wrong dtype;
capture points that are unknown, at a missing layer, a bare string or None; steering specs at
read-only or missing points, with ops that do not exist, scales like 1e300 and NaN, vectors that
overflow the model dtype, underflow to zero, hold NaN, are nested or of the wrong width, and
positions that are huge (2**63), negative, empty, repeated or not ints; sampling values out of
range or of the wrong type; lens layers and top-k likewise; and two kinds of their own: a stream
abandoned after a step and a task cancelled mid-request. `menu_for(model)` lists what valid
requests may use on a model; `plain_requests(menu)` are the baseline requests; `requests(menu)`
gives the valid and the hostile single-request strategies.

hypothesis is imported inside `mixes()`, `requests()` and `bounded()` only: importing this module
needs nothing outside the standard library, as everything in interp-core.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.testing.hostile import GENERATING, KINDS, Prompt, Request, Spec, Vector

__all__ = ["Menu", "menu_for", "mixes", "plain_requests", "requests"]


@dataclass(frozen=True)
class Menu:
    """What valid requests may use on one model: capture points, steerable points with their
    widths, the layer count, the vocabulary, the longest valid prompt drawn, the context (a
    prompt this long is too long), and whether the suite can build tensors."""

    n_layers: int
    vocab_size: int
    capture_points: tuple[str, ...]
    steer_points: tuple[tuple[str, int], ...]
    max_prompt: int = 16
    context: int = 128
    tensors: bool = True
    kinds: tuple[str, ...] = KINDS


def menu_for(model: Any, *, max_prompt: int = 16, tensors: bool = True, **kw: Any) -> Menu:
    """The menu of a loaded model, from `points()`, `supports()` and its facts."""
    from interp_core.shapes import point_width

    facts = model.facts
    captures: list[str] = []
    steers: list[tuple[str, int]] = []
    for spec in model.points():
        layers: Sequence[int | None] = [None] if spec.is_trunk else range(facts.n_layers)
        for layer in layers:
            address = spec.name if layer is None else f"{spec.name}.{layer}"
            if not model.supports(address):
                continue
            captures.append(address)
            if spec.writable:
                steers.append((address, point_width(spec.name, facts, layer)))
    context = facts.max_position_embeddings or 128
    return Menu(
        n_layers=facts.n_layers,
        vocab_size=facts.vocab_size,
        capture_points=tuple(captures),
        steer_points=tuple(steers),
        max_prompt=max_prompt,
        context=int(kw.pop("context", context)),
        tensors=tensors,
        **kw,
    )


def plain_requests(menu: Menu) -> tuple[Request, ...]:
    """Two plain requests whose results, taken before any mix, are the baseline: a capture at
    the first and last residual points and attention, and a short greedy generation."""
    prompt = Prompt(tuple(range(3, 3 + min(9, menu.max_prompt))))
    last = menu.n_layers - 1
    points = tuple(
        p
        for p in ("resid_post.0", f"resid_post.{last}", "attn_probs.0")
        if p in menu.capture_points
    )
    return (
        Request("capture", prompt, points=points),
        Request("generate", prompt, sampling=(("max_new_tokens", 6), ("temperature", 0.0))),
    )


def mixes(menu: Menu, *, min_size: int = 2, max_size: int = 6) -> Any:
    """A hypothesis strategy of request mixes: tuples of `Request`, at least one of them valid
    and about two thirds of the rest hostile.

    A hostile request is a valid one corrupted along one to three axes (its prompt, its capture
    points, one steering spec's fields or the steering container, its sampling, its lens
    arguments), or a valid stream abandoned or call cancelled: wrong in few ways at a time, so a
    shrunk failure points at the value that caused it.
    """
    from hypothesis import strategies as st

    valid, hostile = requests(menu)

    @st.composite
    def mix(draw: Any) -> tuple[Request, ...]:
        good = draw(valid)
        others = draw(
            st.lists(
                st.one_of(valid, hostile, hostile), min_size=min_size - 1, max_size=max_size - 1
            )
        )
        at = draw(st.integers(0, len(others)))
        return (*others[:at], good, *others[at:])

    return mix()


def bounded(seed_value: int, examples: int) -> Any:
    """The hypothesis settings every backend's harness runs under: `examples` examples from
    `seed_value`, no deadline and no example database (a CI run is bounded and reproducible from
    the seed alone), and no health check that fails a slow engine or a large mix."""
    from hypothesis import HealthCheck, seed, settings

    def apply(test: Any) -> Any:
        limited = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.large_base_example,
            ],
        )
        return seed(seed_value)(limited(test))

    return apply


def requests(menu: Menu) -> tuple[Any, Any]:
    """Two hypothesis strategies of single requests: (valid ones, hostile ones)."""
    from hypothesis import strategies as st

    L, vocab = menu.n_layers, menu.vocab_size
    forms = ("int64", "int32") if menu.tensors else ()

    # prompts
    def valid_ids(max_len: int = menu.max_prompt) -> Any:
        return st.lists(st.integers(0, vocab - 1), min_size=1, max_size=max_len).map(tuple)

    @st.composite
    def valid_prompt(draw: Any, batch: bool) -> Prompt:
        ids = draw(valid_ids())
        if batch and draw(st.booleans()):
            other = draw(st.lists(st.integers(0, vocab - 1), min_size=len(ids), max_size=len(ids)))
            ids = (ids, tuple(other))
        form = draw(st.sampled_from(("list", *forms)))
        return Prompt(ids, form)

    too_long = tuple(3 + i % 50 for i in range(menu.context + 4))
    junk_prompts = [
        Prompt(()),
        Prompt((-1, 5)),
        Prompt((5, vocab)),
        Prompt((5, 2**70)),
        Prompt(((1, 2), (3,))),
        Prompt((1.5, 2.0)),
        Prompt((True, False)),
        Prompt("hello"),
        Prompt(((),)),
        Prompt(too_long),
        Prompt(too_long[: menu.context - 1]),
    ]
    if menu.tensors:
        junk_prompts += [
            Prompt((5, 9, 14), "bool"),
            Prompt((5, 300, 14), "uint8"),
            Prompt((5.0, 9.0), "float32"),
            Prompt((5, 9, 14), "int8"),
        ]
    hostile_prompt = st.sampled_from(junk_prompts)

    # capture points
    valid_points = st.lists(
        st.sampled_from(menu.capture_points), min_size=1, max_size=3, unique=True
    ).map(tuple)
    hostile_points = st.sampled_from(
        [
            ("no_such_point.0",),
            (f"resid_post.{L}",),
            ("resid_post." + "9" * 5000,),
            ("resid_post.-1",),
            ("",),
            "resid_post.0",
            None,
            7,
            ("resid_post.0", None),
            ("path.model",),
            ("path.model.layers.0",),
            ("path.no.such.module",),
            ("resid_post.0", "resid_post.0"),
            ("attn_probs",),
            ("embeddings.0",),
            ("resid_post.0.stream-3",),
            (),
        ]
    )

    # steering
    widths = dict(menu.steer_points)
    steer_names = tuple(widths)

    @st.composite
    def valid_vector(draw: Any, width: int) -> Vector:
        form = draw(st.sampled_from(("list", "float32") if menu.tensors else ("list",)))
        return Vector("random", width, draw(st.integers(0, 2**16)), 1.0, form)

    # Each hostile table has two halves, drawn equally often: extreme values of the right type
    # (overflow, underflow, huge or out-of-range positions) and malformed ones (wrong type, NaN,
    # wrong shape). The extreme half is where isolation breaks; the malformed half must simply be
    # refused.
    def pick(extreme: Sequence[Any], malformed: Sequence[Any]) -> Any:
        return st.one_of(st.sampled_from(extreme), st.sampled_from(malformed))

    extreme_vectors = [
        ("fill", 1e300),
        ("fill", -1e30),
        ("fill", 3.5e38),
        ("random", 1e6),
        ("random", 1e20),
        ("fill", 1e-200),
        ("fill", 1e-45),
        ("random", 1e-30),
        ("zeros", 0.0),
    ]
    malformed_vectors = [
        ("nan", 1.0),
        ("inf", 1.0),
        ("nested", 1.0),
        ("text", 1.0),
        ("empty", 1.0),
        ("random", -1.0),  # the right values at the wrong width (below)
    ]

    @st.composite
    def hostile_vector(draw: Any, width: int) -> Vector:
        kind, magnitude = draw(pick(extreme_vectors, malformed_vectors))
        size = width
        if magnitude == -1.0:
            magnitude, size = 1.0, draw(st.sampled_from((width + 1, width - 1, 1)))
        tensor_forms = ("float64", "float16", "bfloat16", "int64") if menu.tensors else ()
        form = draw(st.sampled_from(("list", *tensor_forms)))
        return Vector(kind, size, draw(st.integers(0, 2**16)), magnitude, form)

    def valid_positions(span: int) -> Any:
        positions = st.lists(st.integers(0, span - 1), min_size=1, max_size=4, unique=True)
        return st.one_of(st.none(), positions.map(lambda p: tuple(sorted(p))))

    hostile_positions = pick(
        [(2**63,), (2**64,), (999,), (2**31,), (0, 2**63 - 1), (10**30,), (menu.context,)],
        [(-1,), (), (1, 1), (1.5,), ("0",), 3, "0"],
    )

    @st.composite
    def valid_spec(draw: Any, span: int) -> Spec:
        point = draw(st.sampled_from(steer_names))
        op = draw(st.sampled_from(("add", "add", "orthogonal", "projection_cap")))
        scale, low, high = 1.0, None, None
        if op == "add":
            scale = draw(st.sampled_from((1.0, 0.0, -1.0, 2.5, 8.0)))
        elif op == "orthogonal":
            scale = draw(st.sampled_from((0.0, 0.5, 2.0, -1.0)))
        else:
            bounds = sorted(
                draw(st.lists(st.sampled_from((-2.0, 0.0, 0.05, 1.0)), min_size=2, max_size=2))
            )
            low, high = draw(st.sampled_from((bounds, (None, bounds[1]), (bounds[0], None))))
        vector = draw(valid_vector(widths[point]))
        return Spec(point, vector, op, scale, draw(valid_positions(span)), low, high)

    hostile_scales = pick(
        [1e300, -1e30, 1e6, 3.4e38, 1e-300, 10**400, 0.0, -1.0],
        [math.nan, math.inf, -math.inf, "2", True, None],
    )
    hostile_ops = st.sampled_from(["ADD", "scale", "", None, 1])
    hostile_bounds = pick(
        [(None, 1e300), (-1e300, 1e300), (0.0, 0.0), (1e30, 1e30)],
        [(None, None), (3.0, -3.0), (math.nan, None)],
    )
    junk_points = [
        "attn_probs.0",
        "lm_head",
        f"resid_post.{L}",
        "no_such_point.0",
        "resid_post.-1",
        "path.model.layers.0",
        "path.no.such.module",
        "",
        3,
        None,
    ]

    # Scale, vector and positions weigh double: their extreme values are what overflows.
    spec_fields = ("scale", "vector", "positions") * 2 + ("point", "op", "bounds")

    @st.composite
    def hostile_spec(draw: Any, span: int) -> Spec:
        """A valid spec with one to three of its fields replaced by hostile values."""
        base = draw(valid_spec(span))
        fields = draw(st.lists(st.sampled_from(spec_fields), min_size=1, max_size=3, unique=True))
        point, vector, op, scale = base.point, base.vector, base.op, base.scale
        positions, low, high = base.positions, base.min, base.max
        if "point" in fields:
            point = draw(st.sampled_from(junk_points))
            width = widths.get(point, vector.width) if isinstance(point, str) else vector.width
            vector = Vector(vector.kind, width, vector.seed, vector.magnitude, vector.form)
        if "vector" in fields:
            vector = draw(hostile_vector(vector.width))
        if "op" in fields:
            op = draw(hostile_ops)
        if "scale" in fields:
            scale = draw(hostile_scales)
        if "positions" in fields:
            positions = draw(hostile_positions)
        if "bounds" in fields:
            low, high = draw(hostile_bounds)
        return Spec(point, vector, op, scale, positions, low, high)

    def valid_steering(span: int) -> Any:
        specs = st.lists(valid_spec(span), min_size=1, max_size=2).map(tuple)
        return st.one_of(st.none(), specs)

    @st.composite
    def hostile_steering(draw: Any, span: int) -> Any:
        form = draw(st.sampled_from(("list", "list", "list", "bare", "junk")))
        if form == "junk":
            return draw(st.sampled_from(["resid_post.0", 3]))
        bad = draw(hostile_spec(span))
        if form == "bare":
            return bad  # one spec passed bare
        specs = [bad]
        if draw(st.booleans()):
            specs.insert(draw(st.integers(0, 1)), draw(valid_spec(span)))
        return tuple(specs)

    # sampling
    @st.composite
    def valid_sampling(draw: Any, kind: str) -> tuple[tuple[str, Any], ...]:
        args: dict[str, Any] = {
            "max_new_tokens": draw(st.integers(1, 5)),
            "temperature": draw(st.sampled_from((0.0, 0.0, 0.7, 1.0))),
            "seed": draw(st.sampled_from((None, 0, 7, 2**63 - 1))),
        }
        if kind != "capture_generation":
            args["top_k"] = draw(st.sampled_from((None, 1, 5, 50)))
            args["top_p"] = draw(st.sampled_from((None, 0.5, 0.9, 1.0)))
        return tuple(args.items())

    hostile_values = {
        "max_new_tokens": [0, -1, True, 2.0, "3", None, 200],
        "temperature": [-1.0, math.nan, math.inf, "0.5", None, True, 1e-300, 1e300, 1e-8],
        "seed": [-1, 2**63, 2**64, 1.5, "7", True],
        "top_k": [0, -1, 10**30, 2.5, True, "5", vocab + 7],
        "top_p": [0.0, -0.1, 1.5, math.nan, 1e-300, "0.5"],
    }

    @st.composite
    def hostile_sampling(draw: Any, kind: str) -> tuple[tuple[str, Any], ...]:
        args = dict(draw(valid_sampling(kind)))
        names = st.sampled_from(sorted(args))
        for name in draw(st.lists(names, min_size=1, max_size=2, unique=True)):
            args[name] = draw(st.sampled_from(hostile_values[name]))
        return tuple(args.items())

    # the logit lens
    @st.composite
    def valid_lens(draw: Any) -> tuple[tuple[str, Any], ...]:
        layers = draw(
            st.one_of(
                st.none(),
                st.lists(st.integers(0, L - 1), min_size=1, max_size=L, unique=True).map(
                    lambda x: tuple(sorted(x))
                ),
            )
        )
        return (("layers", layers), ("top_k", draw(st.integers(1, 5))))

    hostile_lens_values = {
        "layers": [(), (L,), (-1,), (0, 0), "0", (True,), 10**30],
        "top_k": [0, -1, 10**9, 2.5, True],
        "point": ["attn_probs", "nope", "resid_post.0", "embeddings", "final_norm", "mlp_act"],
    }

    @st.composite
    def hostile_lens(draw: Any) -> tuple[tuple[str, Any], ...]:
        args = dict(draw(valid_lens()))
        names = st.sampled_from(sorted(hostile_lens_values))
        for name in draw(st.lists(names, min_size=1, max_size=2, unique=True)):
            args[name] = draw(st.sampled_from(hostile_lens_values[name]))
        return tuple(args.items())

    # requests: a valid one, or a valid one corrupted along one or two axes
    valid_kinds = tuple(k for k in menu.kinds if k not in ("abandon", "cancel"))

    @st.composite
    def valid_request(draw: Any) -> Request:
        kind = draw(st.sampled_from(valid_kinds))
        return _request(draw, kind, kind, set())

    # abandoned streams and cancels weigh double: they are rarer than malformed arguments
    hostile_kinds = menu.kinds + tuple(k for k in ("abandon", "cancel") if k in menu.kinds)

    @st.composite
    def hostile_request(draw: Any) -> Request:
        kind = draw(st.sampled_from(hostile_kinds))
        inner = kind
        if kind == "cancel":
            inner = draw(st.sampled_from(("generate", "stream", "capture")))
        axes = ["steering", "steering", "prompt"]  # steering weighs double: most of the hunt
        if inner in GENERATING:
            axes.append("sampling")
        if inner in ("capture", "capture_generation"):
            axes.append("points")
        if inner == "lens":
            axes.append("lens")
        chosen = set(draw(st.lists(st.sampled_from(axes), min_size=1, max_size=3)))
        if kind in ("abandon", "cancel") and draw(st.booleans()):
            chosen = set()  # abandoning or cancelling a valid request is hostile enough
        return _request(draw, kind, inner, chosen)

    def _request(draw: Any, kind: str, inner: str, axes: set[Any]) -> Request:
        if "prompt" in axes:
            prompt = draw(hostile_prompt)
        else:
            prompt = draw(valid_prompt(batch=inner == "capture"))
        length = _length(prompt.ids)
        sampling: tuple[tuple[str, Any], ...] = ()
        span = length
        if inner in GENERATING:
            make = hostile_sampling if "sampling" in axes else valid_sampling
            sampling = draw(make(inner))
            budget = dict(sampling).get("max_new_tokens")
            # The positions a generation runs: the prompt, then every generated token but the
            # last (never fed back).
            span = length + (budget - 1 if isinstance(budget, int) and 0 < budget < 10 else 0)
        span = max(span, 1)
        steering = draw((hostile_steering if "steering" in axes else valid_steering)(span))
        points: Any = ()
        if inner in ("capture", "capture_generation"):
            points = draw(hostile_points if "points" in axes else valid_points)
        lens: tuple[tuple[str, Any], ...] = ()
        if inner == "lens":
            lens = draw(hostile_lens() if "lens" in axes else valid_lens())
        turns = 1
        if kind in ("abandon", "cancel"):
            turns = draw(st.integers(0, 3)) if kind == "cancel" else draw(st.integers(1, 2))
        return Request(kind, prompt, points, steering, sampling, lens, turns, inner)

    return valid_request(), hostile_request()


def _length(ids: Any) -> int:
    if isinstance(ids, tuple) and ids and isinstance(ids[0], tuple):
        return len(ids[0])
    return len(ids) if isinstance(ids, tuple | str) else 1
