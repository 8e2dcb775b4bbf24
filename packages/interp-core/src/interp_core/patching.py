"""How does a study set an activation to another run's value, or ablate it?

A `Patch` writes given values at an address: whole rows at some positions, or only some heads
(points with a head axis) or some neurons (`d_mlp` points). An `Ablation` is a patch whose
values are zeros, a supplied mean, or another prompt's activations (resample). `patch_from`
builds a patch straight from a cache. None of them is a second write path: each expands into
`SteeringSpec(op="set", ...)`, one per position (`to_specs`, called by
`interp_core.steering.as_specs`), so a patch is admitted, checked, carried over every wire and
applied exactly like any steering (`interp_core.write_indices` states the arithmetic).

Grouped-query k/v points (`value`, `k_norm_*`) have `n_kv_heads` heads, and a head index there
is the kv head's own, never a query head's.

`LogitDiff` is the metric a sweep reports when no Python runs beside the model (vLLM): the mean
over the batch of `logits[b, position, correct] − logits[b, position, incorrect]`. It is plain
data and also a callable on any array with numpy/torch indexing.

This module is stdlib only; it never looks inside a tensor beyond `shape`, indexing and
`reshape`, which torch and numpy share.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from interp_core.address import Address, AddressLike, to_address
from interp_core.errors import SteeringSpecError
from interp_core.point_lookup import get_point
from interp_core.point_spec import Width
from interp_core.steering import SteeringSpec
from interp_core.write_indices import check_batch_rows, check_index_list, check_indices_below

if TYPE_CHECKING:
    from interp_core.facts import ModelFacts

__all__ = ["ABLATIONS", "Ablation", "LogitDiff", "Patch", "patch_from"]

ABLATIONS = ("zero", "mean", "resample")
_HEAD_WIDTHS = (Width.Q_HEADS, Width.KV_HEADS, Width.Z_HEADS)


def _fail(what: str, why: str | None = None, instead: str | None = None) -> SteeringSpecError:
    return cast(SteeringSpecError, SteeringSpecError.build(what, why, instead))


def _shape(values: Any) -> tuple[int, ...]:
    shape = getattr(values, "shape", None)
    if shape is not None:
        return tuple(int(d) for d in shape)
    dims: list[int] = []
    level = values
    while isinstance(level, Sequence) and not isinstance(level, str | bytes):
        dims.append(len(level))
        if not level:
            break
        level = level[0]
    return tuple(dims)


def _flat(row: Any) -> Any:
    """One position's values as a flat vector: a tensor reshaped, a nested list flattened."""
    if getattr(row, "shape", None) is not None:
        return row.reshape(-1)
    if isinstance(row, Sequence) and row and isinstance(row[0], Sequence):
        return [x for part in row for x in _flat(part)]
    return row


def _indices(name: str, given: object, address: Address) -> tuple[int, ...] | None:
    if given is None:
        return None
    return check_index_list(
        given,
        (
            f"the patch at {address} has {name}={given!r}",
            f"{name} lists indices",
            "pass an int or a non-empty list of ints, or None for the whole row",
        ),
        (f"the patch at {address} has {name}", "indices are non-negative ints", "pass ints from 0"),
        (f"the patch at {address} lists a {name[:-1]} twice", None, "list each once"),
        one_int=True,
    )


def _positions(given: object) -> tuple[int, ...] | None:
    if given is None or isinstance(given, numbers.Integral):
        return None if given is None else (int(given),)  # type: ignore[call-overload]
    return tuple(given)  # type: ignore[arg-type]  # SteeringSpec checks each position


def _head_count(address: Address, facts: ModelFacts) -> int:
    width = get_point(address.name).width
    if width not in _HEAD_WIDTHS:
        error = _fail(
            f"the patch at {address} slices heads, but {address.name} has no head axis",
            f"{address.name} is {width.rule} wide",
            "patch whole rows here, or patch heads at z, q_norm_in/out, k_norm_in/out or value",
        )
        raise error
    return facts.n_kv_heads if width is Width.KV_HEADS else facts.n_heads


def _point_width(address: Address, facts: ModelFacts) -> int:
    dims = get_point(address.name).width.per_token_dims(facts, None, address.layer)
    total = 1
    for d in dims:
        total *= d
    return total


