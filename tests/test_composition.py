"""Is every backend's model composed of the shared core base and of collaborators it names?

Read from the classes and, for the vLLM collaborators and workers, from the source (an AST scan):

- Eager, vLLM, remote and the core's fake model derive `interp_core.model_base.ModelBase` and
  redefine none of what it holds (the identity block and the conveniences are written once).
- `VLLMModel` mixes nothing in: its collaborators (the static tier, the worker SAEs, decoding in
  the workers, the tokenizer conveniences, the read-outs in the workers) are objects it holds,
  each given a `ModelCalls`; none of them imports the model or touches a private member of it.
- The vLLM worker's state is one declared object: nothing in the worker modules probes an
  `_interp_*` attribute with getattr/hasattr.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from interp_core.model_base import ModelBase

ROOT = Path(__file__).resolve().parent.parent
VLLM = ROOT / "packages/interp-vllm/src/interp_vllm"
COLLABORATORS = (
    "static_client.py",
    "sae_client.py",
    "decoding.py",
    "tokens.py",
    "readouts_client.py",
    "lens_stream.py",
    "calls.py",
)
WORKER_MODULES = (
    "worker.py",
    "worker_state.py",
    "static_worker.py",
    "static_taps.py",
    "sae_worker.py",
    "readouts_worker.py",
    "lens_stream_worker.py",
)
SHARED = ("model_id", "facts", "n_layers", "d_model")  # the identity block
SHARED += ("generate_text", "capture_residuals", "message_spans", "message_partition")


def _fake_model() -> type:
    path = ROOT / "packages/interp-core/tests/fake_backend.py"
    spec = importlib.util.spec_from_file_location("_composition_fake_backend", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FakeModel


def _model_classes() -> dict[str, type]:
    classes = {"fake": _fake_model()}
    for name, module, attribute in (
        ("eager", "interp_eager.model", "EagerModel"),
        ("vllm", "interp_vllm.model", "VLLMModel"),
        ("remote", "interp_serve.remote", "RemoteModel"),
    ):
        try:
            classes[name] = getattr(importlib.import_module(module), attribute)
        except ImportError as exc:  # a backend whose dependencies this environment lacks
            pytest.skip(f"{module}: {exc}")
    return classes


@pytest.mark.parametrize("backend", ["eager", "vllm", "remote", "fake"])
def test_every_model_derives_the_base_and_redefines_none_of_it(backend: str) -> None:
    cls = _model_classes()[backend]
    assert issubclass(cls, ModelBase), f"{cls.__name__} does not derive ModelBase"
    redefined = [name for name in SHARED if name in vars(cls)]
    assert not redefined, f"{cls.__name__} writes again what ModelBase holds: {redefined}"
    assert cls.__bases__ == (ModelBase,), f"{cls.__name__} mixes in {cls.__bases__}"


def _private_members_of_the_model() -> set[str]:
    """Names starting with one underscore that model.py defines on VLLMModel or its instances."""
    tree = ast.parse((VLLM / "model.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VLLMModel")
    names = {
        n.name
        for n in cls.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("_")
    }
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "self" and node.attr.startswith("_"):
                names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def _own_names(tree: ast.Module) -> set[str]:
    """What a module's classes define for themselves: methods, fields, `self._x = ...`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        names.add(target.attr)
    return names


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == "self"


@pytest.mark.parametrize("module", COLLABORATORS)
def test_no_vllm_collaborator_reaches_into_the_model(module: str) -> None:
    tree = ast.parse((VLLM / module).read_text())
    imported = {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module is not None
    }
    assert "interp_vllm.model" not in imported, f"{module} imports the model it serves"
    private = _private_members_of_the_model()
    own = _own_names(tree)
    reached = sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (
                isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in own
            )
            and node.attr in private
        }
    )
    assert not reached, f"{module} touches VLLMModel's private members {reached}"


def test_the_model_holds_its_collaborators_rather_than_mixing_them_in() -> None:
    tree = ast.parse((VLLM / "model.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VLLMModel")
    assert [ast.unparse(b) for b in cls.bases] == ["ModelBase"]
    built = {ast.unparse(n.func) for n in ast.walk(cls) if isinstance(n, ast.Call)}
    collaborators = ("ModelCalls", "PromptTokens", "WorkerSAEs", "WorkerDecoding", "VLLMReadouts")
    for collaborator in collaborators:
        assert collaborator in built, f"VLLMModel no longer builds its {collaborator}"
    assert "StaticTier.declare" in built


@pytest.mark.parametrize("module", WORKER_MODULES)
def test_the_worker_state_is_declared_not_probed(module: str) -> None:
    tree = ast.parse((VLLM / module).read_text())
    probes = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr", "setattr")
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and str(node.args[1].value).startswith("_interp")
    ]
    assert not probes, f"{module} probes the worker's state: {probes}"


def _keywords(function: object) -> dict[str, object]:
    """A method's parameters after `self`, by name, with their defaults."""
    import inspect

    parameters = list(inspect.signature(function).parameters.values())[1:]  # type: ignore[arg-type]
    return {
        p.name: p.default for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _forwards_keywords(function: object) -> bool:
    import inspect

    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return any(p.kind is p.VAR_KEYWORD for p in parameters)


@pytest.mark.parametrize("backend", ["eager", "vllm", "remote"])
def test_every_delegated_method_keeps_the_protocols_parameters(backend: str) -> None:
    """A delegate written by hand can drop a keyword the collaborator takes (vLLM's
    `decode_residuals` once lost `top_k`): each protocol method must accept every parameter
    the protocol names, with the protocol's default (one that forwards `**kwargs` passes
    them on unread, so it is left to the conformance kit)."""
    from interp_core.protocol import ReadoutModel

    cls = _model_classes()[backend]
    lost = []
    # A dict merge, not a set union of items: a class attribute may be unhashable (a dict), and
    # which ones a class holds depends on what ran before in the process (xdist's order).
    declared_here = {**vars(ReadoutModel.__mro__[1]), **vars(ReadoutModel)}
    for name, declared in declared_here.items():
        if name.startswith("_") or not callable(declared):
            continue
        method = getattr(cls, name)
        if _forwards_keywords(method):
            continue
        accepted = _keywords(method)
        for parameter, default in _keywords(declared).items():
            if parameter not in accepted or accepted[parameter] != default:
                lost.append(f"{name}({parameter}={default!r})")
    assert not lost, f"{cls.__name__} lost protocol parameters: {sorted(lost)}"
