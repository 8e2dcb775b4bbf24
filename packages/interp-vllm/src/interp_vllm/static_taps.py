"""The `vllm-static` taps: reads and writes traced into vLLM's compiled forward.

vLLM compiles its model (torch.compile; on GPUs also CUDA graphs) and then replays the compiled
code without re-entering Python; a forward hook registered afterwards never fires. The static
tier therefore installs its taps when the worker has loaded the weights and before the first
forward compiles them (`interp_vllm.static_worker`), and makes every tap graph-safe:

- Reads copy the site's rows into a persistent buffer `[max_num_batched_tokens, ...]` allocated
  once at a fixed address, through the custom op `interp_vllm::tap` (it declares the buffer it
  mutates, so the compiler keeps the copy and its order). After each step the worker slices the
  rows of each interpreted request out of the buffer (`collect`), exactly as the hooked backend
  does from its hooks: by request layout and absolute position.
- Writes apply `interp_torch.steering_rows.row_delta` per row from a per-point op table sized
  at load (`entries`, `static_write_slots=`, default 1,024 operations): before the forward runs
  (`prepare`) the worker puts each of this step's steered requests' operations in an entry and
  points its rows at it, one index per level (up to `slots` of a request's operations cover one
  row, applied in order; a patch's one-position operations share a level); every other row
  points at the neutral entry, whose delta is exactly 0. An operation none of whose positions
  runs this step takes no entry.
  Every op is served, and every row of a batch may carry a different one. A step whose
  requests need more entries than the table holds refuses the ones that do not fit, with the
  number (`OpTableFull`). A row whose steered value is not finite keeps its unsteered
  value (a branch-free `where`) and raises a per-row flag that `collect` turns into that
  request's refusal, so an overflow never reaches a later layer, the KV cache or another request.
- Nothing in the traced region allocates persistent memory, branches on data or syncs with the
  host: the shapes follow the step's token count, which vLLM marks dynamic.

The hooks read `StaticTaps.armed`, a plain attribute: the compiler specialises it to True when it
traces, so the compiled code always taps, while an eager call of one of these modules outside a
step (the lens decodes rows through the final norm) finds it False and passes through.

Buffer widths come from one probe forward run eagerly before compilation (`probe`), so every site
kind (fused-projection columns, per-head tensors, tensor-parallel shards) gets the shape it has.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from interp_core.steering import STATIC_WRITER_SLOTS
from interp_torch.steering_rows import RowParameters, neutral_parameters, row_delta, row_parameters
from interp_vllm.site_kinds import site_groups, watch_group

__all__ = ["OpTableFull", "StaticTaps", "TapBuffer", "WriteBuffer", "tap"]


# `interp_vllm::tap(value, buffer)`: copy `value` `[n, ...]` into the first n rows of the
# persistent `buffer`. Declared with the low-level library API rather than
# `torch.library.custom_op`: the compiled forward calls it once per declared read per step, and
# custom_op's Python autograd and version-counter layers around each call cost about as much as
# the copy's whole share of a decode step (measured ~8% of a worker's time on the bench model).
# The schema's `(a!)` tells the compiler the buffer is written, so the call is kept and ordered.
_LIBRARY = torch.library.Library("interp_vllm", "DEF")
_LIBRARY.define("tap(Tensor value, Tensor(a!) buffer) -> ()")


def _tap(value: torch.Tensor, buffer: torch.Tensor) -> None:
    buffer.narrow(0, 0, value.shape[0]).copy_(value)


_LIBRARY.impl("tap", _tap, "CompositeExplicitAutograd")
torch.library.register_fake("interp_vllm::tap", lambda value, buffer: None, lib=_LIBRARY)
tap = torch.ops.interp_vllm.tap.default


@dataclass
class TapBuffer:
    """Where one read site's rows land each step: `[capacity, *row_shape]`."""

    rows: torch.Tensor


class OpTableFull(ValueError):
    """A step's steered requests need more op-table entries at a point than it holds."""


