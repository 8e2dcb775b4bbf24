"""What exactly does a steering request ask the model to do, and is the request sound?

A `SteeringSpec` is plain data: where to write (an address), the direction (a 1-D vector), the
operation, its strength and, optionally, which token positions. It is validated when built, so
a malformed request fails at the line that wrote it rather than deep inside a forward hook, and
`validate_for(facts)` checks it against a concrete model before any work. A tensor vector's
values cannot be read here; backends check them with `check_vector_values` (or, on torch,
`interp_torch.steering_vector`), which refuse exactly as the check of a list does.

The three direction operations, for an activation row `h` and the spec's vector `v`
(`v̂ = v / ‖v‖`):

    add             h + scale·v                      v is used as given (not normalised)
    orthogonal      h + (scale − 1)·(h·v̂)·v̂         keeps the part of h orthogonal to v and
                                                     multiplies its component along v by scale;
                                                     scale = 0 is directional ablation
    projection_cap  h + (clamp(h·v̂, min, max) − h·v̂)·v̂
                                                     clamps the component along v into [min, max]

A fourth, `clamp`, sets one sparse-autoencoder feature to a value while keeping the rest of the
row (the SAE's reconstruction error included). It reads the feature with an encoder row `e`, a
bias `b` and a threshold `θ` (JumpReLU; 0 for ReLU), and writes along the decoder row `v`:

    clamp           f = r·[r > θ] with r = max(h·e + b, 0);  h + (scale − f)·v
                                                     scale is the feature's new value

It is exact for SAEs whose feature i depends on row i of the encoder alone (ReLU and JumpReLU);
`interp_sae` builds these specs and refuses the architectures where it is not (TopK, gated).

Each is a delta added to `h`, so restricting to `positions` is one multiply by a mask. The pure
Python `apply_reference` is the arithmetic contract: backends are tested against it, and the
conformance kit compares a backend's steered captures with it, in float64 and independently of
any tensor library. The torch backends (eager, vLLM) all run the one implementation in
`interp_torch.steering`, which also states the dtype rule.

`steer(model, specs)` makes specs active for every call on that model inside a `with` block. The
active set lives in a `ContextVar`, so it follows the caller through `await`s and into tasks
spawned inside the block, and never leaks into concurrent requests outside it. Backends read it
with `active_steering(model)` (see `interp_core.protocol`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from interp_core.address import Address, AddressLike, to_address
from interp_core.errors import AddressError, SteeringSpecError
from interp_core.point_lookup import get_point
from interp_core.points import writable_names
from interp_core.presence import why_absent
from interp_core.steering_lens import (
    check_lens_fields,
    check_row_width,
    check_target,
    lens_delta_reference,
    uses_direction,
)
from interp_core.write_indices import (
    check_batch_rows,
    check_channels,
    check_set_width,
    set_delta_reference,
)
from interp_core.write_positions import POSITION_LIMIT, check_positions, check_positions_within

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = [
    "ALL_OPS",
    "OPS",
    "OP_FIELDS",
    "POSITION_LIMIT",
    "STATIC_OPS",
    "STATIC_OP_SCALARS",
    "STATIC_WRITER_SLOTS",
    "STATIC_WRITE_SLOTS",
    "SteeringSpec",
    "active_steering",
    "apply_reference",
    "apply_reference_rows",
    "as_specs",
    "check_positions_within",
    "check_vector_values",
    "non_finite_vector",
    "steer",
    "zero_direction",
]

# The one definition of the ops: each op and the fields it reads besides address, vector and
# positions. A field an op does not read must keep its default (refused otherwise), the wire
# carries every field (`spec_to_wire`), and the tests build one example of each op from here.
OP_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "add": ("scale", "normalize"),
        "orthogonal": ("scale",),
        "projection_cap": ("min", "max"),
        # The feature op: built by an SAE (interp_sae), it reads the feature with an encoder row.
        "clamp": ("scale", "encoder", "bias", "threshold"),
        # The lens-space ops (interp_core.steering_lens states their arithmetic).
        "norm_add": ("scale", "max_fraction"),
        "ablate": (),
        "swap": ("target",),
        # A patch or ablation: the row (or its listed channels) set to the vector's values
        # (interp_core.write_indices states the arithmetic; interp_core.patching builds them).
        "set": ("channels",),
    }
)
ALL_OPS = tuple(OP_FIELDS)
# The direction ops (a vector and a coefficient or bounds, nothing read from an SAE).
OPS = ("add", "orthogonal", "projection_cap")
# The ops the static tier's per-row formula carries (`interp_torch.steering_rows`): a compiled
# graph applies only these, and vLLM refuses the others before a request is sent. Today every op,
# a patch included (its gate r writes the listed channels' values).
STATIC_OPS = ALL_OPS
# How many of a request's writes may cover one row (one position of one prompt) at one point of
# a backend whose writes are traced into a compiled graph (vllm-static): the graph's depth, each
# level one op picked per row from the point's op table, applied in order. Writes at disjoint
# positions (a patch's rows) share a level. The sizer prices the buffers.
STATIC_WRITE_SLOTS = 2
# How many scalars each op-table entry holds beside its two vectors: the per-row formula's
# k, g, q, c, lo, hi, b, θ and the patch gate r (`interp_torch.steering_rows.SCALARS`).
STATIC_OP_SCALARS = 9
# How many operations the op table of one static write point holds, by default (a load
# argument, `static_write_slots=`): each running request's operation there takes one entry per
# step, two float vectors of the point's width in the steering arithmetic's float32.
STATIC_WRITER_SLOTS = 1024


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


def _is_real(value: object) -> bool:
    # bool is a Real to Python, but True as a coefficient is a caller's bug, not 1.0.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True, eq=False)
class SteeringSpec:
    """One steering operation at one address; validated on construction.

    `vector` is anything with a `shape` (a backend tensor, kept as given) or a sequence of
    numbers (stored as a tuple of floats). `positions` are absolute token positions of the
    sequence the forward pass sees (prompt first, then generated tokens); None steers every
    position, generated tokens included. They are checked here as distinct ints in
    [0, 2**63), and by the backend against the call (`check_positions_within`): a position no
    forward pass of the call reaches is refused like an empty list, since it would steer
    nothing. `scale` is the coefficient of `add` and `orthogonal`; `projection_cap` takes `min`
    and/or `max` instead. `clamp` takes `scale` as the feature's new value and reads the feature
    with `encoder` (as wide as `vector`), `bias` and `threshold`; other ops refuse those fields.
    `batch_rows` limits it to some rows of the call's batch (`interp_core.write_indices`).

    Equality is identity (`eq=False`): a vector may be a tensor, whose `==` is elementwise.
    """

    address: Address
    vector: Any
    op: str = "add"
    scale: float = 1.0
    positions: tuple[int, ...] | None = None
    min: float | None = None
    max: float | None = None
    encoder: Any = None
    bias: float = 0.0
    threshold: float = 0.0
    normalize: bool = False
    max_fraction: float | None = None
    target: Any = None
    generated: bool = True
    skip_special: bool = False
    channels: tuple[int, ...] | None = None
    batch_rows: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # Frozen: each field is normalised exactly once, here, in dependency order.
        object.__setattr__(self, "address", _check_address(self.address))
        object.__setattr__(self, "op", _check_op(self.op))
        normalize, fraction, _, _ = check_lens_fields(self)
        object.__setattr__(self, "max_fraction", fraction)
        object.__setattr__(self, "scale", _check_scale(self.scale, self.op))
        object.__setattr__(self, "positions", check_positions(self.positions))
        lower, upper = _check_bounds(self.op, self.min, self.max)
        object.__setattr__(self, "min", lower)
        object.__setattr__(self, "max", upper)
        direction = uses_direction(self.op, normalize)
        vector = _check_vector(self.vector, self.op, self.address, direction)
        object.__setattr__(self, "vector", vector)
        object.__setattr__(self, "target", check_target(self, _check_vector))
        encoder, bias, threshold = _check_feature(self)
        object.__setattr__(self, "encoder", encoder)
        object.__setattr__(self, "bias", bias)
        object.__setattr__(self, "threshold", threshold)
        object.__setattr__(self, "channels", check_channels(self, self.width))
        rows = check_batch_rows(self.batch_rows, f"the {self.op} at {self.address}")
        object.__setattr__(self, "batch_rows", rows)

    # --- derived --------------------------------------------------------------------------------
    @property
    def width(self) -> int:
        """Length of the vector."""
        shape = getattr(self.vector, "shape", None)
        if shape is not None:
            return int(next(iter(shape)))
        return len(self.vector)

    def values(self) -> list[float]:
        """The vector as a list of floats (through `.tolist()` for a tensor)."""
        if isinstance(self.vector, tuple):
            return list(self.vector)
        tolist = getattr(self.vector, "tolist", None)
        if tolist is None:
            message = (
                f"the vector of the steering spec at {self.address} is a "
                f"{type(self.vector).__name__} without .tolist(), so its values cannot be read "
                f"in pure Python; pass a list of floats for reference arithmetic"
            )
            raise TypeError(message)
        return [float(x) for x in tolist()]

    def with_positions(self, positions: Sequence[int] | None) -> SteeringSpec:
        return dataclasses.replace(self, positions=positions)

    @property
    def needs_direction(self) -> bool:
        """Whether the op reads only the vector's direction (an all-zero vector is refused)."""
        return uses_direction(self.op, self.normalize)

    @property
    def splits_by_columns(self) -> bool:
        """Whether each channel's delta depends on that channel alone (a plain add), so a
        tensor-parallel rank can apply its slice of the vector to its slice of the row."""
        return self.op == "add" and not self.normalize

    def target_values(self) -> list[float]:
        """A swap's target direction as a list of floats (through `.tolist()` for a tensor)."""
        if isinstance(self.target, tuple):
            return list(self.target)
        return [float(x) for x in self.target.tolist()]

    def encoder_values(self) -> list[float]:
        """The clamp's encoder row as a list of floats (through `.tolist()` for a tensor)."""
        if isinstance(self.encoder, tuple):
            return list(self.encoder)
        return [float(x) for x in self.encoder.tolist()]

    def __repr__(self) -> str:
        bits = [f"{str(self.address)!r}", f"op={self.op!r}", f"width={self.width}"]
        if self.op != "projection_cap":
            bits.append(f"scale={self.scale}")
        else:
            bits.append(f"min={self.min}, max={self.max}")
        if self.positions is not None:
            bits.append(f"positions={list(self.positions)}")
        return f"SteeringSpec({', '.join(bits)})"

    # --- against a model ------------------------------------------------------------------------
    def validate_for(self, facts: ModelFacts) -> None:
        """Refuse (SteeringSpecError) unless this spec fits a model with these facts.

        Checks that the layer and stream exist, that the model has the point at that layer and
        that the vector is exactly as wide as the point. A `path.` address is checked by the
        backend against the live module; the core cannot know its width.
        """
        address = self.address
        if address.is_path:
            return
        model = facts.architecture
        if address.layer is not None and not 0 <= address.layer < facts.n_layers:
            error = _fail(
                f"cannot steer at {address}",
                f"this {model} has layers 0..{facts.n_layers - 1}",
                f"pick a layer below {facts.n_layers}",
            )
            raise error
        if address.stream is not None and address.stream >= facts.n_streams:
            error = _fail(
                f"cannot steer at {address}",
                f"this {model} has {facts.n_streams} residual stream(s)",
                f"pick a stream below {facts.n_streams}, or drop the stream coordinate",
            )
            raise error
        # One lookup of the point answers both questions: is it there, and how wide.
        point = get_point(address.name)
        found = why_absent(point, facts, address.layer, address.stream)
        if found is not None:
            error = _fail(
                f"cannot steer at {address}",
                f"this {model} has no {address.name} there ({found.sentence().rstrip('.')})",
                "steer at a point the model has; `interp points` lists them",
            )
            raise error
        width = math.prod(point.width.per_token_dims(facts, None, address.layer))
        if not check_set_width(self, width, model) and self.width != width:
            error = _fail(
                f"the steering vector for {address} has {self.width} elements",
                f"{address.name} on this {model} is {width} wide",
                f"pass a vector of length {width}",
            )
            raise error

    # --- reference arithmetic -------------------------------------------------------------------
    def delta_reference(self, h: Sequence[float]) -> list[float]:
        """What the operation adds to one activation row `h` (pure Python, float64)."""
        v = self.values()
        if self.op == "set":  # a channel slice is narrower than the row
            return set_delta_reference(self, h, v)
        if len(h) != len(v):
            error = _fail(
                f"cannot apply the steering spec at {self.address} to a row of {len(h)} values",
                f"its vector has {len(v)}",
                "pass a row of the point's width",
            )
            raise error
        lens = lens_delta_reference(self, h, v)
        if lens is not None:
            return lens
        if self.op == "add":
            return [self.scale * x for x in v]
        if self.op == "clamp":
            pre = math.fsum(a * b for a, b in zip(h, self.encoder_values(), strict=True))
            rectified = max(pre + self.bias, 0.0)
            feature = rectified if rectified > self.threshold else 0.0
            return [(self.scale - feature) * x for x in v]
        norm = math.sqrt(math.fsum(x * x for x in v))
        unit = [x / norm for x in v]
        projection = math.fsum(a * b for a, b in zip(h, unit, strict=True))
        if self.op == "orthogonal":
            factor = (self.scale - 1.0) * projection
        else:
            clamped = projection
            if self.min is not None and clamped < self.min:
                clamped = self.min
            if self.max is not None and clamped > self.max:
                clamped = self.max
            factor = clamped - projection
        return [factor * u for u in unit]

    def apply_reference_row(self, h: Sequence[float]) -> list[float]:
        return [a + d for a, d in zip(h, self.delta_reference(h), strict=True)]


