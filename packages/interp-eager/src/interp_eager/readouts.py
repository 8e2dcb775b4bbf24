"""The eager model's weight read-outs, probes and fitted lenses, kept out of `model.py`.

`EagerReadouts` is a collaborator `EagerModel` holds and delegates its read-out methods to; it is
given what it uses explicitly (the facts, the module tree, the serving lock and `capture`), so it
never reaches into the model, and it owns the fitted-lens sets the model holds.

`unembed_rows` and `embed_rows` index the live `lm_head` and token-embedding weights (`W_U` is the
tied embedding on a family without its own head, because then `lm_head.weight` is that tensor).
`project` captures each set's point in one forward and projects there (`interp_torch.lens`).
Fitted lenses are held on the model's device under their names (`set_lens_jacobians`); the logit
lens reads them through `fitted_rows`, which applies `J_bar` to a layer's residual before the
model's own final norm and unembedding decode it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported
from interp_core.facts import ModelFacts
from interp_core.readouts import (
    LensSpec,
    check_direction_sets,
    check_fitted_layers,
    check_token_ids,
)
from interp_torch.lens import apply_directions, lens_nbytes, read_lens, transport

__all__ = ["EagerReadouts"]


class EagerReadouts:
    """The read-outs of one `EagerModel`: `tree()` is its module tree (loading the weights on
    first need), `serving()` holds the model for one call, `capture` is the model's own."""

    def __init__(
        self,
        facts: ModelFacts,
        *,
        tree: Callable[[], Any],
        serving: Callable[[], AbstractContextManager[None]],
        capture: Callable[..., Awaitable[Any]],
    ) -> None:
        self._facts = facts
        self._tree = tree
        self._serving = serving
        self._capture = capture
        self._lens_table: dict[str, dict[int, torch.Tensor]] = {}

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
        with self._serving():
            return self._weight_rows(self._tree().lm_head, token_ids, "unembed_rows")

    async def embed_rows(self, token_ids: Sequence[int]) -> torch.Tensor:
        """`W_E[token_ids]`: the `[k, d_model]` rows of the token embedding, as stored (before
        any embedding multiplier or position embedding the forward adds)."""
        with self._serving():
            return self._weight_rows(self._tree().embed, token_ids, "embed_rows")

    async def project(
        self, tokens: Any, directions: Sequence[Any], *, steering: Any = None
    ) -> list[torch.Tensor]:
        """Per `DirectionSet`, `[batch, seq, k]` float32: the rows of its point dotted with its
        vectors, plus its bias, through its nonlinearity; one capture of every set's point."""
        sets = check_direction_sets(directions, self._facts)
        points = list(dict.fromkeys(s.point for s in sets))
        cache = await self._capture(tokens, points, steering=steering)
        return [
            apply_directions(cache[s.point], _tensor(s.vectors), _tensor(s.bias), s.nonlinearity)
            for s in sets
        ]

    async def set_lens_jacobians(self, jacobians: Any, *, name: str = "default") -> int:
        """Hold a fitted lens (a path in any of the three layouts, or `{layer: J_bar}`) on the
        model's device as the set `name`; None removes that set. Returns the bytes it holds."""
        table = self._lens_table
        if jacobians is None:
            table.pop(name, None)
            return 0
        checked = read_lens(jacobians, self._facts)
        with self._serving():
            device = _device_of(self._tree().final_norm)
        table[name] = {layer: m.to(device) for layer, m in checked.items()}
        return lens_nbytes(table[name])

    def lens_sets(self) -> dict[str, list[int]]:
        """The installed fitted-lens sets: name -> the layers it holds a `J_bar` for."""
        return {name: sorted(held) for name, held in self._lens_table.items()}

    def check_fitted(self, spec: LensSpec | None, layers: Sequence[int]) -> None:
        """Refuse a fitted lens this model cannot decode (before any forward runs)."""
        if spec is None:
            return
        if self._facts.n_streams > 1:
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
        matrix = self._lens_table[spec.jacobian_set][int(address.layer or 0)]
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
