"""SAEs inside the vLLM workers: loaded once, encoded next to the capture, top-k sent back.

A feature request on vLLM should not move activations: `[rows, d_model]` floats cross from the
worker to the engine and on to the client, where most of them are thrown away after the SAE
keeps k features per token. Here the worker holds the SAEs (loaded once, by name, over
`collective_rpc`; never sent with a request) and encodes the rows a request captured at an SAE's
site as the forward reads them, keeping only `k` indices (int32) and values (float32) per row.

The methods are written as a mixin of the worker extension (`interp_vllm.worker`); every public
one is called by name over `collective_rpc`, as the extension's own methods are. Wiring it into
the worker takes three lines there (kept out of this module so that the worker stays the one
owner of its request state); the SAEs themselves are part of the worker's one state
(`interp_vllm.worker_state.WorkerState.saes`):

    class InterpWorkerExtension(SAEWorkerMixin): ...            # the RPCs below
    # in the capture loop, beside request.rows for key in request.capture:
    request.feature_rows.setdefault(key, []).append((where, self.interp_sae_encode_rows(
        request.features[key], rows)))                          # features: key -> [(name, k)]
    # in interp_collect's answer:
    "features": collect_features(request.feature_rows),

The client decodes the answer with `decode_features`. interp-sae is needed in the workers'
environment only when SAEs are loaded, and imported only then: it is interp-vllm's `sae` extra
(interp-sae's tests use interp-vllm through a dependency group, which is no extra, so no cycle).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_vllm.worker_state import HoldsWorkerState

if TYPE_CHECKING:
    from interp_sae import SAE

__all__ = ["SAEWorkerMixin", "collect_features", "decode_features", "interp_sae_module"]

Chunk = tuple[torch.Tensor, dict[str, tuple[torch.Tensor, torch.Tensor]]]


def interp_sae_module(name: str | None = None) -> Any:
    """`interp_sae` (or its submodule `name`), imported in the worker when first needed."""
    import importlib

    try:
        return importlib.import_module("interp_sae" if name is None else f"interp_sae.{name}")
    except ImportError as exc:
        error = CapabilityUnsupported.build(
            "SAEs on vLLM need interp-sae in the workers' environment",
            "it is not installed there",
            "pip install 'interpoint-vllm[sae]' where the engine runs",
        )
        raise error from exc


class SAEWorkerMixin(HoldsWorkerState):
    """The SAE RPCs of one worker; its SAEs are the `saes` of its `WorkerState`."""

    def _interp_sae_table(self) -> dict[str, SAE]:
        return self._interp.saes

    def interp_sae_load(self, specs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Load SAEs by name onto this worker's device; a name already loaded from the same
        path is kept. Each spec: name, path, and optionally address, write_address,
        memory_budget_bytes (see `interp_sae.load_sae`). Returns what each one is."""
        table = self._interp_sae_table()
        device = getattr(self, "device", None) or "cpu"
        answers = []
        for spec in specs:
            name = str(spec["name"])
            current = table.get(name)
            if current is None or current.source != str(spec["path"]):
                table[name] = interp_sae_module().load_sae(
                    spec["path"],
                    address=spec.get("address"),
                    write_address=spec.get("write_address"),
                    device=device,
                    memory_budget_bytes=spec.get("memory_budget_bytes"),
                )
            sae = table[name]
            answers.append(
                {
                    "name": name,
                    "address": str(sae.address),
                    "write_address": str(sae.write_address),
                    "d_in": sae.d_in,
                    "d_sae": sae.d_sae,
                    "nbytes": sae.nbytes,
                }
            )
        return answers

    def interp_sae_unload(self, names: Sequence[str]) -> list[str]:
        """Drop SAEs by name; returns the names that were loaded."""
        table = self._interp_sae_table()
        return [name for name in names if table.pop(name, None) is not None]

    def interp_sae_encode_rows(
        self, wanted: Sequence[tuple[str, int]], rows: torch.Tensor
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Top-k (values float32, indices int32, on the CPU) of each named SAE for `rows`."""
        table = self._interp_sae_table()
        found: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        flat = rows.detach().reshape(rows.shape[0], -1)
        for name, k in wanted:
            sae = table.get(name)
            if sae is None:
                message = (
                    f"no SAE called {name!r} is loaded in this worker (loaded: "
                    f"{', '.join(sorted(table)) or 'none'}); load it first (interp_sae_load)"
                )
                raise InvalidArgument(message)
            top = sae.encode_topk(flat.to(sae.device), int(k))
            found[name] = (
                top.values.to("cpu", torch.float32),
                top.indices.to("cpu", torch.int32),
            )
        return found


def collect_features(chunks: dict[str, list[Chunk]]) -> dict[str, dict[str, Any]]:
    """A request's encoded chunks, per site key and SAE name, in position order, ready for RPC.

    `chunks[key]` holds (positions, {name: (values, indices)}) per forward step; a position seen
    twice (a recomputed prefix) keeps its latest rows, as the worker's captures do.
    """
    from interp_vllm.tensor_wire import encode_tensor

    answer: dict[str, dict[str, Any]] = {}
    for key, steps in chunks.items():
        where = torch.cat([w for w, _ in steps]).tolist()
        latest = {position: index for index, position in enumerate(where)}
        order = sorted(latest)
        ordered = all(b > a for a, b in itertools.pairwise(where))
        pick = None if ordered else torch.tensor([latest[p] for p in order], dtype=torch.long)
        per_name: dict[str, Any] = {}
        for name in steps[0][1]:
            values = torch.cat([step[name][0] for _, step in steps])
            indices = torch.cat([step[name][1] for _, step in steps])
            if pick is not None:
                values, indices = values.index_select(0, pick), indices.index_select(0, pick)
            per_name[name] = {
                "positions": order,
                "values": encode_tensor(values),
                "indices": encode_tensor(indices),
            }
        answer[key] = per_name
    return answer


def decode_features(answer: dict[str, dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The client side of `collect_features`: (key, name) -> positions, values, indices."""
    from interp_vllm.tensor_wire import decode_tensor

    return {
        (key, name): {
            "positions": part["positions"],
            "values": decode_tensor(*part["values"]),
            "indices": decode_tensor(*part["indices"]).to(torch.long),
        }
        for key, per_name in answer.items()
        for name, part in per_name.items()
    }