def apply_reference(
    specs: SteeringSpec | Sequence[SteeringSpec], h: Sequence[float], position: int | None = None
) -> list[float]:
    """Apply specs, in order, to one activation row at `position` (None: treat as steered).

    Specs whose `positions` exclude `position` leave the row unchanged.
    """
    row = [float(x) for x in h]
    for spec in as_specs(specs):
        if position is not None and spec.positions is not None and position not in spec.positions:
            continue
        row = spec.apply_reference_row(row)
    return row


def apply_reference_rows(
    specs: SteeringSpec | Sequence[SteeringSpec], rows: Sequence[Sequence[float]]
) -> list[list[float]]:
    """Apply specs to a `[seq, width]` block of rows, honouring each spec's `positions`."""
    return [apply_reference(specs, row, position) for position, row in enumerate(rows)]


def as_specs(
    steering: SteeringSpec | Sequence[SteeringSpec] | None, facts: ModelFacts | None = None
) -> tuple[SteeringSpec, ...]:
    """Normalise `steering=` arguments to a tuple of specs (empty for None).

    A patch or ablation (`interp_core.patching`) is a write that expands into `set` specs
    (`to_specs(facts)`, one per position), so it goes wherever a spec goes.
    """
    if steering is None:
        return ()
    if isinstance(steering, SteeringSpec):
        return (steering,)
    if callable(getattr(steering, "to_specs", None)):
        return tuple(steering.to_specs(facts))  # type: ignore[union-attr]
    if isinstance(steering, Sequence) and not isinstance(steering, str):
        specs = tuple(
            s
            for each in steering
            for s in (each.to_specs(facts) if callable(getattr(each, "to_specs", None)) else [each])
        )
        for spec in specs:
            if not isinstance(spec, SteeringSpec):
                error = _fail(
                    f"steering= got a {type(spec).__name__} among its specs",
                    "each element must be a SteeringSpec",
                    "build one with SteeringSpec(address, vector, op=...)",
                )
                raise error
        return specs
    error = _fail(
        f"steering= got a {type(steering).__name__}",
        "it takes a SteeringSpec, a sequence of them, or None",
        "wrap the vector: SteeringSpec('resid_post.3', vector)",
    )
    raise error


