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
from collections.abc import Callable, Iterator
from typing import Any

import torch

from interp_core.errors import (
    CapabilityUnsupported,
    InvalidArgument,
)
from interp_core.family_conventions import conventions_for
from interp_torch.steering import compute_dtype
from interp_vllm.keys import site_key
from interp_vllm.lens_stream_worker import LensStreamWorkerMixin
from interp_vllm.readouts_worker import ReadoutsWorkerMixin
from interp_vllm.reduce_worker import ReduceWorkerMixin
from interp_vllm.row_order import by_position as _by_position
from interp_vllm.row_order import picked as _picked
from interp_vllm.row_transfer import pack_rows
from interp_vllm.sae_worker import SAEWorkerMixin, collect_features
from interp_vllm.site_kinds import site_groups, watch_group
from interp_vllm.stream_worker import StreamWorkerMixin
from interp_vllm.tensor_wire import decode_tensor, encode_tensor
from interp_vllm.worker_state import (
    Request,
    Segment,
    Step,
    WorkerState,
    local_part,
    non_finite,
    parse_request,
)

__all__ = [
    "InterpWorkerExtension",
    "decode_tensor",
    "encode_tensor",
    "faithful_activations",
    "site_key",
]

SPEC_KEY = "interp"  # the extra_args entry carrying a request's interp spec
# The per-request RPCs `interp_collect_many` may batch (they answer alike).
_BATCHED = frozenset({"interp_collect", "interp_drain"})


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


