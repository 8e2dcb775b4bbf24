"""Weight rows, probes and fitted lenses inside the vLLM workers: only small answers leave them.

The worker half of `interp_vllm.readouts_client`. Every public method is called by name over
`collective_rpc`, as the extension's own are; wiring it in is one base class of
`InterpWorkerExtension`.

* `interp_weight_rows(table, ids)`: rows of the unembedding (`"unembed"`) or of the token
  embedding (`"embed"`) this rank holds. vLLM shards both tables by vocabulary under tensor
  parallelism (`VocabParallelEmbedding`: rank r holds ids `[org_vocab_start_index,
  org_vocab_end_index)`), so each rank answers the ids it owns, with their indices, and the client
  puts the rows in order. A stage without the table (pipeline parallelism) answers None.
* `interp_set_lens(name, matrices)`: hold a fitted lens set on the last pipeline stage (the one
  with the final norm), a full copy on every tensor-parallel rank there (`J_bar` is not sharded).
* `interp_collect_fitted_lens(rid, top_k, name)`: `interp_collect` for a lens request whose rows
  go through the set's `J_bar` before the final norm and `compute_logits`; top-k only.
* `interp_fitted_decode_rows(blocks, top_k, name)`: the same decode for rows the client sends
  (the lens under pipeline parallelism, where the rows come from other stages).
* `interp_collect_projected(rid, sets)`: `interp_collect` for a capture request whose rows are
  dotted with each direction set here; only `[n, k]` values travel back. On a head- or
  neuron-sharded point each rank dots its column slice with the matching slice of the vectors,
  and the client sums the partial products (the bias and the ReLU are applied after the sum).
"""

from __future__ import annotations

from typing import Any

import torch

from interp_torch.lens import transport
from interp_vllm.module_tree import TOKEN_EMBEDDINGS, find_module
from interp_vllm.row_order import by_position
from interp_vllm.tensor_wire import decode_tensor, encode_tensor
from interp_vllm.worker_state import HoldsWorkerState

__all__ = ["ReadoutsWorkerMixin"]


def _trunk(model: Any) -> Any:
    return find_module(model, "model.decoder", "model", "transformer", "gpt_neox")


def _table(model: Any, which: str) -> Any:
    """The embedding-like module holding `which` ("unembed" or "embed") on this stage, or None."""
    from interp_vllm.sites import absent

    trunk = _trunk(model)
    embed = None if trunk is None else find_module(trunk, *TOKEN_EMBEDDINGS)
    module = embed
    if which == "unembed":
        head = find_module(model, "lm_head")
        # Tied and not a module of its own (Gemma-2 on vLLM): the embedding is the head.
        module = head if isinstance(getattr(head, "weight", None), torch.Tensor) else embed
    if (
        module is None
        or absent(module)
        or not isinstance(getattr(module, "weight", None), torch.Tensor)
    ):
        return None
    return module


def _owned(module: Any, ids: list[int]) -> tuple[list[int], list[int]]:
    """Which of `ids` this rank's shard holds: (their indices in `ids`, their local rows)."""
    shard = getattr(module, "shard_indices", None)
    start = int(getattr(shard, "org_vocab_start_index", 0)) if shard is not None else 0
    stop = getattr(shard, "org_vocab_end_index", None) if shard is not None else None
    stop = int(module.weight.shape[0]) if stop is None else int(stop)
    found = [(i, t - start) for i, t in enumerate(ids) if start <= t < stop]
    return [i for i, _ in found], [row for _, row in found]