# --- the active-steering stack ------------------------------------------------------------------
# Keyed by id(model): the `with` block holds a reference to the model, so the id cannot be
# reused while the entry exists. Immutable mappings, replaced on every push, so a context copied
# into a task keeps the stack it was created with.
_ACTIVE: ContextVar[Mapping[int, tuple[SteeringSpec, ...]]] = ContextVar(
    "interp_core_active_steering", default=MappingProxyType({})
)


def active_steering(model: object) -> tuple[SteeringSpec, ...]:
    """Specs made active for `model` by enclosing `steer` blocks, outermost first."""
    return _ACTIVE.get().get(id(model), ())


@contextmanager
def steer(
    model: Any, steering: SteeringSpec | Sequence[SteeringSpec]
) -> Iterator[tuple[SteeringSpec, ...]]:
    """Apply `steering` to every call on `model` made inside the block (sync or async).

    Nested blocks stack: inner specs apply after outer ones. Specs are checked against
    `model.facts` on entry, so a misfit fails before any work. Yields the specs now active.
    """
    specs = as_specs(steering, getattr(model, "facts", None))
    if not specs:
        error = _fail(
            "steer() was given no steering specs",
            "an empty block would silently steer nothing",
            "pass at least one SteeringSpec",
        )
        raise error
    facts = getattr(model, "facts", None)
    if facts is not None:
        for spec in specs:
            spec.validate_for(facts)
    current = _ACTIVE.get()
    stacked = dict(current)
    stacked[id(model)] = current.get(id(model), ()) + specs
    token = _ACTIVE.set(MappingProxyType(stacked))
    try:
        yield stacked[id(model)]
    finally:
        _ACTIVE.reset(token)


