"""The interp-core conformance kit, run on the remote backend against an eager server.

The kit drives the model through the sync free functions; every call is HTTP to the session's
server (the tiny Llama on the eager backend), so this proves the wire keeps the protocol: shapes,
refusals with the core's classes and words, steering arithmetic, determinism, generation paths
and the lens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from interp_core.testing import Conformance, ReadoutConformance

pytest_plugins = ["interp_core.testing.plugin"]


@pytest.fixture(scope="session")
def interp_model_factory(server: Any) -> Callable[[str], Any]:
    from interp_core import load_model

    def factory(family: str) -> Any:
        assert family == "llama", "the session's server serves the tiny Llama"
        return load_model(server.url, backend="remote", api_key=server.keys[0])

    return factory


class TestRemoteConformance(Conformance):
    interp_families = ("llama",)


class TestRemoteReadoutConformance(ReadoutConformance):
    interp_families = ("llama",)
