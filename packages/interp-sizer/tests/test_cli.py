"""`interp-size`: the readable table, the JSON contract and the exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interp_sizer.cli import main


def test_json_has_the_contract_keys_and_the_done_when_numbers(capsys) -> None:
    code = main(
        [
            "meta-llama/Llama-3.1-8B",
            "--gpu",
            "H100-80GB",
            "--backend",
            "vllm",
            "--dtype",
            "bfloat16",
            "--max-model-len",
            "8192",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["weights_bytes"] / 2**30 == pytest.approx(15.0, abs=0.05)
    assert data["kv_bytes_per_token"] == 131_072
    assert data["kv_tokens"] > 400_000
    assert data["fits"]["H100-80GB"] is True and data["fits"]["T4"] is False
    assert data["snippet"].startswith("from interp_engine import load_model")


def test_deepseek_json_reports_the_mla_latent(capsys) -> None:
    main(["deepseek-ai/DeepSeek-V3", "--json", "--max-model-len", "16384"])
    data = json.loads(capsys.readouterr().out)
    assert data["kv_values_per_token_layer"] == 576
    assert data["kv_bytes_per_token"] == 61 * 576 * 2


def test_table_output_names_terms_gpus_and_the_snippet(capsys) -> None:
    code = main(
        [
            "Qwen/Qwen3-8B",
            "--backend",
            "vllm-static",
            "--points",
            "resid_post",
            "--gpu",
            "A100-80GB",
            "--max-model-len",
            "8192",
            "--explain",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    for text in (
        "static tap buffers",
        "KV cache",
        "A100-80GB",
        "MI300X",
        "FITS",
        'static_points=[f"resid_post.{layer}" for layer in range(36)]',
        "fragmentation",
        "interp-engine `interp_engine/memory.py`",
    ):
        assert text in out


def test_a_configuration_that_does_not_fit_exits_1(capsys) -> None:
    assert main(["meta-llama/Llama-3.1-70B", "--gpu", "L4", "--max-model-len", "4096"]) == 1
    assert "DOES NOT FIT" in capsys.readouterr().out


def test_refusals_exit_2_with_the_message_on_stderr(capsys) -> None:
    assert main(["nobody/nothing", "--offline"]) == 2
    assert "unknown model 'nobody/nothing'" in capsys.readouterr().err
    assert main(["meta-llama/Llama-3.1-8B", "--num-gpus", "0"]) == 2
    assert "num_gpus must be a positive integer" in capsys.readouterr().err
    assert main([]) == 2


def test_lists(capsys) -> None:
    assert main(["--list-gpus"]) == 0
    assert "H100-80GB" in capsys.readouterr().out
    assert main(["--list-models"]) == 0
    assert "deepseek-ai/DeepSeek-V3" in capsys.readouterr().out


def test_the_console_script_is_installed() -> None:
    beside = Path(sys.executable).parent / "interp-size"  # the venv's bin, on PATH or not
    exe = str(beside) if beside.is_file() else shutil.which("interp-size")
    assert exe is not None
    result = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "interp-sizer" in result.stdout