# --- field checks -------------------------------------------------------------------------------
def _check_address(address: AddressLike) -> Address:
    try:
        coerced = to_address(address)
    except AddressError as exc:
        error = _fail(f"cannot steer at {address!r}", str(exc))
        raise error from exc
    if coerced.is_path:
        return coerced  # a raw module's output can always be replaced
    spec = get_point(coerced.name)
    if not spec.writable:
        near = difflib.get_close_matches(coerced.name, writable_names(), n=2, cutoff=0.5)
        suggestion = " or ".join(near) if near else "resid_post"
        why = spec.read_only_reason or "it is read out of the forward pass, never written back"
        # Registry reasons often already say what to steer instead; do not say it twice.
        instead = None if "instead" in why else f"steer at a writable point such as {suggestion}"
        error = _fail(f"cannot steer at {coerced}: {coerced.name} is capture-only", why, instead)
        raise error
    return coerced


def _check_op(op: object) -> str:
    if op in ALL_OPS:
        return str(op)
    near = difflib.get_close_matches(str(op), ALL_OPS, n=1, cutoff=0.4)
    error = _fail(
        f"unknown steering op {op!r}",
        f"the ops are {', '.join(OPS)}, the lens-space norm_add, ablate and swap, and "
        "clamp (an SAE feature, built by interp_sae) and set (a patch, built by "
        "interp_core.patching)",
        f"did you mean {near[0]}?" if near else "use one of them",
    )
    raise error


