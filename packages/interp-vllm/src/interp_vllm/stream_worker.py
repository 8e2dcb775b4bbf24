"""How does a vLLM worker hand out a running request's captured rows before it finishes?

`interp_drain(rid, lens, route)` answers exactly as `interp_collect` does (rows, positions,
errors, a refusal) but keeps the request: it hands over the rows held so far and forgets only
those, so the next drain, or the final `interp_collect`, brings the rows computed since. The
client calls it as each engine output of a streamed capture arrives
(`interp_vllm.capture_stream`). A request this worker has not seen yet (its first forward has
not run here) answers with no rows.
"""

from __future__ import annotations

from typing import Any

from interp_vllm.row_order import by_position
from interp_vllm.row_transfer import pack_rows
from interp_vllm.worker_state import HoldsWorkerState

__all__ = ["StreamWorkerMixin"]


class StreamWorkerMixin(HoldsWorkerState):
    def interp_drain(
        self, rid: str, lens: dict[str, Any] | None = None, route: dict[str, Any] | None = None
    ) -> dict[str, Any]:

        empty = {"captured": {}, "positions": {}, "lens": {}, "features": {}}
        request = self._interp.requests.get(rid)
        if request is None:
            return {**empty, "errors": [], "seen": False}
        if request.refusal is not None:
            return {**empty, "errors": list(request.errors), "refusal": request.refusal}
        held = request.take_rows()
        captured: dict[str, Any] = {}
        positions: dict[str, list[int]] = {}
        for key, chunks in held.items():
            positions[key], captured[key] = by_position(chunks)
        return {
            **empty,
            **pack_rows(captured, route),
            "positions": positions,
            "errors": list(request.errors),
            "seen": True,
        }
