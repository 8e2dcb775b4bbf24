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
- Writes apply `interp_torch.steering_rows.row_delta` with per-row parameter buffers (one set per
  slot; a request may apply up to `slots` operations at one point). The worker fills the rows of
  this step's steered requests before the forward runs (`prepare`) and leaves every other row
  neutral, whose delta is exactly 0. A row whose steered value is not finite keeps its unsteered
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

from interp_torch.steering_rows import neutral_parameters, row_delta, row_parameters
from interp_vllm.site_kinds import site_groups, watch_group

__all__ = ["StaticTaps", "TapBuffer", "WriteBuffer", "tap"]


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


@dataclass
class WriteBuffer:
    """Per-row steering parameters of one writable site (one set per slot), and the finite flags.

    `add`, `unit`: `[slots, capacity, width]`; `coef`, `low`, `high`: `[slots, capacity, 1]`, in
    the compute dtype. `finite`: `[capacity]` bool, written by the graph. `dirty` is how many
    leading rows the last `prepare` may have set (reset before the next fill).
    """

    add: torch.Tensor
    unit: torch.Tensor
    coef: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    finite: torch.Tensor
    dirty: int = 0

    def reset(self) -> None:
        if self.dirty:
            n = self.dirty
            self.add[:, :n].zero_()
            self.unit[:, :n].zero_()
            self.coef[:, :n].zero_()
            self.low[:, :n].fill_(-math.inf)
            self.high[:, :n].fill_(math.inf)
            self.dirty = 0

    def set_row_range(
        self, slot: int, start: int, stop: int, mask: torch.Tensor | None, parameters: Any
    ) -> None:
        """Rows `start:stop` (those where `mask` is True, all when None) of `slot` take
        `parameters` (`row_parameters`' tuple)."""
        add, unit, coef, low, high = parameters
        rows = slice(start, stop)
        if mask is None:
            self.add[slot, rows] = add.to(self.add.device)
            self.unit[slot, rows] = unit.to(self.unit.device)
            self.coef[slot, rows] = coef
            self.low[slot, rows] = low
            self.high[slot, rows] = high
        else:
            where = torch.nonzero(mask, as_tuple=True)[0] + start
            where = where.to(self.add.device)
            self.add[slot].index_copy_(0, where, add.to(self.add.device).expand(len(where), -1))
            self.unit[slot].index_copy_(0, where, unit.to(self.unit.device).expand(len(where), -1))
            self.coef[slot, where] = coef
            self.low[slot, where] = low
            self.high[slot, where] = high
        self.dirty = max(self.dirty, stop)


@dataclass
class StaticTaps:
    """The worker's traced taps: buffers by site key, and the hooks installed on the modules."""

    capacity: int
    slots: int
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
                shape = (self.slots, self.capacity)
                self.writes[key] = WriteBuffer(
                    add=torch.zeros((*shape, width), dtype=cdtype, device=device),
                    unit=torch.zeros((*shape, width), dtype=cdtype, device=device),
                    coef=torch.zeros((*shape, 1), dtype=cdtype, device=device),
                    low=torch.full((*shape, 1), -math.inf, dtype=cdtype, device=device),
                    high=torch.full((*shape, 1), math.inf, dtype=cdtype, device=device),
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
    def fill(self, key: str, slot: int, start: int, stop: int, mask: Any, write: Any) -> None:
        """Set rows `start:stop` (where `mask`) of `key`'s `slot` to one operation `write`
        (its vector already sliced to this rank)."""
        params = self.writes[key]
        parameters = row_parameters(
            write.vector,
            write.op,
            params.add.dtype,
            scale=write.scale,
            lower=write.lower,
            upper=write.upper,
        )
        params.set_row_range(slot, start, stop, mask, parameters)

    def neutral(self, key: str, start: int, stop: int) -> None:
        """Rows `start:stop` of every slot of `key` steer nothing."""
        params = self.writes[key]
        width = params.add.shape[-1]
        for slot in range(self.slots):
            params.set_row_range(
                slot, start, stop, None, neutral_parameters(width, params.add.dtype)
            )


def _steered(
    site: Any, params: WriteBuffer, value: torch.Tensor, args: Any, kwargs: Any, out: Any
) -> Any:
    """`site.add` of the per-row steering delta; non-finite rows keep their unsteered value."""
    n = value.shape[0]
    flat = value.reshape(n, -1)
    dtype = params.add.dtype
    h = flat.to(dtype)
    delta = torch.zeros_like(h)
    for slot in range(params.add.shape[0]):
        delta = delta + row_delta(
            h + delta,
            params.add[slot, :n],
            params.unit[slot, :n],
            params.coef[slot, :n],
            params.low[slot, :n],
            params.high[slot, :n],
        )
    step = delta.to(flat.dtype)
    ok = torch.isfinite(flat + step).all(dim=-1, keepdim=True)
    tap(ok.reshape(n), params.finite)
    step = torch.where(ok, step, torch.zeros_like(step))
    return site.add(args, kwargs, out, step.reshape(value.shape))