@dataclass
class WriteBuffer:
    """One writable site's op table, the per-row index into it, and the finite flags.

    The table holds `entries` operations (`interp_torch.steering_rows.RowParameters`), entry 0
    the neutral one: `add`, `unit` `[entries + 1, width]` and `scalars` `[entries + 1, 9]` (the
    formula's k, g, q, c, lo, hi, b, θ, r), in the compute dtype. `index` `[depth, capacity]`
    is each row's entry per level (0 = nothing), so up to `depth` of a request's operations
    cover one row, applied in order, and every row of a batch has its own. `finite`:
    `[capacity]` bool, written by the graph. `dirty` is how many leading rows the last `prepare`
    may have set and `used` how many entries it filled (both reset before the next fill).
    """

    add: torch.Tensor
    unit: torch.Tensor
    scalars: torch.Tensor
    index: torch.Tensor
    finite: torch.Tensor
    dirty: int = 0
    used: int = 0

    @property
    def entries(self) -> int:
        return int(self.add.shape[0]) - 1

    def reset(self) -> None:
        if self.dirty:
            self.index[:, : self.dirty].zero_()
            self.dirty = 0
        self.used = 0

    def enter(self, parameters: Any, key: str) -> int:
        """Put one operation's `RowParameters` in the next free entry; its number."""
        if self.used >= self.entries:
            message = (
                f"the op table at {key} holds {self.entries} operations and this step's "
                f"steered requests fill it; load with a larger static_write_slots= (now "
                f"{self.entries}), or send fewer concurrent steered requests"
            )
            raise OpTableFull(message)
        self.used += 1
        entry = self.used
        device = self.add.device
        self.add[entry] = parameters[0].to(device)
        self.unit[entry] = parameters[1].to(device)
        values = [float(x) for x in parameters[2:]]
        self.scalars[entry] = torch.tensor(values, dtype=self.scalars.dtype, device=device)
        return entry

    def point_rows(
        self,
        level: int | torch.Tensor,
        start: int,
        stop: int,
        mask: torch.Tensor | None,
        entry: int,
    ) -> None:
        """Rows `start:stop` (those where `mask` is True, all when None) take `entry` at
        `level`: one level for them all, or, with a mask, one per row it takes (a tensor)."""
        if mask is None:
            self.index[level, start:stop] = entry
        else:
            where = torch.nonzero(mask, as_tuple=True)[0] + start
            device = self.index.device
            levels = level.to(device) if isinstance(level, torch.Tensor) else level
            self.index[levels, where.to(device)] = entry
        self.dirty = max(self.dirty, stop)

    def neutral(self, start: int, stop: int) -> None:
        self.index[:, start:stop] = 0


