"""Where do captured activations live, and how are they looked up?

`ActivationCache` is the read-only mapping every `capture` returns. Keys are always `Address`
objects, but a lookup may be written the ways users write addresses: an `Address`, its string
form (`"resid_post.3"`), or a `(name, layer[, stream])` tuple. A miss is never silent: it raises
`PointNotCaptured` listing what was captured and how to capture the missing point, because a
`None` from a typo would surface much later as a confusing tensor error.

The cache holds tensors of whatever library the backend uses and never looks inside them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, cast

from interp_core.address import Address, AddressLike, to_address
from interp_core.errors import PointNotCaptured

__all__ = ["ActivationCache"]


class ActivationCache(Mapping[Address, Any]):
    """Captured tensors keyed by `Address`, plus the backend's raw `output` (or None).

    `get` is not `dict.get`: it takes point coordinates (`cache.get("resid_post", 3)`) and raises
    on a miss like indexing does.
    """

    __slots__ = ("_output", "_tensors")

    def __init__(self, tensors: Mapping[AddressLike, Any] | None = None, *, output: Any = None):
        coerced: dict[Address, Any] = {}
        spelled: dict[Address, Any] = {}
        for key, tensor in (tensors or {}).items():
            address = to_address(key)
            if address in coerced:
                message = (
                    f"two cache keys, {spelled[address]!r} and {key!r}, name the same address "
                    f"{address}: a capture yields one tensor per address, so a backend built this "
                    f"cache wrongly; key each tensor once"
                )
                raise ValueError(message)
            coerced[address] = tensor
            spelled[address] = key
        self._tensors = coerced
        self._output = output

    # --- mapping --------------------------------------------------------------------------------
    def __getitem__(self, key: AddressLike) -> Any:
        address = to_address(key)
        try:
            return self._tensors[address]
        except KeyError:
            raise self._miss(address) from None

    def __iter__(self) -> Iterator[Address]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def __contains__(self, key: object) -> bool:
        # A malformed key raises AddressError (with its "did you mean"), not a quiet False.
        return to_address(key) in self._tensors

    # --- conveniences ---------------------------------------------------------------------------
    def get(  # type: ignore[override]  # coordinates, not a default: see the class docstring
        self, name: AddressLike, layer: int | None = None, stream: int | None = None
    ) -> Any:
        """The tensor at `name` (a point name, or any address form when no coordinates follow)."""
        if layer is None and stream is None:
            return self[name]
        if not isinstance(name, str):
            message = (
                f"cache.get(name, layer, stream) takes a point name when coordinates are given, "
                f"got {type(name).__name__} {name!r}; pass cache[address] for an Address"
            )
            raise TypeError(message)
        return self[Address(name, layer, stream)]

    @property
    def addresses(self) -> tuple[Address, ...]:
        """Every captured address, in capture order."""
        return tuple(self._tensors)

    @property
    def tensors(self) -> Mapping[Address, Any]:
        """A read-only view of the underlying dict."""
        return MappingProxyType(self._tensors)

    @property
    def output(self) -> Any:
        """The backend's native forward output (HF `CausalLMOutput` on eager), or None."""
        return self._output

    def layers(self, name: str) -> tuple[int, ...]:
        """The layers at which point `name` was captured, ascending."""
        return tuple(
            sorted({a.layer for a in self._tensors if a.name == name and a.layer is not None})
        )

    def __repr__(self) -> str:
        parts = []
        for address, tensor in self._tensors.items():
            shape = getattr(tensor, "shape", None)
            parts.append(f"{address}: {tuple(shape)}" if shape is not None else str(address))
        return f"ActivationCache({{{', '.join(parts)}}})"

    # --- misses ---------------------------------------------------------------------------------
    def _miss(self, address: Address) -> PointNotCaptured:
        captured = [str(a) for a in self._tensors]
        what = f"{address} was not captured"
        if captured:
            why = "this cache holds " + ", ".join(captured)
            near = difflib.get_close_matches(str(address), captured, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}? " if near else ""
        else:
            why = "this cache is empty (the capture asked for no points)"
            hint = ""
        instead = f"{hint}To read it, include {str(address)!r} in the points you capture"
        return cast(PointNotCaptured, PointNotCaptured.build(what, why, instead))