@dataclass(frozen=True, eq=False)
class Patch:
    """Set the activation at `address` to `values` (TransformerLens's activation patching).

    `values` is `[positions, width]` (one row per listed position; `positions=None` means
    0..len-1) or one row `[width]` written at every listed position (every position when None).
    With `heads`, a row is `[len(heads), head_dim]` (or the point's full width, from which the
    heads are taken); with `neurons`, `[len(neurons)]`. With `full_rows=True` (as
    `patch_from` builds it) the rows are the point's full width and the heads or neurons are cut
    from them against the model when the patch is admitted. Tensors stay tensors; lists of
    numbers work everywhere. Applies to every batch row of the call, or only to `batch_rows`
    (an int or a list), so each row of one batch can carry its own patch.
    """

    address: Address
    values: Any
    positions: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    neurons: tuple[int, ...] | None = None
    full_rows: bool = False
    batch_rows: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        address = to_address(self.address)
        object.__setattr__(self, "address", address)
        object.__setattr__(self, "full_rows", bool(self.full_rows))
        rows = check_batch_rows(self.batch_rows, f"the patch at {address}")
        object.__setattr__(self, "batch_rows", rows)
        object.__setattr__(self, "positions", _positions(self.positions))
        object.__setattr__(self, "heads", _indices("heads", self.heads, address))
        object.__setattr__(self, "neurons", _indices("neurons", self.neurons, address))
        if self.heads is not None and self.neurons is not None:
            error = _fail(
                f"the patch at {address} was given both heads and neurons",
                "a point has either a head axis or a neuron axis",
                "pass one of them",
            )
            raise error
        if self.neurons is not None and get_point(address.name).width is not Width.D_MLP:
            error = _fail(
                f"the patch at {address} slices neurons, but {address.name} is not an MLP point",
                "neurons index the d_mlp axis",
                "patch neurons at mlp_pre, mlp_pre_linear or mlp_act",
            )
            raise error
        if self.heads is not None and get_point(address.name).width not in _HEAD_WIDTHS:
            _head_count(address, cast("ModelFacts", None))  # raises: the point has no heads
        shape = _shape(self.values)
        # A head slice's row is [heads, head_dim], unless the rows are full width.
        sliced = 1 if self.heads is not None and not self.full_rows else 0
        if len(shape) not in (1 + sliced, 2 + sliced) or 0 in shape:
            error = _fail(
                f"the patch at {address} has values of shape {shape}",
                "a patch is [positions, width] or one row [width] "
                "(with heads=: [positions, heads, head_dim] or [heads, head_dim])",
                "reshape the values",
            )
            raise error
        rows = shape[0] if len(shape) == 2 + sliced else None
        if rows is not None and self.positions is not None and rows != len(self.positions):
            error = _fail(
                f"the patch at {address} has {rows} rows of values for "
                f"{len(self.positions)} positions",
                "each listed position takes one row",
                "pass one row per position, or one row for all of them",
            )
            raise error
        if rows is not None and self.positions is None:
            object.__setattr__(self, "positions", tuple(range(rows)))

    @property
    def per_position(self) -> bool:
        sliced = self.heads is not None and not self.full_rows
        return len(_shape(self.values)) == (3 if sliced else 2)

    def _channels(self, row_width: int, facts: ModelFacts | None) -> tuple[tuple[int, ...], bool]:
        """The channels written and whether a row must be cut down to them (full-width row)."""
        if self.full_rows and facts is None:
            error = _fail(
                f"the patch at {self.address} holds full rows to cut heads or neurons from",
                "where they lie in the row depends on the model",
                "pass it as steering= to a model's call, or pass only the sliced values",
            )
            raise error
        if self.full_rows:
            width = _point_width(self.address, facts)  # type: ignore[arg-type]
            if row_width != width:
                error = _fail(
                    f"the patch at {self.address} has full rows of {row_width} values",
                    f"{self.address.name} on this model is {width} wide",
                    "patch from a cache of the same model",
                )
                raise error
        if self.neurons is not None:
            if facts is not None:
                width = _point_width(self.address, facts)
                check_indices_below(
                    self.neurons,
                    width,
                    f"the patch at {self.address} writes neurons",
                    f"{self.address.name} on this {facts.architecture} has {width}",
                    f"pass neurons below {width}",
                )
            return self.neurons, self.full_rows
        heads = cast("tuple[int, ...]", self.heads)
        head_dim = _shape(self.values)[-1]
        full = False
        if facts is not None:
            count = _head_count(self.address, facts)
            kind = "kv heads" if get_point(self.address.name).width is Width.KV_HEADS else "heads"
            check_indices_below(
                heads,
                count,
                f"the patch at {self.address} writes heads",
                f"{self.address.name} on this {facts.architecture} has {count} {kind} "
                "(a grouped-query k/v head is indexed by its own kv head)",
                f"pass heads below {count}",
            )
            point_head_dim = _point_width(self.address, facts) // count
            if self.full_rows:
                full, head_dim = True, point_head_dim
            elif head_dim != point_head_dim:
                error = _fail(
                    f"the patch at {self.address} has heads {head_dim} wide",
                    f"a head of {self.address.name} on this model is {point_head_dim} wide",
                    f"pass values shaped [positions, {len(heads)}, {point_head_dim}]",
                )
                raise error
        return tuple(h * head_dim + j for h in heads for j in range(head_dim)), full

    def to_specs(self, facts: ModelFacts | None = None) -> tuple[SteeringSpec, ...]:
        """The patch as `set` specs: one per position (one for all when the row is shared)."""
        if self.per_position:
            positions = cast("tuple[int, ...]", self.positions)
            rows = [(self.values[i], (p,)) for i, p in enumerate(positions)]
        else:
            rows = [(self.values, self.positions)]
        specs = []
        for row, where in rows:
            vector = _flat(row)
            channels = None
            if self.heads is not None or self.neurons is not None:
                width = int(_shape(vector)[0])
                channels, cut = self._channels(width, facts)
                if cut:
                    vector = _take(vector, channels)
            specs.append(
                SteeringSpec(
                    self.address,
                    vector,
                    op="set",
                    positions=where,
                    channels=channels,
                    batch_rows=self.batch_rows,
                )
            )
        return tuple(specs)


