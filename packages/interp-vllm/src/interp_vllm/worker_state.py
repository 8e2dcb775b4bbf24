"""What does a vLLM worker hold between RPCs, and for how long?

One `WorkerState` per worker, on the worker object as `_interp_state` (declared, never probed):

1. A worker process starts with none (`_interp_state` is None). A `vllm-static` worker first
   compiles its taps into the forward when it loads the weights (`interp_vllm.static_worker`)
   and keeps the outcome as `_interp_compiled` (`CompiledTaps`: the taps and the sites they were
   resolved from, or why they could not be installed).
2. `interp_install`, the client's first RPC once the engine is up, creates the state: the
   resolved sites (the compiled taps' resolution on a static worker), and empty request, step
   and hook tables. It is idempotent: a second call finds the state and only reports it.
3. Every later RPC and every hook reads `_interp` (the state; asking for it before
   `interp_install` is a bug and raises). The SAE table (`interp_vllm.sae_worker`) is part of
   it. The state lives until the worker process exits with its engine.

Also here: the per-request records the state holds (`Request`, its decoded `Write`s, a step's
`Segment`s and `Step` plan) and the two write helpers both tiers share.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from interp_core.errors import InterpError, SteeringSpecError
from interp_core.steering import SteeringSpec
from interp_core.writes import spec_from_wire
from interp_torch.steering import check_steered_finite, spec_delta
from interp_vllm.keys import site_key

if TYPE_CHECKING:
    from interp_sae import SAE

    from interp_vllm.static_taps import StaticTaps

__all__ = [
    "CompiledTaps",
    "HoldsWorkerState",
    "Request",
    "Segment",
    "Step",
    "WorkerState",
    "Write",
    "local_part",
    "non_finite",
    "parse_request",
]


@dataclass
class Write:
    """One steering operation of one request, decoded once from the wire, as tensors."""

    spec: SteeringSpec  # the operation as the client sent it (`interp_core.writes`)
    op: str
    vector: torch.Tensor  # float32, flat [width]; cast by interp_torch's dtype rule when applied
    scale: float
    lower: float | None
    upper: float | None
    positions: torch.Tensor | None  # absolute positions it applies to; None = all
    encoder: torch.Tensor | None = None  # clamp: the feature's encoder row, bias, threshold
    bias: float = 0.0
    threshold: float = 0.0

    @classmethod
    def of(cls, spec: SteeringSpec) -> Write:
        encoder = spec.encoder
        return cls(
            spec=spec,
            op=spec.op,
            vector=torch.tensor(spec.values(), dtype=torch.float32),
            scale=spec.scale,
            lower=spec.min,
            upper=spec.max,
            positions=None
            if spec.positions is None
            else torch.tensor(spec.positions, dtype=torch.long),
            encoder=None
            if encoder is None
            else torch.tensor(spec.encoder_values(), dtype=torch.float32),
            bias=spec.bias,
            threshold=spec.threshold,
        )

    def delta(self, rows: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """`interp_torch.spec_delta` of this operation on `rows` at positions `where`."""
        return spec_delta(
            rows,
            self.spec,
            self.vector,
            row_positions=where,
            positions=self.positions,
            encoder=self.encoder,
        )


@dataclass
class Request:
    """What one request asked for, and what it has produced so far."""

    rid: str
    capture: set[str]
    writes: dict[str, list[Write]]
    lens: set[str]  # site keys whose rows stay on device for the lens read-out
    # site key -> [(SAE name, k)]: rows encoded in the worker, only top-k kept (sae_worker)
    features: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    feature_rows: dict[str, list[Any]] = field(default_factory=dict)
    rows: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    # The static tier's plain captures: (keys) -> [(positions, rows [len(keys), n, ...])], one
    # entry per step for all those points at once (`interp_vllm.static_rows`).
    stacked: dict[tuple[str, ...], list[tuple[torch.Tensor, torch.Tensor]]] = field(
        default_factory=dict
    )
    lens_rows: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # A library error that fails this request alone: {"error": class name, "message": text}.
    refusal: dict[str, str] | None = None
    # capture(rows=): the only positions whose captured rows leave the device (None: all).
    rows_wanted: torch.Tensor | None = None

    def row_pick(self, where: torch.Tensor) -> torch.Tensor | None:
        """Which of the rows at positions `where` this request captures (None: every one)."""
        if self.rows_wanted is None:
            return None
        return torch.isin(where, self.rows_wanted)

    def keys(self) -> set[str]:
        return self.capture | self.lens | set(self.writes) | set(self.features)

    def reads(self, key: str) -> bool:
        return key in self.capture or key in self.lens or key in self.features

    def refuse(self, error: InterpError) -> None:
        """Fail this request alone with `error` (the first refusal wins); it runs hook-free on."""
        if self.refusal is None:
            self.refusal = {"error": type(error).__name__, "message": str(error)}

    def take_rows(self) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Every captured row held so far, by key as (positions, rows) chunks; forgotten here.

        The static tier's stacked steps are joined once per group and cut per key (views)."""
        held, self.rows = self.rows, {}
        for keys, chunks in self.stacked.items():
            if len(chunks) == 1:
                where, block = chunks[0]
            else:
                where = torch.cat([w for w, _ in chunks])
                block = torch.cat([b for _, b in chunks], dim=1)
            for index, key in enumerate(keys):
                held.setdefault(key, []).append((where, block[index]))
        self.stacked = {}
        return held

    def keep(
        self,
        key: str,
        where: torch.Tensor,
        rows: torch.Tensor,
        copied: torch.Tensor | None,
        pick: torch.Tensor | None = None,
    ) -> None:
        """Keep rows read at `key` (at absolute positions `where`) for capture and/or the lens.

        `copied` is this request's CPU copy of `rows` (the step's capturing requests share one
        copy per key), given whenever `key` is captured; the lens keeps `rows` on the device.
        `pick` (`row_pick`) selects the captured positions `copied` holds.
        """
        if key in self.capture:
            self.rows.setdefault(key, []).append((where if pick is None else where[pick], copied))
        if key in self.lens:
            self.lens_rows.setdefault(key, []).append((where, rows.detach().clone()))