def _check_scale(scale: object, op: str) -> float:
    if not _is_real(scale):
        error = _fail(
            f"steering scale {scale!r} is not a number",
            f"it is a {type(scale).__name__}",
            "pass a float such as 4.0",
        )
        raise error
    value = _as_float(scale)
    if not math.isfinite(value):
        error = _fail(
            f"steering scale {value} is not finite",
            "an infinite or NaN coefficient turns every steered activation into inf/NaN",
            "pass a finite float",
        )
        raise error
    if op == "projection_cap" and value != 1.0:
        error = _fail(
            f"projection_cap was given scale={value}",
            "a cap has no coefficient; its bounds are min and max",
            "drop scale, or use op='orthogonal' to rescale the component along the vector",
        )
        raise error
    if "scale" not in OP_FIELDS[op] and value != 1.0:
        error = _fail(
            f"{op} was given scale={value}",
            f"{op} has no coefficient; here it would be ignored",
            "drop scale, or use op='orthogonal' (ablate) or op='add' for a strength",
        )
        raise error
    return value


def _as_float(value: object) -> float:
    """`float(value)`, with an int too large for a float read as the infinity it overflows to.

    So `10**400` meets the same "not finite" refusal as `float("inf")` instead of escaping as
    Python's OverflowError.
    """
    try:
        return float(value)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf if value > 0 else -math.inf  # type: ignore[operator]