class InterpWorkerExtension(
    SAEWorkerMixin,
    ReduceWorkerMixin,
    ReadoutsWorkerMixin,
    LensStreamWorkerMixin,
    StreamWorkerMixin,
):
    """Methods vLLM adds to its Worker; every one is called by name over `collective_rpc`.

    Their state is one `WorkerState` on the worker object, created by `interp_install`, so it
    persists between RPCs (its lifecycle: `interp_vllm.worker_state`).
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
        compiled = self._interp_compiled
        taps = None if compiled is None else compiled.taps
        failed = None if compiled is None else compiled.error
        if self._interp_state is None:
            if taps is None:
                faithful_activations(model, config)
                resolution = resolve_sites(model, config)
            else:
                resolution = compiled.resolution  # type: ignore[union-attr]
            self._interp_state = WorkerState(
                sites={site_key(n, layer): site for (n, layer), site in resolution.sites.items()},
                refused=dict(resolution.refused),
            )
            if taps is None and failed is None:
                self._interp_wrap_prepare(runner)
                self._interp.model_hook = model.register_forward_pre_hook(
                    self._interp_plan, with_kwargs=True
                )
        _pipeline_buffers(runner)
        if static is not None and taps is None:
            self._interp.static = set(static)
            self._interp_sync_hooks(self._interp.static)
        writable = sorted(k for k, s in self._interp.sites.items() if s.add is not None)
        refusals = {k: s.refusal for k, s in self._interp.sites.items() if s.refusal}
        return {
            "sites": sorted(self._interp.sites),
            "writable": writable,
            "write_refusals": refusals,
            "refused": self._interp.refused,
            "static_error": failed,
            "compiled_taps": None if taps is None else sorted(set(taps.reads) | set(taps.writes)),
        }

    def _interp_wrap_prepare(self, runner: Any) -> None:
        original = runner._prepare_inputs

        def prepare(scheduler_output: Any, num_scheduled_tokens: Any, *args: Any, **kw: Any) -> Any:
            try:
                counts = [int(n) for n in num_scheduled_tokens]
                self._interp.layout = (list(runner.input_batch.req_ids[: len(counts)]), counts)
            except Exception as exc:  # never let bookkeeping take the engine down
                self._interp.layout = None
                self._interp.orphan_errors.append(f"batch layout: {type(exc).__name__}: {exc}")
            return original(scheduler_output, num_scheduled_tokens, *args, **kw)

        runner._prepare_inputs = prepare

    # --- the step plan --------------------------------------------------------------------------
    def _interp_plan(self, module: Any, args: Any, kwargs: Any) -> None:
        self._interp.step = None
        segments: list[Segment] = []
        try:
            segments = self._interp_segments()
            step = self._interp_build_step(segments, args, kwargs) if segments else None
            needed = set(self._interp.static)
            if step is not None:
                needed.update(step.by_key)
                self._interp.step = step
            self._interp_sync_hooks(needed)
        except Exception as exc:  # never let a hook take the engine down
            self._interp.step = None
            message = f"step plan: {type(exc).__name__}: {exc}"
            if not segments:
                self._interp.orphan_errors.append(message)
            for segment in segments:  # the step ran without hooks for each of them
                segment.request.errors.append(message)

    def _interp_segments(self) -> list[Segment]:
        """The rows of this step's interpreted requests; a refused request has none."""
        layout = self._interp.layout
        if layout is None:
            return []
        runner = self.model_runner  # type: ignore[attr-defined]
        segments: list[Segment] = []
        start = 0
        for req_id, count in zip(*layout, strict=True):
            state = runner.requests.get(req_id)
            params = getattr(state, "sampling_params", None)
            extra = getattr(params, "extra_args", None) or {}
            spec = extra.get(SPEC_KEY)
            if spec is not None:
                request = self._interp_request(spec)
                if request is not None and request.refusal is None:
                    segments.append(Segment(request, start, start + count))
            start += count
        return segments

    def _interp_request(self, spec: Any) -> Request | None:
        """The state of the request carrying `spec`, read once; an unreadable spec refuses it."""
        rid = spec.get("id") if isinstance(spec, dict) else None
        if rid is None:
            self._interp.orphan_errors.append(f"a request spec without an id: {spec!r:.200}")
            return None
        request = self._interp.requests.get(str(rid))
        if request is not None:
            return request
        try:
            request = parse_request(spec)
        except Exception as exc:  # this request alone: the step runs for the others
            request = Request(rid=str(rid), capture=set(), writes={}, lens=set())
            error = InvalidArgument.build(
                "the vLLM workers could not read this request's interp spec",
                f"{type(exc).__name__}: {exc}",
                "the client checks every value before sending; report this as a bug",
            )
            request.refuse(error)
        self._interp.requests[request.rid] = request
        return request

    def _interp_build_step(self, segments: list[Segment], args: Any, kwargs: Any) -> Step | None:
        positions = kwargs.get("positions")
        if positions is None:
            positions = args[1]
        by_key: dict[str, list[Segment]] = {}
        for segment in segments:
            for key in segment.request.keys():
                by_key.setdefault(key, []).append(segment)
        # A copy: the runner refills its positions buffer in place for the next step.
        where = positions.detach().to("cpu", torch.long, copy=True)
        return Step(where, segments, by_key)

    def _interp_sync_hooks(self, needed: set[str]) -> None:
        """Hook exactly the (module, phase) groups that some needed site key lives on."""
        groups = site_groups(self._interp.sites, needed)
        for gid in list(self._interp.hooks):
            if gid not in groups:
                self._interp.hooks.pop(gid)[0].remove()
        for gid, (module, phase, keys) in groups.items():
            held = self._interp.hooks.get(gid)
            if held is not None:
                held[1][:] = keys
                continue
            handle = watch_group(module, phase, self._interp_hook(keys, phase))
            self._interp.hooks[gid] = (handle, keys)

    # --- the hooks ------------------------------------------------------------------------------
    def _interp_hook(self, keys: list[str], phase: str) -> Callable[[Any, Any, Any], Any]:
        """The body of the hook on one (module, phase) group (`watch_group` registers it)."""

        def body(args: Any, kwargs: Any, out: Any) -> Any:
            step = self._interp.step
            if step is None:
                return None
            try:
                return self._interp_visit(step, keys, phase, args, kwargs, out)
            except Exception as exc:  # never let a hook take the engine down
                self._interp_fail(step, keys, exc)
                return None

        return body

    def _interp_fail(self, step: Step, keys: list[str], exc: BaseException) -> None:
        message = f"{', '.join(keys)}: {type(exc).__name__}: {exc}"
        touched = {id(s.request): s.request for k in keys for s in step.by_key.get(k, ())}
        for request in touched.values():
            request.errors.append(message)

    def _interp_visit(
        self, step: Step, keys: list[str], phase: str, args: Any, kwargs: Any, out: Any
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
            site = self._interp.sites[key]
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
            value = self._interp.sites[key].read(args, kwargs, out)
            self._interp_keep_step(step, key, wanted, value)
        if not changed:
            return None
        return out if phase == "post" else (args, kwargs)

    def _interp_keep_step(
        self, step: Step, key: str, readers: list[Segment], value: torch.Tensor
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
        # capture(rows=): a request's other positions are dropped here, on the device, so
        # only the rows it asked for are copied out.
        picks = {id(s): s.request.row_pick(step.positions[s.start : s.stop]) for s in capturing}
        if capturing:
            chosen = [_picked(value[s.start : s.stop], picks[id(s)]) for s in capturing]
            host = torch.cat(chosen).detach().to("cpu")
            parts = host.split([int(c.shape[0]) for c in chosen])
            copies = {id(s): part for s, part in zip(capturing, parts, strict=True)}
        for segment in readers:
            part = slice(segment.start, segment.stop)
            request, rows, where = segment.request, value[part], step.positions[part]
            request.keep(key, where, rows, copies.get(id(segment)), picks.get(id(segment)))
            wanted = request.features.get(key)
            if wanted:
                encoded = self.interp_sae_encode_rows(wanted, rows)
                request.feature_rows.setdefault(key, []).append((where.clone(), encoded))

    def _interp_deltas(
        self, step: Step, key: str, segments: list[Segment], value: torch.Tensor
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
                    delta[part] += local_part(write, flat.shape[-1]).delta(current, where)
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
        segments: list[Segment],
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
            segment.request.refuse(non_finite(key, segment.request.writes[key][-1], written))
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
        request = self._interp.requests.pop(rid, None)
        orphans, self._interp.orphan_errors = self._interp.orphan_errors, []
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
        for key, chunks in request.take_rows().items():
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

    def interp_collect_many(self, method: str, calls: list[list[Any]]) -> list[dict[str, Any]]:
        """`method` ("interp_collect" or "interp_drain") for each of `calls` (its arguments), in
        one RPC: requests that finish in one step are collected in one round trip through the
        engine core instead of one each (`interp_vllm.collect_batch`).

        A request whose collection raises fails alone: its answer carries the error, as a hook
        failure's would, and the others' answers are whole (a raised exception would take the
        engine down with every request in it)."""
        if method not in _BATCHED:
            message = f"interp_collect_many batches {sorted(_BATCHED)}, not {method!r}"
            raise ValueError(message)
        answers = []
        for args in calls:
            try:
                answers.append(getattr(self, method)(*args))
            except Exception as exc:
                self._interp.requests.pop(str(args[0]), None)
                failed = f"collect: {type(exc).__name__}: {exc}"
                answers.append(
                    {"captured": {}, "positions": {}, "lens": {}, "errors": [failed], "seen": True}
                )
        return answers

    def interp_drop(self, rid: str) -> None:
        """Forget request `rid` (aborted or failed) without sending anything back."""
        self._interp.requests.pop(rid, None)

    def interp_pending(self) -> list[str]:
        """Ids of requests whose rows are held here; a test proves none leaks."""
        return sorted(self._interp.requests)

    def interp_hooked(self) -> int:
        """How many (module, phase) hooks are installed right now."""
        return len(self._interp.hooks)

    def _interp_lens(self, request: Request, top_k: int) -> dict[str, Any]:
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
        step, self._interp.step = self._interp.step, None
        compiled = self._interp_compiled
        taps = None if compiled is None else compiled.taps
        if taps is not None:
            taps.armed = False
        try:
            yield
        finally:
            self._interp.step = step
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
        if "final_norm" not in self._interp.sites:  # not the last pipeline stage
            return None
        norm = self._interp.sites["final_norm"].module
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

    def _interp_lens_decode(self, request: Request, top_k: int) -> dict[str, Any]:
        model = self.model_runner.model  # type: ignore[attr-defined]
        if "final_norm" not in self._interp.sites:  # pipeline parallel: the client decodes
            return {}
        norm = self._interp.sites["final_norm"].module
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