def _take(vector: Any, channels: tuple[int, ...]) -> Any:
    if getattr(vector, "shape", None) is not None:
        return vector[list(channels)]
    return [vector[c] for c in channels]


def patch_from(
    cache: Mapping[Any, Any],
    address: AddressLike,
    positions: Sequence[int] | int | None = None,
    *,
    heads: Sequence[int] | int | None = None,
    neurons: Sequence[int] | int | None = None,
    row: int = 0,
    batch_rows: Sequence[int] | int | None = None,
) -> Patch:
    """A patch writing what batch row `row` of `cache` held at `address` (at `positions`).

    The values are the cache's own tensor slice (full-width rows; `heads`/`neurons` are cut
    from them against the model when the patch is admitted). `batch_rows`: the rows of the
    patched call it writes into (every row when None).
    """
    address = to_address(address)
    tensor = cache[address]
    shape = _shape(tensor)
    if len(shape) != 3:
        error = _fail(
            f"patch_from({address}) read a tensor of shape {shape}",
            "a patch copies [batch, seq, width] activations",
            "capture a per-token point (attention patterns are not patched here)",
        )
        raise error
    if not 0 <= row < shape[0]:
        error = _fail(
            f"patch_from({address}) was asked for batch row {row}",
            f"the cache holds {shape[0]} rows",
            f"pass row= below {shape[0]}",
        )
        raise error
    wanted = _positions(positions)
    if wanted is None:
        wanted = tuple(range(shape[1]))
    beyond = [p for p in wanted if not 0 <= p < shape[1]]
    if beyond:
        error = _fail(
            f"patch_from({address}) was asked for positions {beyond[:5]}",
            f"the cached run has {shape[1]} positions",
            f"pass positions below {shape[1]}",
        )
        raise error
    values = tensor[row][list(wanted)]
    full = heads is not None or neurons is not None
    return Patch(
        address,
        values,
        wanted,
        heads=heads,
        neurons=neurons,
        full_rows=full,
        batch_rows=batch_rows,  # type: ignore[arg-type]  # Patch checks them
    )


