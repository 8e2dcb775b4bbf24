"""Feature dashboards reduced inside the vLLM workers: the activations never leave them.

The worker half of `interp_vllm.reduce_client`. A dashboards job over a corpus needs, per SAE
feature, totals, the top activating tokens with their windows, a histogram and interval samples
(`interp_sae.dashboard_reduce.FeaturePasses`): all bounded by the SAE's width, none by the
corpus. Here a worker holds those reductions for a session, encodes the rows each batch of
requests captured at the SAE's site with the SAE it loaded (`interp_vllm.sae_worker`), and
merges them in; the client fetches the reductions once per pass. A batch of contexts that
would cross the worker → engine core → client path as `[tokens, d_model]` rows crosses it as a
few hundred bytes.

Every public method is called by name over `collective_rpc`:

* `interp_reduce_open(session, spec)`: start a pass for the SAEs of `spec` (names already loaded
  by `interp_sae_load`, their site keys, the passes' settings, the ignored token ids, the pass,
  and the state to start from: a resumed pass's, the first pass's totals before the second).
  A worker holds an SAE only where it serves the SAE's site (a pipeline stage without that
  layer holds nothing for it); tensor-parallel ranks each hold a full copy of the same rows at
  a residual site and reduce identically.
* `interp_reduce_batch(session, rids, first_context, ids)`: take the rows of the finished
  requests `rids` (one context each, in context order), forget the requests as `interp_collect`
  does, and reduce them as one batch. Answers as `interp_collect` does (refusal, errors).
* `interp_reduce_state(session, part, route)`: the held SAEs' `FeaturePasses.state(part)`,
  through shared memory where the client shares it (`interp_vllm.row_transfer`).
* `interp_reduce_close(session)`: forget the session; `interp_reduce_sessions()` lists those
  open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from interp_vllm.row_order import by_position
from interp_vllm.row_transfer import pack_rows
from interp_vllm.sae_worker import interp_sae_module
from interp_vllm.tensor_wire import decode_tensor
from interp_vllm.worker_state import HoldsWorkerState

__all__ = ["ReduceWorkerMixin", "Session"]


@dataclass
class Session:
    """One pass of a dashboards job in this worker: per SAE it serves, (index in the job, SAE
    name, site key, passes)."""

    phase: int
    ignored: torch.Tensor
    held: list[tuple[int, str, str, Any]]


class ReduceWorkerMixin(HoldsWorkerState):
    """The dashboards reductions of one worker; its sessions are the worker state's
    `reductions` (session id -> `Session`)."""

    def interp_reduce_open(self, session: str, spec: dict[str, Any]) -> dict[str, Any]:
        # An RPC that raises takes the engine down with every request in it: answer instead.
        try:
            self._interp.reductions[session] = self._interp_session(spec)
        except Exception as exc:
            return {"held": [], "errors": [f"open: {type(exc).__name__}: {exc}"]}
        return {
            "held": [index for index, *_ in self._interp.reductions[session].held],
            "errors": [],
        }

    def _interp_session(self, spec: dict[str, Any]) -> Session:
        reduce = interp_sae_module("dashboard_reduce")
        sites = self._interp.sites  # type: ignore[attr-defined]
        held = []
        for index, item in enumerate(spec["saes"]):
            if item["key"] not in sites:
                continue  # another pipeline stage serves this SAE's layer
            sae = self._interp.saes[item["name"]]
            passes = reduce.FeaturePasses(
                int(sae.d_sae), int(spec["context_size"]), **spec["passes"]
            )
            for part, wire in spec["states"][index].items():
                passes.load({k: decode_tensor(*v) for k, v in wire.items()}, part)
            if spec["phase"] == 1 and "second" not in spec["states"][index]:
                passes.start_second()
            held.append((index, item["name"], item["key"], passes))
        ignored = torch.tensor(spec["ignored"], dtype=torch.long)
        return Session(int(spec["phase"]), ignored, held)

    def interp_reduce_batch(
        self, session: str, rids: list[str], first_context: int, ids: list[list[int]]
    ) -> dict[str, Any]:
        requests = self._interp.requests
        rows: list[dict[str, tuple[list[int], torch.Tensor]]] = []
        answer: dict[str, Any] = {"errors": [], "refusal": None}
        for rid in rids:
            request = requests.get(rid)
            taken = {}
            if request is not None and request.refusal is None:
                taken = {key: by_position(chunks) for key, chunks in request.take_rows().items()}
            rows.append(taken)
            collected = self.interp_collect(rid, None, None)  # type: ignore[attr-defined]
            answer["errors"] += collected["errors"]
            answer["refusal"] = answer["refusal"] or collected.get("refusal")
        state = self._interp.reductions.get(session)
        if state is None:
            answer["errors"].append(f"no dashboards session {session!r} is open in this worker")
        if answer["refusal"] or answer["errors"] or state is None:
            return answer
        try:
            self._interp_reduce(state, rows, first_context, torch.tensor(ids, dtype=torch.long))
        except Exception as exc:  # an RPC must answer: the client raises it as a library error
            answer["errors"].append(f"reduce: {type(exc).__name__}: {exc}")
        return answer

    def interp_reduce_state(
        self, session: str, part: str, route: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        state = self._interp.reductions.get(session)
        if state is None:
            return {"held": [], "captured": {}, "errors": []}
        try:
            tensors = {
                f"{index}.{name}": tensor
                for index, _, _, passes in state.held
                for name, tensor in passes.state(part).items()
            }
            packed = pack_rows(tensors, route)
        except Exception as exc:
            return {"held": [], "captured": {}, "errors": [f"state: {type(exc).__name__}: {exc}"]}
        return {"held": [index for index, *_ in state.held], **packed, "errors": []}

    def interp_reduce_close(self, session: str) -> None:
        self._interp.reductions.pop(session, None)

    def interp_reduce_sessions(self) -> list[str]:
        """The sessions open here; a test proves none is left behind."""
        return sorted(self._interp.reductions)

    def _interp_reduce(
        self,
        state: Session,
        rows: list[dict[str, tuple[list[int], torch.Tensor]]],
        first_context: int,
        ids: torch.Tensor,
    ) -> None:
        """Encode each held SAE's rows of the batch and merge them into its passes."""
        encode_batch = interp_sae_module("dashboard_reduce").encode_batch
        context = ids.shape[1]
        for _, name, key, passes in state.held:
            blocks = []
            for taken in rows:
                where, block = taken.get(key, ([], None))
                if block is None or list(where) != list(range(context)):
                    message = (
                        f"the worker holds positions {list(where)[:4]}... of {key}, not the "
                        f"{context} positions of a whole context"
                    )
                    raise ValueError(message)
                blocks.append(block)
            sae = self._interp.saes[name]
            acts, keep = encode_batch(sae, torch.stack(blocks), ids, state.ignored)
            passes.add(state.phase, acts, ids, keep, first_context)
