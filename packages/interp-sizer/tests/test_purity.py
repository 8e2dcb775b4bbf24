"""interp-sizer imports only interp-core and the standard library.

The sizer runs in a browser tab's backend, a CI job and a laptop without torch; if it ever imported
a tensor library, vLLM or the Hub client at import time, all of them would grow gigabytes. Every
module is imported in a fresh interpreter where those packages cannot be found.
"""

from __future__ import annotations

import subprocess

from interp_core.testing.purity import HEAVY, import_everything


def _run(after: str = "") -> subprocess.CompletedProcess[str]:
    # Beyond the tensor libraries: the app's own (Streamlit, pandas) stay out of the library.
    return import_everything(
        "interp_sizer",
        allowed=("interp_core", "interp_sizer"),
        blocked=(*HEAVY, "streamlit", "pandas"),
        after=after,
    )


def test_every_sizer_module_imports_with_only_the_core_and_the_standard_library() -> None:
    result = _run()
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) >= 10


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