def parse_request(spec: dict[str, Any]) -> Request:
    writes: dict[str, list[Write]] = {}
    for item in spec.get("steer", ()):
        # The client's own decoder: every field, and SteeringSpec's checks (int64 positions...).
        write = spec_from_wire(item)
        if write.batch_rows is not None:
            # A request is one row: the client sends it that row's writes, the field cleared
            # (interp_core.write_indices.wire_for_row); applied here it would write every row.
            message = f"the write at {write.address} still names batch rows {write.batch_rows}"
            raise ValueError(message)
        key = site_key(write.address.name, write.address.layer)
        writes.setdefault(key, []).append(Write.of(write))
    return Request(
        rid=str(spec["id"]),
        capture={str(k) for k in spec.get("capture", ())},
        writes=writes,
        lens={str(k) for k in spec.get("lens", ())},
        features={
            str(k): [(str(name), int(top)) for name, top in wanted]
            for k, wanted in spec.get("features", {}).items()
        },
        rows_wanted=(
            None
            if spec.get("rows") is None
            else torch.tensor([int(r) for r in spec["rows"]], dtype=torch.long)
        ),
    )


@dataclass
class Segment:
    request: Request
    start: int
    stop: int


@dataclass
class Step:
    """The plan of one forward: which request owns which rows, and who needs which site."""

    positions: torch.Tensor  # [num_tokens] absolute positions (cpu, long)
    segments: list[Segment]
    by_key: dict[str, list[Segment]]


def non_finite(key: str, write: Write, written: torch.Tensor) -> InterpError:
    """The refusal of a request whose steering at `key` left `written` non-finite.

    Worded by interp_torch's `check_steered_finite` from the spec the write came from (its
    point, op, scale and the activation dtype).
    """
    try:
        check_steered_finite(written, write.spec)
    except InterpError as error:
        return error
    return SteeringSpecError.build(
        f"cannot steer at {key}: the steered activations are not finite",
        f"the result overflowed the model dtype ({str(written.dtype).removeprefix('torch.')})",
        "lower the scale (or the vector's size), or load the model in a wider dtype",
    )


def local_part(write: Write, width: int) -> Write:
    """The part of a write this rank holds: under tensor parallelism a head- or neuron-sharded
    site is a contiguous column slice per rank, in rank order (the client sends only `add` there:
    a projection needs the whole row)."""
    full = write.vector.numel()
    if full == width:
        return write
    from vllm.distributed import (
        get_tensor_model_parallel_rank,
        get_tensor_model_parallel_world_size,
    )

    ranks = get_tensor_model_parallel_world_size()
    if write.spec.channels is not None and ranks == 1:
        return write  # a patch of some channels (heads, neurons) carries only their values
    if full != width * ranks or write.op != "add":
        message = f"a {full}-wide {write.op} write cannot apply to a {width}-wide site"
        raise ValueError(message)
    rank = get_tensor_model_parallel_rank()
    return dataclasses.replace(write, vector=write.vector[rank * width : (rank + 1) * width])


# --- the worker's state -------------------------------------------------------------------------
@dataclass
class CompiledTaps:
    """What a `vllm-static` worker compiled into its forward at load (before `interp_install`)."""

    taps: StaticTaps | None = None  # None when installing failed
    resolution: Any = None  # the sites the taps were resolved from (`interp_vllm.sites`)
    error: str | None = None  # why the taps could not be installed, for the client to refuse


@dataclass
class WorkerState:
    """One worker's interp state, created by `interp_install`; see the module docstring."""

    sites: dict[str, Any] = field(default_factory=dict)  # site key -> resolved site
    refused: dict[str, str] = field(default_factory=dict)  # point -> why no site serves it
    requests: dict[str, Request] = field(default_factory=dict)  # id -> what it asked and got
    layout: tuple[list[str], list[int]] | None = None  # the step about to run: ids, token counts
    step: Step | None = None  # the plan of the forward running now
    hooks: dict[tuple[int, str], tuple[Any, list[str]]] = field(default_factory=dict)
    static: set[str] = field(default_factory=set)  # site keys hooked for good
    orphan_errors: list[str] = field(default_factory=list)  # failures no request owns
    model_hook: Any = None  # the forward pre-hook that plans each step (hooked tier)
    saes: dict[str, SAE] = field(default_factory=dict)  # name -> SAE on this worker's device
    # name -> layer -> J_bar held for the fitted lens (on the last pipeline stage only)
    lens_sets: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)
    # session id -> a dashboards pass reduced here (`interp_vllm.reduce_worker.Session`)
    reductions: dict[str, Any] = field(default_factory=dict)


class HoldsWorkerState:
    """The declared state attributes of a worker extension (no attribute is probed)."""

    _interp_state: WorkerState | None = None
    _interp_compiled: CompiledTaps | None = None

    @property
    def _interp(self) -> WorkerState:
        state = self._interp_state
        if state is None:
            message = "the interp state is created by interp_install, which has not run here"
            raise RuntimeError(message)
        return state
