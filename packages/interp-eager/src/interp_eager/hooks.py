"""How does one forward pass read and write the taps it was asked for?

A `HookSession` installs one hook per (module, side) for the duration of a `with` block. Each hook
first applies the steering writes at that site (in the order given), then records every read, so a
capture at a steered point returns the steered activation. The session knows the position ids of
the tokens in the current forward, which is how a steering spec limited to some positions finds
them, with or without padding and during cached decoding.

`attn_scores` has no module boundary: the pre-softmax matrix exists only inside the attention
function. While a requested attention module runs, the session sees the calls it makes to
`torch.nn.functional.softmax` and records the input; the model's own attention code runs
unchanged, so the forward is bit-identical to one without the capture. Families with attention
sinks (gpt-oss, DeepSeek-V4) append the sink logit with `torch.cat([scores, sinks], -1)` and
subtract the row maximum before the softmax, so the softmax input is the scores shifted by a
per-row constant; for those taps (`strip_columns`) the session records the first operand of that
`torch.cat` instead.

A write at `router_logits` has the same problem the other way round: the routers of current
transformers compute the logits, pick the top-k experts and weigh them all inside one forward, and
the MoE block uses only the picks. Editing the logits the router returns would change nothing the
model uses. A write whose tap has side `LINEAR` is therefore applied to the output of the first
`torch.nn.functional.linear` call made while its module runs (a router makes exactly one), so the
edited logits are the ones the router ranks and weighs.

Nothing is patched process-wide: those torch calls are seen through a `TorchFunctionMode`
(`_Intercept`), which torch keeps per thread, entered by a pre-hook when the attention or router
module starts and left when it returns (or when the session ends, if its forward raised). Another
thread, or another model, calling softmax at the same moment is never seen and never sees it,
and `torch.nn.functional.softmax`, `torch.cat` and `torch.nn.functional.linear` stay the
original objects.

Every write is checked where it lands: its up-front fit was checked by the model
(`interp_torch.check_steering_fits`), and after the write the steered tensor is checked with
`torch.isfinite` (`interp_torch.check_steered_finite`), so a write that overflows the model's
dtype is refused naming the point, the scale and the dtype instead of flowing on as inf/NaN.

Every write must land: a forward in which a write's site never ran is refused, never returned as
if it had been steered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from interp_core.address import Address
from interp_core.errors import PointUnsupported, SteeringSpecError
from interp_core.steering import SteeringSpec
from interp_eager.taps import LINEAR, Tap
from interp_torch.steering import check_steered_finite, spec_delta

__all__ = ["HookSession", "Write"]

# The functions a session watches, as torch defines them (compared by identity).
_SOFTMAX = torch.nn.functional.softmax
_CAT = torch.cat
_LINEAR = torch.nn.functional.linear


@dataclass
class Write:
    tap: Tap
    spec: SteeringSpec
    vector: torch.Tensor  # checked (interp_torch.steering_vector), on the model's device


class _Intercept(TorchFunctionMode):
    """Every torch call this thread makes while a watched module runs goes through the session."""

    def __init__(self, session: HookSession) -> None:
        super().__init__()
        self.session = session

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return self.session._intercepted(func, tuple(args), dict(kwargs or {}))


class HookSession:
    """Hooks for one or more forward passes: writes, then reads, at every requested site."""

    def __init__(
        self,
        reads: Sequence[Tap],
        writes: Sequence[Write],
        *,
        detach: bool = True,
        accumulate: bool = False,
        copy: bool = False,
    ) -> None:
        self.reads = list(reads)
        self.writes = list(writes)
        self.detach = detach
        # Captures are kept without a copy: HF forwards compute out of place, and copying every
        # captured tensor cost a quarter of a forward pass when every point is read. Each capture
        # remembers its tensor's version counter; `mutated()` reports one that the model changed
        # in place afterwards, and the caller then reruns with copy=True.
        self.copy = copy
        self.versions: dict[int, tuple[torch.Tensor, int]] = {}
        # accumulate=True keeps every forward's reads (generation); else one forward's only.
        self.accumulate = accumulate
        self.captured: dict[Address, list[torch.Tensor]] = defaultdict(list)
        self.fired: dict[Address, int] = defaultdict(int)
        self.position_ids: torch.Tensor | None = None  # [b, s] of the current forward
        self.applied: dict[int, int] = defaultdict(int)  # id(write) -> times applied this forward
        self._handles: list[Any] = []
        self._scores_layer: Tap | None = None
        self._linear_site: tuple[list[Tap], list[Write]] | None = None
        # Entered while a watched module runs (thread-local in torch); depth counts nesting.
        self._mode = _Intercept(self)
        self._mode_depth = 0

    # --- lifecycle ------------------------------------------------------------------------------
    def __enter__(self) -> HookSession:
        sites: dict[tuple[int, str], tuple[Any, list[Tap], list[Write]]] = {}
        for tap in self.reads:
            key = (id(tap.module), tap.side)
            sites.setdefault(key, (tap.module, [], []))[1].append(tap)
        for write in self.writes:
            key = (id(write.tap.module), write.tap.side)
            sites.setdefault(key, (write.tap.module, [], []))[2].append(write)
        try:
            for (_, side), (module, reads, writes) in sites.items():
                if side == "output":
                    self._handles.append(
                        module.register_forward_hook(self._output_hook(reads, writes))
                    )
                elif side == "input":
                    hook = self._input_hook(reads, writes)
                    self._handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
                elif side == LINEAR:
                    self._install_linear(module, reads, writes)
                else:
                    self._install_scores(module, reads)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        # A watched module whose forward raised never ran its leave hook.
        while self._mode_depth:
            self._leave_mode()
        self._scores_layer = None
        self._linear_site = None

    def start_forward(self, position_ids: torch.Tensor) -> None:
        """Called before each forward: which absolute positions the incoming tokens hold."""
        self.position_ids = position_ids
        self.applied.clear()
        if not self.accumulate:
            self.captured.clear()
            self.fired.clear()

    # --- the hooks ------------------------------------------------------------------------------
    def _shape(self) -> tuple[int, int]:
        assert self.position_ids is not None, "start_forward() was not called"
        return int(self.position_ids.shape[0]), int(self.position_ids.shape[1])

    def _apply_writes(self, value: Any, writes: list[Write]) -> Any:
        batch, seq = self._shape()
        for write in writes:
            tap, spec = write.tap, write.spec
            raw = tap.pick(value)
            canonical = tap.view.read(raw, batch, seq)
            # A point whose tokens carry more than one axis (resid_streams: streams x d_model)
            # is steered by one flat vector over all of them.
            rows = canonical.reshape(batch, seq, -1)
            # A patch of some channels (heads, neurons) carries only their values.
            if spec.channels is None and rows.shape[-1] != write.vector.numel():
                message = (
                    f"the steering vector for {spec.address} has {write.vector.numel()} values, "
                    f"but the tensor there has {rows.shape[-1]} per token; pass a vector of "
                    f"that width"
                )
                raise SteeringSpecError(message)
            # interp_torch's dtype rule: the delta comes in float32 (or wider), is embedded into
            # the raw layout, then cast to the activation's dtype and added there.
            # A write limited to some batch rows (a per-row patch) is masked by each row's index.
            row_batch = None
            if spec.batch_rows is not None:
                row_batch = torch.arange(batch, device=rows.device)[:, None].expand(batch, seq)
            delta = spec_delta(
                rows, spec, write.vector, row_positions=self.position_ids, row_batch=row_batch
            ).reshape(canonical.shape)
            assert tap.put is not None
            written = raw + tap.view.embed(delta, raw, batch, seq).to(raw.dtype)
            check_steered_finite(written, spec, before=raw)
            value = tap.put(value, written)
            self.applied[id(write)] += 1
        return value

    def _record(self, value: Any, reads: list[Tap]) -> None:
        batch, seq = self._shape()
        for tap in reads:
            try:
                raw = tap.pick(value)
            except PointUnsupported as error:
                message = f"cannot capture {tap.address}: {error}"
                raise PointUnsupported(message) from error
            tensor = tap.view.read(raw, batch, seq)
            self._keep(tap.address, tensor, tensor is raw)

    def _keep(self, address: Address, tensor: torch.Tensor, aliases_model: bool) -> None:
        if self.detach:
            tensor = tensor.detach()
        if self.copy or (not self.detach and aliases_model):
            tensor = tensor.clone()
        else:
            self.versions[id(tensor)] = (tensor, tensor._version)
        self.captured[address].append(tensor)
        self.fired[address] += 1

    def mutated(self) -> list[Address]:
        """Addresses whose captured tensor the model modified in place after it was read."""
        changed = {
            key for key, (tensor, version) in self.versions.items() if tensor._version != version
        }
        return [a for a, pieces in self.captured.items() if any(id(t) in changed for t in pieces)]

    def _output_hook(self, reads: list[Tap], writes: list[Write]) -> Any:
        def hook(module: Any, args: Any, output: Any) -> Any:
            if writes:
                output = self._apply_writes(output, writes)
            self._record(output, reads)
            return output if writes else None

        return hook

    def _input_hook(self, reads: list[Tap], writes: list[Write]) -> Any:
        def hook(module: Any, args: Any, kwargs: Any) -> Any:
            value = (args, kwargs)
            if writes:
                value = self._apply_writes(value, writes)
            self._record(value, reads)
            return value if writes else None

        return hook

    def _enter_mode(self) -> None:
        if self._mode_depth == 0:
            self._mode.__enter__()
        self._mode_depth += 1

    def _leave_mode(self) -> None:
        self._mode_depth -= 1
        if self._mode_depth == 0:
            self._mode.__exit__(None, None, None)

    def _install_scores(self, module: Any, reads: list[Tap]) -> None:
        (tap,) = reads  # one attn_scores address per attention module
        self._watch(module, "_scores_layer", tap)

    def _install_linear(self, module: Any, reads: list[Tap], writes: list[Write]) -> None:
        self._watch(module, "_linear_site", (reads, writes))

    def _watch(self, module: Any, site: str, value: Any) -> None:
        """While `module` runs, the torch-function mode is on and attribute `site` is `value`
        (None again once it returns): what `_intercepted` reads to know whose call it sees."""

        def enter(mod: Any, args: Any, kwargs: Any) -> None:
            setattr(self, site, value)
            self._enter_mode()

        def leave(mod: Any, args: Any, kwargs: Any, output: Any) -> None:
            setattr(self, site, None)
            self._leave_mode()

        self._handles.append(module.register_forward_pre_hook(enter, with_kwargs=True))
        self._handles.append(module.register_forward_hook(leave, with_kwargs=True))

    def _intercepted(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A torch call made while a watched module runs (the mode is off while this runs)."""
        active = self._scores_layer
        if func is _SOFTMAX and active is not None and not active.strip_columns:
            scores = args[0] if args else kwargs.get("input")
            if isinstance(scores, torch.Tensor) and scores.dim() == 4:
                self._record_scores(active, scores)
        elif func is _CAT and active is not None and active.strip_columns:
            tensors = list(args[0] if args else kwargs.get("tensors", ()))
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            if (
                len(tensors) == 2
                and tensors[0].dim() == 4
                and dim in (-1, 3)
                and tensors[1].shape[-1] == active.strip_columns
            ):
                self._record_scores(active, tensors[0])
        output = func(*args, **kwargs)
        site = self._linear_site
        if func is _LINEAR and site is not None:
            # Only the module's first projection is the site; later ones pass untouched.
            self._linear_site = None
            site_reads, site_writes = site
            if site_writes:
                output = self._apply_writes(output, site_writes)
            self._record(output, site_reads)
        return output

    def _record_scores(self, tap: Tap, scores: torch.Tensor) -> None:
        self._keep(tap.address, scores, aliases_model=False)

    # --- results --------------------------------------------------------------------------------
    def check_writes_applied(self) -> None:
        """Refuse a forward in which some steering write never reached its tensor."""
        for write in self.writes:
            if self.applied.get(id(write), 0) == 0:
                tap = write.tap
                where = tap.module_name or type(tap.module).__name__
                message = (
                    f"steering at {write.spec.address} was not applied: {where} did not run in "
                    f"the forward pass (a fused or bypassed module), so the result would be "
                    f"unsteered; steer at a neighbouring point or path.<module> instead"
                )
                raise SteeringSpecError(message)

    def check_fired_once(self, forwards: int = 1) -> None:
        """Refuse a capture whose module never ran, or ran more often than the forwards did."""
        for tap in self.reads:
            count = self.fired.get(tap.address, 0)
            if count == forwards:
                continue
            if count == 0:
                message = (
                    f"{tap.address} resolved to {tap.module_name or type(tap.module).__name__}, "
                    f"which did not run in the forward pass (a fused or bypassed module); "
                    f"refusing to return nothing. Read a neighbouring point or path.<module>"
                )
            else:
                message = (
                    f"{tap.address} resolved to a module that ran {count} times in "
                    f"{forwards} forward pass(es); refusing to guess which call is the point"
                )
            raise PointUnsupported(message)

    def result(self, address: Address) -> torch.Tensor:
        """The capture of one address, concatenated along positions across forwards."""
        pieces = self.captured[address]
        if len(pieces) == 1:
            return pieces[0]
        axis = 2 if address.name in {"attn_scores", "attn_probs"} else 1
        return torch.cat(pieces, dim=axis)