def _check_bound(value: object, which: str) -> float | None:
    if value is None:
        return None
    if not _is_real(value) or not math.isfinite(_as_float(value)):
        error = _fail(
            f"projection_cap {which}={value!r} is not a finite number",
            "the cap bounds the component along the vector",
            f"pass a finite float for {which}, or None to leave that side open",
        )
        raise error
    return float(value)  # type: ignore[arg-type]


def _check_bounds(op: str, lower: object, upper: object) -> tuple[float | None, float | None]:
    if op != "projection_cap":
        if lower is not None or upper is not None:
            error = _fail(
                f"op={op!r} was given min/max",
                "only projection_cap uses bounds; here they would be ignored",
                "drop min/max, or use op='projection_cap'",
            )
            raise error
        return None, None
    low, high = _check_bound(lower, "min"), _check_bound(upper, "max")
    if low is None and high is None:
        error = _fail(
            "projection_cap needs a bound",
            "with neither min nor max it would change nothing",
            "pass min=, max= or both",
        )
        raise error
    if low is not None and high is not None and low > high:
        error = _fail(
            f"projection_cap has min={low} > max={high}",
            "the interval is empty",
            "swap them, or make min <= max",
        )
        raise error
    return low, high


def _check_vector(
    vector: object, op: str, address: Address, direction: bool, what: str = "steering vector"
) -> Any:
    where = f"the {what} for {address}"
    shape = getattr(vector, "shape", None)
    if shape is not None:
        dims = tuple(shape)
        if len(dims) != 1:
            error = _fail(
                f"{where} has shape {dims}",
                "a steering vector is 1-D, one value per channel of the point",
                "pass a single vector (index or squeeze the batch/position axes away)",
            )
            raise error
        if int(dims[0]) == 0:
            error = _fail(f"{where} is empty", "it has shape (0,)", "pass the point's width")
            raise error
        _check_dtype(vector, where)
        return vector  # a backend tensor: its values are checked when used (check_vector_values)
    if isinstance(vector, str | bytes) or not isinstance(vector, Sequence):
        error = _fail(
            f"{where} is a {type(vector).__name__}",
            "a vector is a tensor with .shape or a sequence of numbers",
            "pass a list of floats or the backend's tensor",
        )
        raise error
    if len(vector) == 0:
        error = _fail(f"{where} is empty", "it has no elements", "pass the point's width")
        raise error
    values: list[float] = []
    for index, element in enumerate(vector):
        if isinstance(element, str | bytes):
            error = _fail(
                f"{where} has a string at index {index}: {element!r}",
                "every element must be a real number",
                "convert the values to floats",
            )
            raise error
        # A numpy scalar has shape (); anything with a non-empty shape is a nested array.
        if isinstance(element, Sequence | Mapping) or tuple(getattr(element, "shape", ())):
            error = _fail(
                f"{where} is nested (element {index} is a {type(element).__name__})",
                "a steering vector is 1-D",
                "pass one flat vector; use one spec per address for several",
            )
            raise error
        if not _is_real(element):
            error = _fail(
                f"{where} has a non-number at index {index}: {element!r}",
                "every element must be a real number",
                "pass floats",
            )
            raise error
        values.append(_as_float(element))
    _check_values(address, op, values, direction)
    return tuple(values)


