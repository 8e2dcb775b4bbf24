"""The `eager` entry in the `interp.backends` registry.

Registered by this package's pyproject exactly as a third-party backend would be. Constructing
`EagerBackend` is free (no torch import); `probe()` checks that torch and transformers can be
imported without importing them; `load()` returns a lazily loading `EagerModel`.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from interp_core.address import to_address
from interp_core.backend_keywords import check_backend_keywords
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts
from interp_core.points import absence_reason
from interp_core.results import Support

__all__ = ["EagerBackend"]


class EagerBackend:
    """HF transformers in-process: every standardized point, exact."""

    name: ClassVar[str] = "eager"

    def probe(self) -> str | None:
        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            return (
                f"the eager backend needs {' and '.join(missing)}, which cannot be imported here; "
                f"pip install interpoint-eager"
            )
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        try:
            address = to_address(point)
        except InterpError as error:
            return Support.no(str(error))
        if address.is_path:
            return Support.yes()
        reason = absence_reason(address.name, facts, address.layer, address.stream)
        return Support.no(reason) if reason else Support.yes()

    def supports_architecture(self, architecture: str) -> bool:
        return True  # anything transformers can load; unsupported points are refused per point

    def load(self, model_id: str, **kwargs: Any) -> Any:
        check_backend_keywords(self.name, kwargs)  # a misplaced keyword names its backend
        from interp_eager.model import EagerModel

        return EagerModel(model_id, **kwargs)
