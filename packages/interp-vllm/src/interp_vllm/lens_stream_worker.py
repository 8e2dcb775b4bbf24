"""The lens over a generation inside the vLLM workers: top-k only, as the rows arrive.

The worker half of `interp_vllm.lens_stream`. A lens request keeps its residual rows on the
device (`Request.lens_rows`, filled by the hooked sites or the static tier's traced taps after
every step); `interp_lens_poll(rid, options)` takes the rows held since the last poll, decodes
them here through each lens (a fitted set's `J_bar` first, then the final norm and
`compute_logits`, which apply the model's multiplier and softcap), and returns only the top-k
ids and probabilities per layer. The request itself stays until `interp_collect` or
`interp_drop`, so its refusals are still reported at the end.

The word mask (`[vocab]` booleans) travels once, with the first poll that carries it, and is
kept for the request until a poll marked `final`. On a tensor-parallel rank other than the one
`compute_logits` gathers the vocabulary on, the rows are dropped and None is answered.
"""

from __future__ import annotations

from typing import Any

import torch

from interp_torch.lens import masked_top_tokens, transport
from interp_vllm.row_order import by_position
from interp_vllm.tensor_wire import decode_tensor
from interp_vllm.worker_state import HoldsWorkerState

__all__ = ["LensStreamWorkerMixin"]


class LensStreamWorkerMixin(HoldsWorkerState):
    """`interp_lens_poll`, called by name over `collective_rpc`."""

    # rid -> the request's word mask on this worker's device (until its final poll)
    _interp_lens_masks: dict[str, torch.Tensor] | None = None

    def _interp_mask_for(self, rid: str, options: dict[str, Any]) -> torch.Tensor | None:
        if self._interp_lens_masks is None:
            self._interp_lens_masks = {}
        masks = self._interp_lens_masks
        if options.get("mask") is not None:
            masks[rid] = decode_tensor(*options["mask"]).to(torch.bool)
        mask = masks.get(rid)
        if options.get("final"):
            masks.pop(rid, None)
        return mask

    def interp_lens_poll(self, rid: str, options: dict[str, Any]) -> dict[str, Any] | None:
        """`_interp_lens_poll`, answering a failure as `{"error": ...}`: an RPC that raised would
        stop the engine for every request in flight."""
        try:
            return self._interp_lens_poll(rid, options)
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _interp_lens_poll(self, rid: str, options: dict[str, Any]) -> dict[str, Any] | None:
        """The top-k of request `rid`'s lens rows held since the last poll.

        `options`: `top_k`, `lenses` (per lens its site keys in layer order and the fitted set's
        name or None), `mask` (an encoded `[vocab]` bool tensor, or None), `skip_before` (rows
        of earlier positions are dropped undecoded) and `final`. Answers
        `{"positions": [...], "lenses": [{"ids": [n_layers][n][k], "probs": ...}]}`.
        """
        mask = self._interp_mask_for(rid, options)
        request = self._interp.requests.get(rid)
        if request is None or request.refusal is not None or not request.lens_rows:
            return {"positions": [], "lenses": []}
        held = {key: by_position(chunks) for key, chunks in request.lens_rows.items()}
        request.lens_rows = {}
        first = int(options.get("skip_before", 0))
        if first:  # rows before skip_before are never decoded nor sent
            for key, (where, rows) in list(held.items()):
                keep = [n for n, position in enumerate(where) if position >= first]
                pick = torch.tensor(keep, dtype=torch.long, device=rows.device)
                held[key] = ([where[n] for n in keep], rows.index_select(0, pick))
            if not next(iter(held.values()))[0]:
                return {"positions": [], "lenses": []}
        if "final_norm" not in self._interp.sites:  # not the last pipeline stage
            return None
        where = next(iter(held.values()))[0]
        if any(positions != where for positions, _ in held.values()):
            # Every layer runs on the same tokens of a step; rows that disagree are a bug here.
            message = f"lens rows of request {rid} cover different positions per layer"
            raise RuntimeError(message)
        model = self.model_runner.model  # type: ignore[attr-defined]
        norm = self._interp.sites["final_norm"].module
        lenses = []
        # As for the prompt lens: the step plan is parked, so no hook of this worker acts on the
        # rows while they pass through the final norm and the head.
        with self._interp_parked(), torch.no_grad():  # type: ignore[attr-defined]
            for lens in options["lenses"]:
                keys, name = lens["keys"], lens.get("set")
                table = None if name is None else self._interp.lens_sets.get(name)
                if name is not None and table is None:
                    message = f"no lens set {name!r} is held in this worker; install it again"
                    raise ValueError(message)
                blocks = []
                for key in keys:
                    rows = held[key][1]
                    if table is not None:
                        rows = transport(rows, table[int(key.rpartition(".")[2])])
                    blocks.append(rows)
                like = next(iter(norm.parameters()), blocks[0])
                stacked = torch.cat(blocks).to(device=like.device, dtype=like.dtype)
                normed = norm(stacked.contiguous())
                normed = normed[0] if isinstance(normed, tuple) else normed
                logits = model.compute_logits(normed)
                if logits is None:  # tensor parallel: the vocabulary was gathered on rank 0
                    return None
                top = masked_top_tokens(logits, int(options["top_k"]), mask)
                shape = (len(keys), len(where), top.ids.shape[-1])
                lenses.append(
                    {
                        "ids": top.ids.reshape(shape).cpu().tolist(),
                        "probs": top.probs.reshape(shape).cpu().tolist(),
                    }
                )
        return {"positions": where, "lenses": lenses}