def _check_feature(spec: SteeringSpec) -> tuple[Any, float, float]:
    """The clamp's encoder, bias and threshold, checked; other ops must leave them unset."""
    if spec.op != "clamp":
        if spec.encoder is not None or spec.bias != 0.0 or spec.threshold != 0.0:
            error = _fail(
                f"op={spec.op!r} was given an encoder, bias or threshold",
                "only clamp reads a feature; here they would be ignored",
                "drop them, or build the clamp with an SAE's clamp()",
            )
            raise error
        return None, 0.0, 0.0
    where = f"the clamp at {spec.address}"
    for name in ("bias", "threshold"):
        value = getattr(spec, name)
        if not _is_real(value) or not math.isfinite(_as_float(value)):
            error = _fail(
                f"{where} has {name}={value!r}", "it must be a finite number", "pass a float"
            )
            raise error
    if spec.encoder is None:
        error = _fail(
            f"{where} has no encoder row",
            "clamp reads the feature's current value with it before writing the new one",
            "build the spec with an SAE's clamp(feature, value)",
        )
        raise error
    encoder = _check_vector(spec.encoder, "clamp", spec.address, False, "clamp's encoder row")
    check_row_width(
        spec,
        encoder,
        "an encoder row",
        "a decoder row",
        "both act on the same activation row",
        "pass rows of the point's width",
    )
    return encoder, float(spec.bias), float(spec.threshold)


def _check_dtype(vector: object, where: str) -> None:
    """Refuse an array whose dtype is known not to hold real floats (duck-typed: torch, numpy)."""
    dtype = getattr(vector, "dtype", None)
    if dtype is None:
        return
    floating = getattr(dtype, "is_floating_point", None)  # torch.dtype
    if not isinstance(floating, bool):
        kind = getattr(dtype, "kind", None)  # numpy.dtype: b, i, u, c are not real floats
        floating = None if not isinstance(kind, str) else kind not in ("b", "i", "u", "c")
    if floating is False:
        error = _fail(
            f"{where} has dtype {dtype}",
            "a steering vector holds floating-point values",
            "cast it with .float() (or build it as floats)",
        )
        raise error


# --- value checks every backend runs --------------------------------------------------------------
# The core cannot read a backend's tensor, so a tensor vector's values are checked by the backend
# when it uses them; these builders give that refusal the same class and words as the check of a
# list here. `check_vector_values` is the pure-Python form; interp_torch computes the same facts
# on the tensor and raises through the builders.
def non_finite_vector(address: Address, index: int, value: float) -> SteeringSpecError:
    """The refusal of a vector holding `value` (inf or NaN) at `index`, its first bad element."""
    return _fail(
        f"the steering vector for {address} has {float(value)} at index {index}",
        "a non-finite value turns steered activations into inf/NaN",
        "pass finite floats",
    )


def zero_direction(address: Address, op: str) -> SteeringSpecError:
    """The refusal of an all-zero vector for an op that needs a direction."""
    return _fail(
        f"the steering vector for {address} is all zeros",
        f"{op} works along the vector's direction, and a zero vector has none",
        "pass a non-zero direction (a zero vector is only meaningful for a plain op='add')",
    )


def _check_values(
    address: Address, op: str, values: Sequence[float], direction: bool | None = None
) -> None:
    for index, value in enumerate(values):
        if not math.isfinite(value):
            raise non_finite_vector(address, index, value)
    if (op != "add" if direction is None else direction) and not any(values):
        raise zero_direction(address, op)


def check_vector_values(spec: SteeringSpec, values: Sequence[float] | None = None) -> list[float]:
    """Refuse (SteeringSpecError) a spec whose vector values are unusable; return them.

    `values` are the vector's values as floats (read with `spec.values()` when omitted). A list
    vector was checked when the spec was built; a tensor's values can be read only now, and can
    have changed in place since. Every backend refuses the same input with the same message.
    """
    read = spec.values() if values is None else [float(x) for x in values]
    _check_values(spec.address, spec.op, read, spec.needs_direction)
    return read
