"""What runs inside a vLLM worker process to read and write activations, request by request?

`InterpWorkerExtension` is mixed into vLLM's Worker class (`worker_extension_cls`). The client
calls its methods by name through `collective_rpc`, so no pickled callable ever travels and
`VLLM_ALLOW_INSECURE_SERIALIZATION` stays off. Arguments arrive as plain lists and dicts; tensors
leave as `(bytes, shape, dtype)` triples, because vLLM's RPC serializer does not carry tensors.

How one flat batch is split per request. vLLM runs every scheduled request's tokens concatenated
into one `[num_tokens, ...]` batch, ordered as `input_batch.req_ids`, each request contributing
its `num_scheduled_tokens` (a whole prompt, a chunk of one, or one decode token). The runner's
`_prepare_inputs` receives exactly that count array, so the extension wraps it (per instance) to
snapshot the layout of the step about to run. What each request wants travels with the request
itself, in `SamplingParams.extra_args["interp"]` (an id, the points to capture, the steering
operations, the lens layers), so there is no registration race and vLLM's internal request-id
suffixes do not matter. A forward pre-hook on the model turns layout + specs into a step plan
(which rows of which site belong to which request), installs hooks on exactly the sites some
request in the step needs, and removes the rest: a step nobody interprets runs hook-free.

At each site the hook applies steering first (every request's rows, one write), then reads the
captures, so a capture at a steered point holds the post-intervention value. Rows are kept with
their absolute positions, which makes chunked prefill, decode steps and a recomputed (preempted)
request reassemble correctly: the client gets one row per position.

Nothing here may raise while a forward runs: an exception in a hook kills the engine. The client
validates every argument before it is sent; the hook bodies still catch everything and record the
failure, which the client raises as a library error. A failure that belongs to one request fails
that request alone, and the step runs for the others as if it were absent:

- a spec the worker cannot read (a value the client should have refused, e.g. a position beyond
  int64) refuses that request when the plan is built; it then runs hook-free to its end;
- a steering write whose result is not finite (the model dtype overflowed) is checked on the
  written rows right after the write (`torch.isfinite`, only the steered requests' rows); the
  offending request's rows are restored to their unsteered values before the activation flows
  on, so no inf/NaN reaches a later layer, the KV cache or another request, and the request is
  refused (`SteeringSpecError`) and runs hook-free to its end;
- an exception while one request's steering is computed refuses that request alone.

Such a refusal travels back as `{"error": class name, "message": ...}` from `interp_collect`; the
client raises it as that `interp_core.errors` class.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from interp_core.errors import (
    CapabilityUnsupported,
    InterpError,
    InvalidArgument,
    SteeringSpecError,
)
from interp_core.family_conventions import conventions_for
from interp_core.steering import SteeringSpec
from interp_core.writes import spec_from_wire
from interp_torch.steering import check_steered_finite, compute_dtype, spec_delta
from interp_vllm.keys import site_key
from interp_vllm.readouts_worker import ReadoutsWorkerMixin
from interp_vllm.row_transfer import pack_rows
from interp_vllm.sae_worker import SAEWorkerMixin, collect_features
from interp_vllm.site_kinds import site_groups
from interp_vllm.tensor_wire import decode_tensor, encode_tensor

__all__ = [
    "InterpWorkerExtension",
    "decode_tensor",
    "encode_tensor",
    "faithful_activations",
    "site_key",
]

SPEC_KEY = "interp"  # the extra_args entry carrying a request's interp spec


# --- per-request state ----------------------------------------------------------------------------
@dataclass
class _Write:
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
    def of(cls, spec: SteeringSpec) -> _Write:
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
class _Request:
    """What one request asked for, and what it has produced so far."""

    rid: str
    capture: set[str]
    writes: dict[str, list[_Write]]
    lens: set[str]  # site keys whose rows stay on device for the lens read-out
    # site key -> [(SAE name, k)]: rows encoded in the worker, only top-k kept (sae_worker)
    features: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    feature_rows: dict[str, list[Any]] = field(default_factory=dict)
    rows: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    lens_rows: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # A library error that fails this request alone: {"error": class name, "message": text}.
    refusal: dict[str, str] | None = None

    def keys(self) -> set[str]:
        return self.capture | self.lens | set(self.writes) | set(self.features)

    def reads(self, key: str) -> bool:
        return key in self.capture or key in self.lens or key in self.features

    def refuse(self, error: InterpError) -> None:
        """Fail this request alone with `error` (the first refusal wins); it runs hook-free on."""
        if self.refusal is None:
            self.refusal = {"error": type(error).__name__, "message": str(error)}

    def keep(
        self, key: str, where: torch.Tensor, rows: torch.Tensor, copied: torch.Tensor | None
    ) -> None:
        """Keep rows read at `key` (at absolute positions `where`) for capture and/or the lens.

        `copied` is this request's CPU copy of `rows` (the step's capturing requests share one
        copy per key), given whenever `key` is captured; the lens keeps `rows` on the device.
        """
        if key in self.capture:
            self.rows.setdefault(key, []).append((where, copied))
        if key in self.lens:
            self.lens_rows.setdefault(key, []).append((where, rows.detach().clone()))


def _parse_request(spec: dict[str, Any]) -> _Request:
    writes: dict[str, list[_Write]] = {}
    for item in spec.get("steer", ()):
        # The client's own decoder: every field, and SteeringSpec's checks (int64 positions...).
        write = spec_from_wire(item)
        key = site_key(write.address.name, write.address.layer)
        writes.setdefault(key, []).append(_Write.of(write))
    return _Request(
        rid=str(spec["id"]),
        capture={str(k) for k in spec.get("capture", ())},
        writes=writes,
        lens={str(k) for k in spec.get("lens", ())},
        features={
            str(k): [(str(name), int(top)) for name, top in wanted]
            for k, wanted in spec.get("features", {}).items()
        },
    )


@dataclass
class _Segment:
    request: _Request
    start: int
    stop: int


@dataclass
class _Step:
    """The plan of one forward: which request owns which rows, and who needs which site."""

    positions: torch.Tensor  # [num_tokens] absolute positions (cpu, long)
    segments: list[_Segment]
    by_key: dict[str, list[_Segment]]


class _TanhGelu(torch.nn.Module):
    """GELU in its tanh approximation (HF's `bloom_gelu_forward`, which BLOOM was trained with)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")


def faithful_activations(model: torch.nn.Module, config: dict[str, Any]) -> int:
    """Serve BLOOM's MLP activation as the model computes it: vLLM's BloomMLP applies the exact
    (erf) GELU, which moves every activation from layer 0's MLP on by ~1e-3. Swapped before any
    request (the hooked engine runs eager); returns how many MLPs were swapped."""
    if not conventions_for(config.get("model_type", "")).tanh_gelu_mlp:
        return 0
    mlps = [m for m in model.modules() if hasattr(m, "gelu_impl") and hasattr(m, "dense_4h_to_h")]
    if not mlps:
        error = CapabilityUnsupported.build(
            f"vLLM's {type(model).__name__} has no BLOOM MLP with a `gelu_impl` to serve in the "
            "tanh approximation BLOOM was trained with",
            "its exact (erf) GELU would make every activation from layer 0's MLP on differ from "
            "the model's",
            "use backend='eager' for this BLOOM checkpoint",
        )
        raise error
    for mlp in mlps:
        mlp.gelu_impl = _TanhGelu()
    return len(mlps)


class InterpWorkerExtension(SAEWorkerMixin, ReadoutsWorkerMixin):
    """Methods vLLM adds to its Worker; every one is called by name over `collective_rpc`.

    State lives on the worker object (`_interp_*` attributes), so it persists between RPCs.
    """

    # --- set-up ---------------------------------------------------------------------------------
    def interp_install(self, config: dict[str, Any], static: list[str] | None = None) -> dict:
        """Resolve where every point lives and arm the batch-layout snapshot; idempotent.

        `static` lists site keys hooked for good (vllm-static); None hooks lazily, per step.
        Returns the served site keys, the writable ones and the refusals (point -> reason).
        """
        from interp_vllm.sites import resolve_sites

        runner = self.model_runner  # type: ignore[attr-defined]
        model = runner.model
        # vllm-static: taps traced into the compiled forward at load (interp_vllm.static_worker).
        taps = getattr(self, "_interp_taps", None)
        failed = getattr(self, "_interp_static_error", None)
        if not getattr(self, "_interp_ready", False):
            if taps is None:
                faithful_activations(model, config)
                resolution = resolve_sites(model, config)
            else:
                resolution = self._interp_resolution
            self._interp_sites = {
                site_key(name, layer): site for (name, layer), site in resolution.sites.items()
            }
            self._interp_refused = dict(resolution.refused)
            self._interp_requests: dict[str, _Request] = {}
            self._interp_layout: tuple[list[str], list[int]] | None = None
            self._interp_step: _Step | None = None
            self._interp_hooks: dict[tuple[int, str], tuple[Any, list[str]]] = {}
            self._interp_static: set[str] = set()
            self._interp_orphan_errors: list[str] = []
            if taps is None and failed is None:
                self._interp_wrap_prepare(runner)
                self._interp_model_hook = model.register_forward_pre_hook(
                    self._interp_plan, with_kwargs=True
                )
            self._interp_ready = True
        _pipeline_buffers(runner)
        if static is not None and taps is None:
            self._interp_static = set(static)
            self._interp_sync_hooks(self._interp_static)
        writable = sorted(k for k, s in self._interp_sites.items() if s.add is not None)
        refusals = {k: s.refusal for k, s in self._interp_sites.items() if s.refusal}
        return {
            "sites": sorted(self._interp_sites),
            "writable": writable,
            "write_refusals": refusals,
            "refused": self._interp_refused,
            "static_error": failed,
            "compiled_taps": None if taps is None else sorted(set(taps.reads) | set(taps.writes)),
        }

    def _interp_wrap_prepare(self, runner: Any) -> None:
        original = runner._prepare_inputs

        def prepare(scheduler_output: Any, num_scheduled_tokens: Any, *args: Any, **kw: Any) -> Any:
            try:
                counts = [int(n) for n in num_scheduled_tokens]
                self._interp_layout = (list(runner.input_batch.req_ids[: len(counts)]), counts)
            except Exception as exc:  # never let bookkeeping take the engine down
                self._interp_layout = None
                self._interp_orphan_errors.append(f"batch layout: {type(exc).__name__}: {exc}")
            return original(scheduler_output, num_scheduled_tokens, *args, **kw)

        runner._prepare_inputs = prepare

    # --- the step plan --------------------------------------------------------------------------
    def _interp_plan(self, module: Any, args: Any, kwargs: Any) -> None:
        self._interp_step = None
        segments: list[_Segment] = []
        try:
            segments = self._interp_segments()
            step = self._interp_build_step(segments, args, kwargs) if segments else None
            needed = set(self._interp_static)
            if step is not None:
                needed.update(step.by_key)
                self._interp_step = step
            self._interp_sync_hooks(needed)
        except Exception as exc:  # never let a hook take the engine down
            self._interp_step = None
            message = f"step plan: {type(exc).__name__}: {exc}"
            if not segments:
                self._interp_orphan_errors.append(message)
            for segment in segments:  # the step ran without hooks for each of them
                segment.request.errors.append(message)

    def _interp_segments(self) -> list[_Segment]:
        """The rows of this step's interpreted requests; a refused request has none."""
        layout = self._interp_layout
        if layout is None:
            return []
        runner = self.model_runner  # type: ignore[attr-defined]
        segments: list[_Segment] = []
        start = 0
        for req_id, count in zip(*layout, strict=True):
            state = runner.requests.get(req_id)
            params = getattr(state, "sampling_params", None)
            extra = getattr(params, "extra_args", None) or {}
            spec = extra.get(SPEC_KEY)
            if spec is not None:
                request = self._interp_request(spec)
                if request is not None and request.refusal is None:
                    segments.append(_Segment(request, start, start + count))
            start += count
        return segments

    def _interp_request(self, spec: Any) -> _Request | None:
        """The state of the request carrying `spec`, read once; an unreadable spec refuses it."""
        rid = spec.get("id") if isinstance(spec, dict) else None
        if rid is None:
            self._interp_orphan_errors.append(f"a request spec without an id: {spec!r:.200}")
            return None
        request = self._interp_requests.get(str(rid))
        if request is not None:
            return request
        try:
            request = _parse_request(spec)
        except Exception as exc:  # this request alone: the step runs for the others
            request = _Request(rid=str(rid), capture=set(), writes={}, lens=set())
            error = InvalidArgument.build(
                "the vLLM workers could not read this request's interp spec",
                f"{type(exc).__name__}: {exc}",
                "the client checks every value before sending; report this as a bug",
            )
            request.refuse(error)
        self._interp_requests[request.rid] = request
        return request

    def _interp_build_step(self, segments: list[_Segment], args: Any, kwargs: Any) -> _Step | None:
        positions = kwargs.get("positions")
        if positions is None:
            positions = args[1]
        by_key: dict[str, list[_Segment]] = {}
        for segment in segments:
            for key in segment.request.keys():
                by_key.setdefault(key, []).append(segment)
        # A copy: the runner refills its positions buffer in place for the next step.
        where = positions.detach().to("cpu", torch.long, copy=True)
        return _Step(where, segments, by_key)

    def _interp_sync_hooks(self, needed: set[str]) -> None:
        """Hook exactly the (module, phase) groups that some needed site key lives on."""
        groups = site_groups(self._interp_sites, needed)
        for gid in list(self._interp_hooks):
            if gid not in groups:
                self._interp_hooks.pop(gid)[0].remove()
        for gid, (module, phase, keys) in groups.items():
            held = self._interp_hooks.get(gid)
            if held is not None:
                held[1][:] = keys
                continue
            if phase == "pre":
                handle = module.register_forward_pre_hook(
                    self._interp_pre_hook(keys), with_kwargs=True
                )
            else:
                handle = module.register_forward_hook(
                    self._interp_post_hook(keys), with_kwargs=True
                )
            self._interp_hooks[gid] = (handle, keys)

    # --- the hooks ------------------------------------------------------------------------------
    def _interp_pre_hook(self, keys: list[str]) -> Callable[..., Any]:
        def hook(module: Any, args: Any, kwargs: Any) -> Any:
            step = self._interp_step
            if step is None:
                return None
            try:
                return self._interp_visit(step, keys, "pre", args, kwargs, None)
            except Exception as exc:  # never let a hook take the engine down
                self._interp_fail(step, keys, exc)
                return None

        return hook

    def _interp_post_hook(self, keys: list[str]) -> Callable[..., Any]:
        def hook(module: Any, args: Any, kwargs: Any, out: Any) -> Any:
            step = self._interp_step
            if step is None:
                return None
            try:
                return self._interp_visit(step, keys, "post", args, kwargs, out)
            except Exception as exc:  # never let a hook take the engine down
                self._interp_fail(step, keys, exc)
                return None

        return hook

    def _interp_fail(self, step: _Step, keys: list[str], exc: BaseException) -> None:
        message = f"{', '.join(keys)}: {type(exc).__name__}: {exc}"
        touched = {id(s.request): s.request for k in keys for s in step.by_key.get(k, ())}
        for request in touched.values():
            request.errors.append(message)

    def _interp_visit(
        self, step: _Step, keys: list[str], phase: str, args: Any, kwargs: Any, out: Any
    ) -> Any:
        changed = False
        for key in keys:
            segments = [
                s
                for s in step.by_key.get(key, ())
                if key in s.request.writes and s.request.refusal is None
            ]
            if not segments:
                continue
            site = self._interp_sites[key]
            value = site.read(args, kwargs, out)
            delta = self._interp_deltas(step, key, segments, value)
            if delta is None:
                continue
            replaced = self._interp_finite_write(site, key, segments, delta, (args, kwargs, out))
            if replaced is None:
                continue
            if phase == "post":
                out = replaced
            else:
                args, kwargs = replaced
            changed = True
        for key in keys:
            segments = [s for s in step.by_key.get(key, ()) if s.request.refusal is None]
            wanted = [s for s in segments if s.request.reads(key)]
            if not wanted:
                continue
            value = self._interp_sites[key].read(args, kwargs, out)
            self._interp_keep_step(step, key, wanted, value)
        if not changed:
            return None
        return out if phase == "post" else (args, kwargs)

    def _interp_keep_step(
        self, step: _Step, key: str, readers: list[_Segment], value: torch.Tensor
    ) -> None:
        """Keep each reading request's rows of this step's `value` at `key`: raw (capture, lens)
        and SAE top-k (features).

        The capturing requests' rows leave the device in one copy per key and step, each request
        keeping its slice of it: on a GPU one transfer instead of one per request, on a CPU one
        copy instead of many small ones. A slice keeps that copy alive until its own request is
        collected, so a step's captured rows are freed with the last of its requests.
        """
        capturing = [s for s in readers if key in s.request.capture]
        copies: dict[int, torch.Tensor] = {}
        if capturing:
            host = torch.cat([value[s.start : s.stop] for s in capturing]).detach().to("cpu")
            parts = host.split([s.stop - s.start for s in capturing])
            copies = {id(s): part for s, part in zip(capturing, parts, strict=True)}
        for segment in readers:
            part = slice(segment.start, segment.stop)
            request, rows, where = segment.request, value[part], step.positions[part]
            request.keep(key, where, rows, copies.get(id(segment)))
            wanted = request.features.get(key)
            if wanted:
                encoded = self.interp_sae_encode_rows(wanted, rows)
                request.feature_rows.setdefault(key, []).append((where.clone(), encoded))

    def _interp_deltas(
        self, step: _Step, key: str, segments: list[_Segment], value: torch.Tensor
    ) -> torch.Tensor | None:
        flat = value.reshape(value.shape[0], -1)
        # interp_torch's dtype rule: deltas in compute_dtype, cast to the site's dtype once.
        delta = torch.zeros(flat.shape, dtype=compute_dtype(flat.dtype), device=flat.device)
        touched = False
        for segment in segments:
            part = slice(segment.start, segment.stop)
            try:
                rows = flat[part].to(delta.dtype)
                where = step.positions[part]
                for write in segment.request.writes[key]:
                    # Each operation sees the rows as the previous ones left them (specs in order).
                    current = rows + delta[part]
                    delta[part] += _local(write, flat.shape[-1]).delta(current, where)
            except Exception as exc:  # this request alone: the others' rows are untouched
                delta[part] = 0
                error = CapabilityUnsupported.build(
                    f"the vLLM workers could not steer this request at {key}",
                    f"{type(exc).__name__}: {exc}",
                    "use backend='eager' for this steering",
                )
                segment.request.refuse(error)
                continue
            touched = True
        if not touched:
            return None
        return delta.to(value.dtype).reshape(value.shape)

    def _interp_finite_write(
        self,
        site: Any,
        key: str,
        segments: list[_Segment],
        delta: torch.Tensor,
        seen: tuple[Any, Any, Any],
    ) -> Any:
        """`site.add` of `delta`, with every steered request's written rows checked finite.

        A request whose rows hold inf/NaN after the write is refused and its rows of `delta`
        zeroed; the write is then redone from the untouched originals (site adds return
        replacements and never write into vLLM's tensors), so the activation that flows on, into
        later layers and the KV cache, holds no non-finite value of ours. None: nothing to write.
        """
        args, kwargs, out = seen
        replaced = site.add(args, kwargs, out, delta)
        after = site.read(*_seen_after(site.phase, replaced, args, kwargs))
        # One flag per steered request, read back once (a single device sync per site).
        flags = torch.stack([torch.isfinite(after[s.start : s.stop]).all() for s in segments])
        if bool(flags.all()):
            return replaced
        bad = [s for s, ok in zip(segments, flags.tolist(), strict=True) if not ok]
        for segment in bad:
            written = after[segment.start : segment.stop]
            segment.request.refuse(_non_finite(key, segment.request.writes[key][-1], written))
            delta[segment.start : segment.stop] = 0
        if all(s.request.refusal is not None for s in segments):
            return None
        return site.add(args, kwargs, out, delta)

    # --- per request ----------------------------------------------------------------------------
    def interp_collect(
        self, rid: str, lens: dict[str, Any] | None = None, route: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Everything request `rid` produced, one row per position, then forget it.

        `lens` ({"top_k": k}) decodes the request's lens rows through the final norm and the
        unembedding here, in the worker, and returns only the top-k ids and probabilities.
        `route` (`row_transfer.client_route`) lets the rows go through shared memory when the
        client runs on this host.
        """
        request = self._interp_requests.pop(rid, None)
        orphans, self._interp_orphan_errors = self._interp_orphan_errors, []
        if request is None:
            return {"captured": {}, "positions": {}, "lens": {}, "errors": orphans, "seen": False}
        if request.refusal is not None:
            return {
                "captured": {},
                "positions": {},
                "lens": {},
                "errors": [*request.errors, *orphans],
                "refusal": request.refusal,
                "seen": True,
            }
        captured: dict[str, torch.Tensor] = {}
        positions: dict[str, list[int]] = {}
        for key, chunks in request.rows.items():
            positions[key], captured[key] = _by_position(chunks)
        readout: dict[str, Any] = {}
        if lens is not None and request.lens_rows:
            readout = self._interp_lens(request, int(lens["top_k"]))
        return {
            **pack_rows(captured, route),
            "positions": positions,
            "lens": readout,
            "features": collect_features(request.feature_rows) if request.feature_rows else {},
            "errors": [*request.errors, *orphans],
            "seen": True,
        }

    def interp_drop(self, rid: str) -> None:
        """Forget request `rid` (aborted or failed) without sending anything back."""
        self._interp_requests.pop(rid, None)

    def interp_pending(self) -> list[str]:
        """Ids of requests whose rows are held here; a test proves none leaks."""
        return sorted(self._interp_requests)

    def interp_hooked(self) -> int:
        """How many (module, phase) hooks are installed right now."""
        return len(self._interp_hooks)

    def _interp_lens(self, request: _Request, top_k: int) -> dict[str, Any]:
        """Decode `request`'s lens rows through the plain final norm and unembedding.

        The norm and the head are vLLM's own modules and may carry this worker's hooks; the last
        step's plan is still set, so a hook would fire on these rows with that step's row ranges
        (another request's capture at final_norm would take rows of this lens, a steering write
        there would change it only when it ran alone). The plan is parked while the lens runs:
        every hook then passes through, and the lens reads an unsteered final norm, as on eager.
        """
        with self._interp_parked():
            return self._interp_lens_decode(request, top_k)

    @contextlib.contextmanager
    def _interp_parked(self) -> Iterator[None]:
        """No hook of this worker acts while the block runs: the step plan is parked, and the
        static tier's traced taps are disarmed for eager calls (the compiled code keeps them)."""
        step, self._interp_step = self._interp_step, None
        taps = getattr(self, "_interp_taps", None)
        if taps is not None:
            taps.armed = False
        try:
            yield
        finally:
            self._interp_step = step
            if taps is not None:
                taps.armed = True

    def interp_decode_rows(self, encoded: Any, top_k: int | None = None) -> Any:
        """Logits `[n, vocab]` of residual rows `[n, d_model]` sent by the client (as
        `encode_tensor` lays them out): the final norm, then `compute_logits`, which applies the
        model's logit multiplier and final softcap as the engine does when it samples. The step
        plan is parked, as for the lens, so no hook of this worker touches the rows. None on a
        tensor-parallel rank that holds no gathered vocabulary, and on a pipeline stage without
        the final norm. With `top_k`, only the top-k ids and probabilities per row travel back
        (the logit lens under pipeline parallelism decodes this way)."""
        model = self.model_runner.model  # type: ignore[attr-defined]
        if "final_norm" not in self._interp_sites:  # not the last pipeline stage
            return None
        norm = self._interp_sites["final_norm"].module
        like = next(iter(norm.parameters()), None)
        like = next(iter(model.parameters())) if like is None else like
        rows = decode_tensor(*encoded).to(device=like.device, dtype=like.dtype)
        with self._interp_parked(), torch.no_grad():
            normed = norm(rows.contiguous())
            normed = normed[0] if isinstance(normed, tuple) else normed
            logits = model.compute_logits(normed)
        if logits is None:
            return None
        if top_k is None:
            return encode_tensor(logits)
        probs = torch.softmax(logits.float(), dim=-1)
        values, indices = probs.topk(min(int(top_k), probs.shape[-1]), dim=-1)
        return {"ids": indices.cpu().tolist(), "probs": values.cpu().tolist()}

    def _interp_lens_decode(self, request: _Request, top_k: int) -> dict[str, Any]:
        model = self.model_runner.model  # type: ignore[attr-defined]
        if "final_norm" not in self._interp_sites:  # pipeline parallel: the client decodes
            return {}
        norm = self._interp_sites["final_norm"].module
        out: dict[str, Any] = {}
        with torch.no_grad():
            for key, chunks in request.lens_rows.items():
                where, rows = _by_position(chunks)
                normed = norm(rows)
                normed = normed[0] if isinstance(normed, tuple) else normed
                logits = model.compute_logits(normed)
                if logits is None:  # tensor parallel: the vocabulary was gathered on rank 0
                    continue
                probs = torch.softmax(logits.float(), dim=-1)
                values, indices = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
                out[key] = {
                    "positions": where,
                    "ids": indices.cpu().tolist(),
                    "probs": values.cpu().tolist(),
                }
        return out


def _pipeline_buffers(runner: Any) -> None:
    """A later pipeline stage receives the previous stage's hidden states in buffers vLLM
    allocates during its warm-up forward, which vLLM's CPU worker skips in eager mode (the
    hooked backend's); without them the stage's first step fails. Allocated here instead, once,
    before any request."""
    from vllm.distributed import get_pp_group

    if get_pp_group().is_first_rank or getattr(runner, "intermediate_tensors", 0) is not None:
        return
    runner.intermediate_tensors = runner.model.make_empty_intermediate_tensors(
        batch_size=runner.max_num_tokens, dtype=runner.model_config.dtype, device=runner.device
    )


def _seen_after(phase: str, replaced: Any, args: Any, kwargs: Any) -> tuple[Any, Any, Any]:
    """What a site's reader sees once `replaced` (a site add's return value) is in place."""
    if phase == "post":
        return args, kwargs, replaced
    new_args, new_kwargs = replaced
    return new_args, new_kwargs, None


def _non_finite(key: str, write: _Write, written: torch.Tensor) -> InterpError:
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


def _local(write: _Write, width: int) -> _Write:
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
    if full != width * ranks or write.op != "add":
        message = f"a {full}-wide {write.op} write cannot apply to a {width}-wide site"
        raise ValueError(message)
    rank = get_tensor_model_parallel_rank()
    return dataclasses.replace(write, vector=write.vector[rank * width : (rank + 1) * width])


def _by_position(chunks: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[list[int], Any]:
    """Rows in position order, one per position; a later row of a position wins (recompute)."""
    where = torch.cat([w for w, _ in chunks]).tolist()
    rows = torch.cat([r for _, r in chunks])
    if all(b > a for a, b in itertools.pairwise(where)):
        return where, rows
    latest = {position: index for index, position in enumerate(where)}
    order = sorted(latest)
    pick = torch.tensor([latest[p] for p in order], dtype=torch.long, device=rows.device)
    return order, rows.index_select(0, pick)
