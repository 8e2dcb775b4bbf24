"""How does a backend package run the conformance kit against itself?

Enable this plugin and provide a model factory in the backend's `tests/conftest.py`:

    pytest_plugins = ["interp_core.testing.plugin"]

    @pytest.fixture(scope="session")
    def interp_model_factory():
        def factory(family: str):
            return load_model(build_tiny_model(family), backend="mybackend")
        return factory

then subclass the suite in a test module, naming the families to run on:

    from interp_core.testing import Conformance

    class TestMyBackendConformance(Conformance):
        interp_families = ("llama", "gpt2")

Families may instead come from the ini option `interp_families = llama gpt2`. They are read at
collection time because pytest parametrizes tests then, before any fixture exists; a fixture
cannot supply them (the `interp_families` fixture only reports the resolved list).

Each family's model is built once per session, warmed up, shared by every check, and shut down
at the end of the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from interp_core import sync

__all__ = ["interp_families", "interp_model", "interp_model_factory"]

_INI = "interp_families"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _INI, "model families the interp conformance kit runs on", type="args", default=[]
    )


def _families(metafunc: pytest.Metafunc) -> list[str]:
    declared = getattr(metafunc.cls, _INI, None) if metafunc.cls is not None else None
    if declared:
        return list(declared)
    return list(metafunc.config.getini(_INI))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "interp_family" not in metafunc.fixturenames:
        return
    families = _families(metafunc)
    if not families:
        # An empty parametrization would skip the whole suite quietly; refuse instead.
        where = metafunc.cls.__name__ if metafunc.cls is not None else metafunc.function.__name__
        message = (
            f"{where} runs the interp conformance kit but names no model families: pytest would "
            f"collect nothing and the backend would look conformant. Set interp_families = "
            f"('llama', ...) on the test class, or `interp_families = llama ...` in the ini file"
        )
        raise pytest.UsageError(message)
    metafunc.parametrize("interp_family", families, ids=[str(f) for f in families])


@pytest.fixture(scope="session")
def interp_model_factory() -> Callable[[str], Any]:
    """Overridden by the backend's conftest; this default explains what is missing."""
    message = (
        "the interp conformance kit needs an `interp_model_factory` fixture: define one in your "
        "conftest.py returning factory(family: str) -> InterpModel"
    )
    pytest.fail(message, pytrace=False)


@pytest.fixture
def interp_families(request: pytest.FixtureRequest) -> list[str]:
    """The families the suite runs on (from the test class or the ini option)."""
    declared = getattr(request.cls, _INI, None) if request.cls is not None else None
    return list(declared) if declared else list(request.config.getini(_INI))


@pytest.fixture(scope="session")
def _interp_models() -> Iterator[dict[Any, Any]]:
    built: dict[Any, Any] = {}
    yield built
    for model in built.values():
        sync.shutdown(model)


@pytest.fixture
def interp_model(
    interp_family: str,
    interp_model_factory: Callable[[str], Any],
    _interp_models: dict[Any, Any],
) -> Any:
    """The model of the current family, built by the backend's factory once per session.

    Keyed by factory too: a package may override `interp_model_factory` per test class (one
    class per backend it ships), and each backend's model must stay its own.
    """
    key = (interp_model_factory, interp_family)
    model = _interp_models.get(key)
    if model is None:
        model = interp_model_factory(interp_family)
        sync.warmup(model)
        _interp_models[key] = model
    return model
