"""The eager model's weight read-outs, probes and fitted lenses, kept out of `model.py`.

`unembed_rows` and `embed_rows` index the live `lm_head` and token-embedding weights (`W_U` is the
tied embedding on a family without its own head, because then `lm_head.weight` is that tensor).
`project` captures each set's point in one forward and projects there (`interp_torch.lens`).
Fitted lenses are held on the model's device under their names (`set_lens_jacobians`); the logit
lens reads them through `fitted_rows`, which applies `J_bar` to a layer's residual before the
model's own final norm and unembedding decode it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_core.readouts import (
    LensSpec,
    check_direction_sets,
    check_fitted_layers,
    check_token_ids,
)
from interp_torch.lens import apply_directions, lens_nbytes, read_lens, transport

__all__ = ["EagerReadouts"]


class EagerReadouts:
    """Mixed into `EagerModel`; relies on its `tree`, `_facts`, `_serving` and `capture`."""

    def _lens_table(self) -> dict[str, dict[int, torch.Tensor]]:
        table = getattr(self, "_lens_sets", None)
        if table is None:
            table = {}
            self._lens_sets = table
        return table

    def _weight_rows(self, module: Any, token_ids: Any, method: str) -> torch.Tensor:
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
            message = f"{method}: this model's module has no [vocab, d_model] weight to read"
            raise CapabilityUnsupported.build(message, None, "read the weights from hf_model")
        ids = check_token_ids(token_ids, int(weight.shape[0]), method)
        index = torch.tensor(ids, dtype=torch.long, device=weight.device)
        return weight.detach().index_select(0, index).clone()

    async def unembed_rows(self, token_ids: Sequence[int]) -> torch.Tensor:
        """`W_U[token_ids]`: the `[k, d_model]` rows of the unembedding (lm_head's weight)."""
        with self._serving():  # type: ignore[attr-defined]
            return self._weight_rows(self.tree.lm_head, token_ids, "unembed_rows")  # type: ignore[attr-defined]

    async def embed_rows(self, token_ids: Sequence[int]) -> torch.Tensor:
        """`W_E[token_ids]`: the `[k, d_model]` rows of the token embedding, as stored (before
        any embedding multiplier or position embedding the forward adds)."""
        with self._serving():  # type: ignore[attr-defined]
            return self._weight_rows(self.tree.embed, token_ids, "embed_rows")  # type: ignore[attr-defined]

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[torch.Tensor]:
        """Per `DirectionSet`, `[batch, seq, k]` float32: the rows of its point dotted with its
        vectors, plus its bias, through its nonlinearity; one capture of every set's point."""
        sets = check_direction_sets(directions, self._facts)  # type: ignore[attr-defined]
        points = list(dict.fromkeys(s.point for s in sets))
        cache = await self.capture(tokens, points, steering=steering)  # type: ignore[attr-defined]
        return [
            apply_directions(cache[s.point], _tensor(s.vectors), _tensor(s.bias), s.nonlinearity)
            for s in sets
        ]

    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens (a path in any of the three layouts, or `{layer: J_bar}`) on the
        model's device as the set `name`; None removes that set. Returns the bytes it holds."""
        table = self._lens_table()
        if jacobians is None:
            table.pop(name, None)
            return 0
        checked = read_lens(jacobians, self._facts)  # type: ignore[attr-defined]
        with self._serving():  # type: ignore[attr-defined]
            device = _device_of(self.tree.final_norm)  # type: ignore[attr-defined]
        table[name] = {layer: m.to(device) for layer, m in checked.items()}
        return lens_nbytes(table[name])

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted-lens sets: name -> the layers it holds a `J_bar` for."""
        return {name: sorted(held) for name, held in self._lens_table().items()}

    def check_fitted(self, spec: LensSpec | None, layers: Sequence[int]) -> None:
        if spec is None:
            return
        if self._facts.n_streams > 1:  # type: ignore[attr-defined]
            message = "a fitted lens on a trunk of several residual streams"
            why = "its J_bar maps one d_model-wide residual, and resid_post here is a stream stack"
            raise CapabilityUnsupported.build(message, why, "use the plain logit lens")
        check_fitted_layers(spec, self.lens_sets(), layers)

    def fitted_rows(
        self, spec: LensSpec | None, address: Address, rows: torch.Tensor
    ) -> torch.Tensor:
        """`rows` through the set's `J_bar` for `address`'s layer (unchanged without a spec)."""
        if spec is None:
            return rows
        matrix = self._lens_table()[spec.jacobian_set][int(address.layer or 0)]
        return transport(rows, matrix)


def _device_of(module: Any) -> torch.device:
    """Where the decode runs (the final norm's device, under a multi-GPU device_map too)."""
    for parameter in module.parameters():
        return parameter.device
    return torch.device("cpu")


def _tensor(value: Any) -> torch.Tensor | None:
    if value is None or isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(value)
