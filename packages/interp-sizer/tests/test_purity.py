"""interp-sizer imports only interp-core and the standard library.

The sizer runs in a browser tab's backend, a CI job and a laptop without torch; if it ever imported
a tensor library, vLLM or the Hub client at import time, all of them would grow gigabytes. Every
module is imported in a fresh interpreter where those packages cannot be found.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = (
    "torch",
    "numpy",
    "transformers",
    "vllm",
    "safetensors",
    "huggingface_hub",
    "streamlit",
    "pandas",
    "jax",
)

_PRELUDE = textwrap.dedent(
    """
    import importlib.abc, pkgutil, sys

    BLOCKED = {blocked!r}

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in BLOCKED:
                raise ImportError(f"blocked for the purity test: {{name}}")
            if top not in sys.stdlib_module_names and top not in ("interp_core", "interp_sizer"):
                raise ImportError(f"not standard library: {{name}}")
            return None

    sys.meta_path.insert(0, Refuse())
    import interp_sizer
    names = ["interp_sizer"]
    names += [info.name for info in pkgutil.walk_packages(interp_sizer.__path__, "interp_sizer.")]
    for name in names:
        __import__(name)
    {extra}
    print(len(names))
    """
)


def _run(extra: str = "") -> subprocess.CompletedProcess[str]:
    code = _PRELUDE.format(blocked=BLOCKED, extra=extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_every_sizer_module_imports_with_only_the_core_and_the_standard_library() -> None:
    result = _run()
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 10


def test_sizing_a_bundled_model_needs_nothing_else_either() -> None:
    # Sizing runs code paths that import lazily; it must stay pure too (offline, no Hub client).
    extra = (
        "import os; os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "from interp_sizer import size\n"
        "r = size('meta-llama/Llama-3.1-8B', gpu='H100-80GB', max_model_len=8192)\n"
        "assert r.kv_bytes_per_token == 131072\n"
        "from interp_sizer.cli import main\n"
        "assert main(['Qwen/Qwen3-8B', '--json', '--offline', '--max-model-len', '4096']) == 0"
    )
    result = _run(extra)
    assert result.returncode == 0, result.stderr


def test_the_blocking_finder_really_blocks() -> None:
    result = _run("import torch")
    assert result.returncode != 0
    assert "blocked for the purity test: torch" in result.stderr


def test_sizer_declares_only_the_core_at_runtime() -> None:
    from importlib.metadata import requires

    runtime = [r for r in (requires("interpoint-sizer") or []) if "extra ==" not in r]
    assert [r.split(">")[0].split("<")[0] for r in runtime] == ["interpoint-core"]
