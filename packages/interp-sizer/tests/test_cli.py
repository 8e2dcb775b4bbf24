"""`interp-size`: the readable table, the JSON contract and the exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp_core.testing.cli import assert_quiet_on_closed_pipe
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
    assert data["snippet"].startswith("from interpoint import load_model")


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
    # Errors speak in this command's flags, not in the library's keyword arguments.
    err = capsys.readouterr().err
    assert "--num-gpus must be a positive integer" in err and "num_gpus" not in err
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


def test_a_requested_gpu_count_is_kept_without_a_named_gpu(capsys) -> None:
    # 70B in fp8 fits on one H200; asked for two GPUs, the answer is for two, snippet included.
    args = ["meta-llama/Llama-3.1-70B", "--quantization", "fp8", "--max-model-len", "8192"]
    assert main([*args, "--num-gpus", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_gpus"] == 2 and data["selected"]["num_gpus"] == 2
    assert "num_gpus=2," in data["snippet"]
    assert {row["num_gpus"] for row in data["per_gpu"]} == {2}
    # The smallest card that fits at two GPUs (less memory than the H200 the single-GPU
    # answer picks), and the overall fewest-GPU fit is still reported beside it.
    assert data["gpu"] != "H200"
    assert data["smallest_fit"] == {"gpu": "H200", "num_gpus": 1}
    # Without --num-gpus the fewest GPUs that fit are chosen, as before.
    main([*args, "--json"])
    assert json.loads(capsys.readouterr().out)["num_gpus"] == 1


def test_the_table_says_why_a_gpu_does_not_fit_and_what_limits_one_that_does(capsys) -> None:
    main(["meta-llama/Llama-3.1-70B", "--gpu", "H100-80GB", "--max-model-len", "8192"])
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()[:1]}
    t4 = rows["T4"]
    assert " no " in t4 and "short of weights" in t4 and "has no bfloat16 support" in t4
    assert t4.split()[4] == "-"  # no decode speed for a configuration that cannot start
    assert "decode: " in rows["MI300X"]
    assert "not a measurement" in out
    # The old column named the largest term, which is the weights on every row.
    table = out.split("across GPUs")[1].split("smallest fit")[0]
    assert not any(line.rstrip().endswith("weights") for line in table.splitlines())


def test_the_heading_names_the_quantized_weights(capsys) -> None:
    main(["meta-llama/Llama-3.1-8B", "--gpu", "H100-80GB", "--quantization", "fp8"])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("backend vllm, fp8 weights, bfloat16 activations")


def test_help_shows_every_default_and_the_difference_from_the_app(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in (
        "--backend {eager,vllm,vllm-static,vllm-generate} the backend to price (default: vllm)",
        "(default: 2048)",
        "the fewest that fit",
        "default: the model's maximum (the app's default is 8192)",
        "Exit status: 0 fits, 1 does not fit, 2 refused",
    ):
        assert text in out, text


def test_a_mistyped_id_fails_fast_with_bundled_suggestions() -> None:
    # With the Hub allowed: the id differs from a bundled one only in case, so the answer comes
    # at once (the Hub client's retries took ~24 s and ended in an exception class name).
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "interp_sizer.cli", "Qwen/Qwen3-8b"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert time.monotonic() - start < 10
    assert result.returncode == 2
    assert "Did you mean 'Qwen/Qwen3-8B'" in result.stderr
    assert "differs only in case from a bundled id" in result.stderr
    assert "Error" not in result.stderr


def test_a_hub_failure_is_told_in_words_not_as_an_exception_class() -> None:
    pytest.importorskip("huggingface_hub")
    code = (
        "from interp_sizer import resolve_model\n"
        "try:\n    resolve_model('nobody/qwen3-8b', hub=True)\n"
        "except Exception as e:\n    print(e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert "cannot fetch the config of 'nobody/qwen3-8b'" in result.stdout
    assert "could not be reached" in result.stdout
    assert "Did you mean 'Qwen/Qwen3-8B'" in result.stdout
    assert "Error" not in result.stdout


def test_lists_as_json(capsys) -> None:
    assert main(["--list-models", "--json"]) == 0
    assert "Qwen/Qwen3-8B" in json.loads(capsys.readouterr().out)
    assert main(["--list-gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    assert gpus[0]["gpu"] == "T4" and gpus[0]["memory_gib_usable"] == 14.6


def test_a_closed_pipe_ends_quietly() -> None:
    # `interp-size ... | head`: the reader is gone before anything is written.
    assert_quiet_on_closed_pipe("interp_sizer.cli", "--list-gpus")