@dataclass(frozen=True, eq=False)
class Ablation:
    """Zero, mean or resample ablation at `address` (same granularity as `Patch`).

    `kind="zero"` writes zeros; `"mean"` writes `mean` (shaped as a Patch's values: one row, or
    one per position, e.g. `cache[address].mean(0)` over a reference batch for TransformerLens's
    per-position mean); `"resample"` writes batch row `row` of `source`, another prompt's cache.
    `batch_rows`: the rows of the ablated call it applies to (every row when None).
    """

    address: Address
    kind: str = "zero"
    positions: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    neurons: tuple[int, ...] | None = None
    mean: Any = None
    source: Mapping[Any, Any] | None = None
    row: int = 0
    batch_rows: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        address = to_address(self.address)
        object.__setattr__(self, "address", address)
        if self.kind not in ABLATIONS:
            error = _fail(
                f"unknown ablation kind {self.kind!r} at {address}",
                f"the kinds are {', '.join(ABLATIONS)}",
                "pick one of them",
            )
            raise error
        wants = {"mean": "mean", "resample": "source"}.get(self.kind)
        for name in ("mean", "source"):
            given = getattr(self, name) is not None
            if given != (name == wants):
                needed = f"{self.kind} ablation {'needs' if not given else 'takes no'} {name}="
                error = _fail(
                    f"the {needed} at {address}",
                    "mean writes the given mean, resample another prompt's cached values",
                    f"pass {wants}=" if wants else f"drop {name}=",
                )
                raise error
        object.__setattr__(self, "positions", _positions(self.positions))
        object.__setattr__(self, "heads", _indices("heads", self.heads, address))
        object.__setattr__(self, "neurons", _indices("neurons", self.neurons, address))
        rows = check_batch_rows(self.batch_rows, f"the {self.kind} ablation at {address}")
        object.__setattr__(self, "batch_rows", rows)

    def to_patch(self, facts: ModelFacts | None = None) -> Patch:
        """The patch this ablation writes (a zero ablation needs the model's facts for width)."""
        rows = self.batch_rows
        if self.kind == "mean":
            return Patch(
                self.address, self.mean, self.positions, self.heads, self.neurons, batch_rows=rows
            )
        if self.kind == "resample":
            source = cast("Mapping[Any, Any]", self.source)
            return patch_from(
                source,
                self.address,
                self.positions,
                heads=self.heads,
                neurons=self.neurons,
                row=self.row,
                batch_rows=rows,
            )
        if self.neurons is not None:
            return Patch(
                self.address,
                [0.0] * len(self.neurons),
                self.positions,
                None,
                self.neurons,
                batch_rows=rows,
            )
        if facts is None:
            error = _fail(
                f"a zero ablation at {self.address} cannot be sized without the model",
                "its width comes from the model's facts",
                "pass it as steering= to a model's call (which admits it with the model's "
                "facts), or use Patch with explicit zeros",
            )
            raise error
        width = _point_width(self.address, facts)
        if self.heads is not None:
            head_dim = width // _head_count(self.address, facts)
            zeros = [[0.0] * head_dim for _ in self.heads]
            return Patch(self.address, zeros, self.positions, self.heads, None, batch_rows=rows)
        return Patch(self.address, [0.0] * width, self.positions, batch_rows=rows)

    def to_specs(self, facts: ModelFacts | None = None) -> tuple[SteeringSpec, ...]:
        return self.to_patch(facts).to_specs(facts)


@dataclass(frozen=True)
class LogitDiff:
    """`logits[b, position, correct_b] − logits[b, position, incorrect_b]`, averaged over b.

    `correct`/`incorrect` are one token id for every batch row, or one per row.
    """

    correct: int | tuple[int, ...]
    incorrect: int | tuple[int, ...]
    position: int = -1

    def __post_init__(self) -> None:
        for name in ("correct", "incorrect"):
            value = getattr(self, name)
            ids = [value] if isinstance(value, numbers.Integral) else value
            ok = (
                isinstance(ids, Sequence)
                and ids
                and all(
                    isinstance(i, numbers.Integral) and not isinstance(i, bool) and i >= 0
                    for i in ids
                )
            )
            if not ok:
                error = _fail(
                    f"LogitDiff has {name}={value!r}",
                    "it takes a token id, or one per batch row",
                    "pass ints (model.to_tokens gives them)",
                )
                raise error
            if not isinstance(value, numbers.Integral):
                object.__setattr__(self, name, tuple(int(i) for i in value))
        if isinstance(self.position, bool) or not isinstance(self.position, numbers.Integral):
            error = _fail(f"LogitDiff has position={self.position!r}", None, "pass an int")
            raise error

    def ids(self, batch: int) -> tuple[list[int], list[int]]:
        """The (correct, incorrect) ids of each of `batch` rows."""
        out = []
        for value in (self.correct, self.incorrect):
            ids = [value] * batch if isinstance(value, int) else list(value)
            if len(ids) != batch:
                error = _fail(
                    f"LogitDiff has {len(ids)} token ids for a batch of {batch}",
                    None,
                    "pass one id per batch row, or one for all",
                )
                raise error
            out.append(ids)
        return out[0], out[1]

    def __call__(self, logits: Any) -> Any:
        """The metric on `[batch, seq, vocab]` logits (a 0-d array, gradients kept)."""
        batch = _shape(logits)[0]
        correct, incorrect = self.ids(batch)
        last = logits[:, self.position]
        total = None
        for b in range(batch):
            diff = last[b, correct[b]] - last[b, incorrect[b]]
            total = diff if total is None else total + diff
        return total / batch