@dataclass
class StaticTaps:
    """The worker's traced taps: buffers by site key, and the hooks installed on the modules."""

    capacity: int
    slots: int  # depth: operations one request applies in order at one point
    entries: int = STATIC_WRITER_SLOTS  # the op table's size at each write point
    reads: dict[str, TapBuffer] = field(default_factory=dict)
    writes: dict[str, WriteBuffer] = field(default_factory=dict)
    row_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[str, torch.dtype] = field(default_factory=dict)
    handles: list[Any] = field(default_factory=list)
    armed: bool = False

    # --- set-up (before the first compiled forward) ---------------------------------------------
    def allocate(
        self,
        shapes: dict[str, tuple[tuple[int, ...], torch.dtype, torch.device]],
        read_keys: set[str],
        write_keys: set[str],
    ) -> None:
        """Buffers for every probed site: `shapes[key]` = (row shape, dtype, device)."""
        from interp_torch.steering import compute_dtype

        for key, (row_shape, dtype, device) in shapes.items():
            self.row_shapes[key] = row_shape
            self.dtypes[key] = dtype
            if key in read_keys:
                rows = torch.zeros((self.capacity, *row_shape), dtype=dtype, device=device)
                self.reads[key] = TapBuffer(rows)
            if key in write_keys:
                width = math.prod(row_shape)
                cdtype = compute_dtype(dtype)
                table = (self.entries + 1, width)
                neutral = neutral_parameters(1, cdtype)[2:]
                scalars = torch.tensor([[float(x) for x in neutral]], dtype=cdtype)
                self.writes[key] = WriteBuffer(
                    add=torch.zeros(table, dtype=cdtype, device=device),
                    unit=torch.zeros(table, dtype=cdtype, device=device),
                    scalars=scalars.repeat(self.entries + 1, 1).to(device),
                    index=torch.zeros((self.slots, self.capacity), dtype=torch.long, device=device),
                    finite=torch.ones(self.capacity, dtype=torch.bool, device=device),
                )

    def install(self, sites: dict[str, Any]) -> None:
        """Hook every (module, side) group that holds a read or write site."""
        for module, phase, keys in site_groups(sites, set(self.reads) | set(self.writes)).values():
            body = self._body([(k, sites[k]) for k in keys], phase)
            self.handles.append(watch_group(module, phase, body))
        self.armed = True

    def _body(self, keyed: list[tuple[str, Any]], phase: str) -> Callable[..., Any]:
        """The traced body of one hook: the writes at its sites in order, then the reads."""
        writes = [(k, s, self.writes[k]) for k, s in keyed if k in self.writes]
        reads = [(s, self.reads[k]) for k, s in keyed if k in self.reads]
        taps = self

        def body(args: Any, kwargs: Any, out: Any) -> Any:
            if not taps.armed:
                return None
            changed = False
            for _key, site, params in writes:
                value = site.read(args, kwargs, out)
                replaced = _steered(site, params, value, args, kwargs, out)
                if phase == "post":
                    out = replaced
                else:
                    args, kwargs = replaced
                changed = True
            for site, buffer in reads:
                tap(site.read(args, kwargs, out), buffer.rows)
            if not changed:
                return None
            return out if phase == "post" else (args, kwargs)

        return body

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()
        self.armed = False

    # --- per step (host side, outside the graph) ------------------------------------------------
    def fill(
        self,
        key: str,
        level: int | torch.Tensor,
        start: int,
        stop: int,
        mask: Any,
        write: Any,
        spec: Any,
    ) -> None:
        """Rows `start:stop` (where `mask`) of `key` apply operation `write` (its vector already
        sliced to this rank; `spec` the spec it came from) at `level` (one per row taken, or
        one for all)."""
        params = self.writes[key]
        width = int(params.add.shape[-1])
        parameters = row_parameters(
            spec, write.vector, params.add.dtype, encoder=write.encoder, width=width
        )
        entry = params.enter(parameters, key)
        params.point_rows(level, start, stop, mask, entry)

    def neutral(self, key: str, start: int, stop: int) -> None:
        """Rows `start:stop` of `key` steer nothing."""
        self.writes[key].neutral(start, stop)


def _steered(
    site: Any, params: WriteBuffer, value: torch.Tensor, args: Any, kwargs: Any, out: Any
) -> Any:
    """`site.add` of the per-row steering delta; non-finite rows keep their unsteered value.

    Per level, each row gathers its op-table entry (0, the neutral one, where it has none) and
    takes `row_delta` of the rows as the previous levels left them."""
    n = value.shape[0]
    flat = value.reshape(n, -1)
    dtype = params.add.dtype
    h = flat.to(dtype)
    delta = torch.zeros_like(h)
    for level in range(params.index.shape[0]):
        index = params.index[level, :n]
        scalars = params.scalars.index_select(0, index)
        parameters = RowParameters(
            params.add.index_select(0, index),
            params.unit.index_select(0, index),
            *scalars.split(1, dim=-1),
        )
        delta = delta + row_delta(h + delta, parameters)
    step = delta.to(flat.dtype)
    ok = torch.isfinite(flat + step).all(dim=-1, keepdim=True)
    tap(ok.reshape(n), params.finite)
    step = torch.where(ok, step, torch.zeros_like(step))
    return site.add(args, kwargs, out, step.reshape(value.shape))