class ReadoutsWorkerMixin(HoldsWorkerState):
    """Read-outs of one worker; the lens sets live in the worker state's `lens_sets`
    (name -> layer -> J)."""

    def _interp_lens_table(self) -> dict[str, dict[int, torch.Tensor]]:
        return self._interp.lens_sets

    def interp_weight_rows(self, which: str, ids: list[int]) -> dict[str, Any] | None:
        model = self.model_runner.model  # type: ignore[attr-defined]
        module = _table(model, which)
        if module is None:
            return None
        where, local = _owned(module, [int(t) for t in ids])
        index = torch.tensor(local, dtype=torch.long, device=module.weight.device)
        rows = module.weight.detach().index_select(0, index)
        return {"where": where, "rows": encode_tensor(rows)}

    def interp_set_lens(self, name: str, matrices: dict[str, Any] | None) -> dict[str, Any]:
        """Hold (or, with None, drop) the set `name`; returns the layers and bytes held here."""
        table = self._interp_lens_table()
        if matrices is None:
            table.pop(name, None)
            return {"held": False, "layers": [], "bytes": 0}
        if "final_norm" not in self._interp.sites:  # type: ignore[attr-defined]
            return {"held": False, "layers": [], "bytes": 0}  # not the last pipeline stage
        norm = self._interp.sites["final_norm"].module  # type: ignore[attr-defined]
        device = next(
            iter(norm.parameters()), next(iter(self.model_runner.model.parameters()))
        ).device  # type: ignore[attr-defined]
        held = {int(k): decode_tensor(*v).to(device) for k, v in matrices.items()}
        table[name] = held
        total = sum(m.numel() * m.element_size() for m in held.values())
        return {"held": True, "layers": sorted(held), "bytes": total}

    def _interp_fitted_top_k(
        self, blocks: list[tuple[int, torch.Tensor]], top_k: int, name: str
    ) -> list[dict[str, Any]] | None:
        """Per (layer, rows) block: the top-k of `decode(J_bar[layer] @ h)` for each row."""
        model = self.model_runner.model  # type: ignore[attr-defined]
        if "final_norm" not in self._interp.sites:  # type: ignore[attr-defined]
            return None
        norm = self._interp.sites["final_norm"].module  # type: ignore[attr-defined]
        lens = self._interp_lens_table().get(name)
        if lens is None:
            message = f"no lens set {name!r} is held in this worker; install it again"
            raise ValueError(message)
        out: list[dict[str, Any]] = []
        # As for the plain lens: the step plan is parked, so no hook of this worker touches rows.
        with self._interp_parked(), torch.no_grad():  # type: ignore[attr-defined]
            for layer, rows in blocks:
                like = next(iter(norm.parameters()), lens[layer])
                moved = transport(rows.to(like.device), lens[layer]).to(like.dtype)
                normed = norm(moved.contiguous())
                normed = normed[0] if isinstance(normed, tuple) else normed
                logits = model.compute_logits(normed)
                if logits is None:  # tensor parallel: the vocabulary was gathered on rank 0
                    return None
                probs = torch.softmax(logits.float(), dim=-1)
                values, indices = probs.topk(min(int(top_k), probs.shape[-1]), dim=-1)
                out.append({"ids": indices.cpu().tolist(), "probs": values.cpu().tolist()})
        return out

    def interp_fitted_decode_rows(
        self, blocks: list[tuple[int, Any]], top_k: int, name: str
    ) -> list[dict[str, Any]] | None:
        decoded = [(int(layer), decode_tensor(*rows)) for layer, rows in blocks]
        return self._interp_fitted_top_k(decoded, top_k, name)

    def interp_collect_fitted_lens(self, rid: str, top_k: int, name: str) -> dict[str, Any]:
        request = self._interp.requests.get(rid)  # type: ignore[attr-defined]
        held: dict[str, tuple[list[int], torch.Tensor]] = {}
        if request is not None and request.refusal is None:
            held = {key: by_position(chunks) for key, chunks in request.lens_rows.items()}
            request.lens_rows = {}
        answer = self.interp_collect(rid, None, None)  # type: ignore[attr-defined]
        if not held or answer.get("refusal") or answer["errors"]:
            return answer
        keys = sorted(held)
        try:
            blocks = [(int(key.rpartition(".")[2]), held[key][1]) for key in keys]
            decoded = self._interp_fitted_top_k(blocks, top_k, name)
        except Exception as exc:  # an RPC must answer: the client raises it as a library error
            answer["errors"].append(f"fitted lens: {type(exc).__name__}: {exc}")
            return answer
        if decoded is not None:
            answer["lens"] = {
                key: {"positions": held[key][0], **block}
                for key, block in zip(keys, decoded, strict=True)
            }
        return answer

    def interp_collect_projected(self, rid: str, sets: list[dict[str, Any]]) -> dict[str, Any]:
        request = self._interp.requests.get(rid)  # type: ignore[attr-defined]
        rows: dict[str, tuple[list[int], torch.Tensor]] = {}
        if request is not None and request.refusal is None:
            rows = {key: by_position(chunks) for key, chunks in request.take_rows().items()}
        answer = self.interp_collect(rid, None, None)  # type: ignore[attr-defined]
        answer["projected"] = {}
        if answer.get("refusal") or answer["errors"]:
            return answer
        try:
            answer["projected"] = _project(rows, sets)
        except Exception as exc:
            answer["errors"].append(f"project: {type(exc).__name__}: {exc}")
        return answer


def _project(
    rows: dict[str, tuple[list[int], torch.Tensor]], sets: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each set's dot products with the rows of its key: whole, or this rank's partial sum."""
    out: dict[str, Any] = {}
    for index, item in enumerate(sets):
        found = rows.get(item["key"])
        if found is None:
            continue  # another pipeline stage holds this point
        where, block = found
        vectors = decode_tensor(*item["vectors"]).to(torch.float32)
        flat = block.reshape(block.shape[0], -1).to(torch.float32)
        width, full = int(flat.shape[-1]), int(vectors.shape[-1])
        partial = width != full
        if partial:
            from vllm.distributed import (
                get_tensor_model_parallel_rank,
                get_tensor_model_parallel_world_size,
            )

            ranks, rank = get_tensor_model_parallel_world_size(), get_tensor_model_parallel_rank()
            if width * ranks != full:
                message = f"a {full}-wide direction cannot be read from a {width}-wide site"
                raise ValueError(message)
            vectors = vectors[:, rank * width : (rank + 1) * width]
        values = flat @ vectors.to(flat.device).T
        out[str(index)] = {
            "positions": where,
            "partial": partial,
            "values": encode_tensor(values.to("cpu")),
        }
    return out
