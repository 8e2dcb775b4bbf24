"""Shared plumbing of the interp-serve suite: one eager server per session, on loopback.

The session's server serves the tiny Llama on the eager backend with an API key; the suite's
in-process reference loads the same folder in this process. Tests that need other limits start
their own (module-scoped) server. Every server exits when this process does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interp_core.testing.suite_imports import helpers_importable

helpers_importable(__file__)

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


# --- the Neuronpedia mount (test_neuronpedia*.py): one eager server with three SAEs -----------
@pytest.fixture(scope="session")
def np_sae_dirs(tmp_path_factory: pytest.TempPathFactory, local: Any) -> dict[str, Path]:
    from neuronpedia_helpers import write_sources

    width = local.facts.n_heads * local.facts.head_dim
    return write_sources(tmp_path_factory.mktemp("np-saes"), local.d_model, width)


@pytest.fixture(scope="session")
def np_saes(np_sae_dirs: dict[str, Path]) -> dict[str, Any]:
    from interp_sae import load_sae
    from neuronpedia_helpers import L0, L1, Z1

    paths = {L1: "relu", L0: "jr0", Z1: "z1"}
    return {name: load_sae(np_sae_dirs[key]) for name, key in paths.items()}


@pytest.fixture(scope="session")
def np_server(
    model_path: Path, np_sae_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    from neuronpedia_helpers import source_args, start_with_secret

    logs = tmp_path_factory.mktemp("np-logs")
    running = start_with_secret(model_path, logs, source_args(np_sae_dirs), name="neuronpedia")
    yield running
    running.stop()


@pytest.fixture(scope="session")
def np(np_server: Any) -> Iterator[Any]:
    """A client of the mount as the webapp is one: the secret header, no Bearer key."""
    import httpx
    from neuronpedia_helpers import SECRET

    url = f"{np_server.url}/neuronpedia"
    with httpx.Client(base_url=url, headers={"X-SECRET-KEY": SECRET}, timeout=60) as client:
        yield client


@pytest.fixture(scope="session")
def np_ours(np_server: Any) -> Iterator[Any]:
    """A client of our own API on the Neuronpedia test server."""
    with np_server.client() as client:
        yield client
