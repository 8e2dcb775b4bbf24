"""Shared plumbing of the interp-serve suite: one eager server per session, on loopback.

The session's server serves the tiny Llama on the eager backend with an API key; the suite's
in-process reference loads the same folder in this process. Tests that need other limits start
their own (module-scoped) server. Every server exits when this process does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import serve_helpers  # noqa: E402

FAMILY = "llama"


@pytest.fixture(scope="session")
def model_path() -> Path:
    from interp_testmodels.families import build_family

    return build_family(FAMILY)


@pytest.fixture(scope="session")
def server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("serve-logs")
    yield from serve_helpers.serving(model_path, logs, name="eager")


@pytest.fixture(scope="session")
def local(model_path: Path) -> Iterator[Any]:
    """The same model in-process on the eager backend: the reference remote results must equal."""
    from interp_core import load_model, sync

    model = load_model(str(model_path), backend="eager")
    sync.warmup(model)
    yield model
    sync.shutdown(model)


@pytest.fixture(scope="session")
def remote(server: Any) -> Iterator[Any]:
    from interp_core import load_model, sync

    model = load_model(server.url, backend="remote", api_key=serve_helpers.KEY)
    yield model
    sync.shutdown(model)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    from interp_testmodels.threads import one_torch_thread

    with one_torch_thread():
        yield
