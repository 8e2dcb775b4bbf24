"""Feature dashboards reduced inside the vLLM workers: the client side of
`interp_vllm.reduce_worker`.

`VLLMModel.worker_reductions` is a `WorkerReductions`, and the harvest's dashboards job uses it
when it finds it (`interp_harvest.dashboards`, `in_workers`): each pass is a session in the
workers, every batch of contexts is prefilled with a capture of the SAEs' sites and reduced
there in one RPC, and the reductions come back once, at the end of the pass. What the workers
reduce is `interp_sae.dashboard_reduce.FeaturePasses`, the class the job runs in its own
process on other backends, so both give the same dashboards.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_vllm.calls import ModelCalls
from interp_vllm.keys import address_key
from interp_vllm.support import INSTEAD

__all__ = ["WorkerReductions"]


class WorkerReductions:
    """A collaborator of `VLLMModel`: its request path (`ModelCalls`) carries the batches."""

    def __init__(self, calls: ModelCalls) -> None:
        self._calls = calls
        self._sessions: dict[str, list[str]] = {}  # session -> the site key of each SAE

    async def open(
        self,
        saes: Sequence[dict[str, Any]],
        *,
        context_size: int,
        passes: dict[str, int],
        ignored: Sequence[int],
        phase: int,
        states: Sequence[dict[str, dict[str, Any]]],
    ) -> str:
        """Start pass `phase` (0 or 1) for `saes` (each a dict with `path`, `address` and
        optionally `write_address`, as `worker_features` takes them) over contexts of
        `context_size` tokens; `passes` are `FeaturePasses`' settings, `states[i]` the
        `FeaturePasses.state` parts SAE i starts from. Returns the session's id."""
        from interp_vllm.tensor_wire import encode_tensor
        from interp_vllm.wire import raise_refusals

        calls = self._calls
        calls.require_hooks("worker_reductions")
        if phase not in (0, 1) or len(states) != len(saes):
            message = f"phase={phase!r} with {len(states)} states for {len(saes)} SAEs"
            raise InvalidArgument(message + ": pass phase 0 or 1 and one state per SAE")
        named = [{**sae, "name": f"{sae['path']}@{sae['address']}"} for sae in saes]
        await calls.rpc("interp_sae_load", named)
        addresses = calls.addresses([to_address(s["address"]) for s in named])
        keys = [address_key(a) for a in addresses]
        session = f"dashboards-{uuid.uuid4().hex}"
        spec = {
            "saes": [{"name": s["name"], "key": k} for s, k in zip(named, keys, strict=True)],
            "context_size": int(context_size),
            "passes": dict(passes),
            "ignored": [int(i) for i in ignored],
            "phase": phase,
            "states": [
                {
                    part: {k: encode_tensor(v) for k, v in tensors.items()}
                    for part, tensors in state.items()
                }
                for state in states
            ],
        }
        answers = await calls.rpc("interp_reduce_open", session, spec)
        try:
            raise_refusals(answers)
        except CapabilityUnsupported:
            await calls.rpc("interp_reduce_close", session)
            raise
        held = {index for answer in answers for index in answer["held"]}
        if held != set(range(len(saes))):
            await calls.rpc("interp_reduce_close", session)
            missing = ", ".join(named[i]["name"] for i in range(len(saes)) if i not in held)
            msg = f"no vLLM worker serves the site of {missing}"
            raise CapabilityUnsupported.build(msg, None, INSTEAD)
        self._sessions[session] = keys
        return session

    async def add(self, session: str, tokens: Any, first_context: int) -> None:
        """Prefill the contexts `tokens [batch, context]` (the corpus's contexts `first_context`
        onward) and reduce them in the workers."""
        from interp_vllm.wire import finished, raise_refusals, submission

        calls = self._calls
        keys = self._keys(session)
        prompts = calls.prompts(tokens)
        engine = await calls.ready()
        spec = {"capture": sorted(set(keys)), "steer": []}
        submitted = []
        for prompt in prompts:
            params = calls.sampling(1, 0.0)  # one each: a submission writes its extra_args
            submitted.append((*submission(prompt, params, spec), params))
        runs = await asyncio.gather(
            *(
                finished(engine, request, params, rid, interpreted=True)
                for rid, request, params in submitted
            ),
            return_exceptions=True,
        )
        rids = [rid for rid, _, _ in submitted]
        failed = next((r for r in runs if isinstance(r, BaseException)), None)
        if failed is not None:
            # The requests that did finish hold rows no batch will take.
            await asyncio.shield(asyncio.gather(*(calls.rpc("interp_drop", r) for r in rids)))
            raise failed
        raise_refusals(
            await calls.rpc("interp_reduce_batch", session, rids, int(first_context), prompts)
        )

    async def state(self, session: str, part: str) -> list[dict[str, Any]]:
        """Each SAE's `FeaturePasses.state(part)`, from the worker that holds it."""
        from interp_vllm.row_transfer import client_route, unpack_rows
        from interp_vllm.wire import raise_refusals

        keys = self._keys(session)
        engine = await self._calls.ready()
        answers = await self._calls.rpc("interp_reduce_state", session, part, client_route(engine))
        raise_refusals(answers)
        found: dict[int, dict[str, Any]] = {}
        for answer in answers:
            tensors = unpack_rows(answer)  # read (and its file removed) even when not needed
            for index in answer["held"]:
                prefix = f"{index}."
                found.setdefault(
                    index,
                    {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)},
                )
        if set(found) != set(range(len(keys))):
            msg = f"the vLLM workers no longer hold dashboards session {session!r}"
            raise CapabilityUnsupported.build(msg, "the engine may have restarted", INSTEAD)
        return [found[i] for i in range(len(keys))]

    async def close(self, session: str) -> None:
        """Forget the session in every worker (whatever it held)."""
        self._sessions.pop(session, None)
        await self._calls.rpc("interp_reduce_close", session)

    async def sessions(self) -> list[str]:
        """The sessions any worker still holds (none once every job has closed its own)."""
        answers = await self._calls.rpc("interp_reduce_sessions")
        return sorted({session for answer in answers for session in answer})

    def _keys(self, session: str) -> list[str]:
        keys = self._sessions.get(session)
        if keys is None:
            message = f"no dashboards session {session!r} is open on this model; open() one"
            raise InvalidArgument(message)
        return keys
