"""The `interp` command: points of a model from its config, and the backends this machine has."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interp_core.cli import main
from interp_core.known_models import (
    config_provenance,
    facts_for,
    known_model_ids,
    load_known_config,
)
from interp_core.testing.cli import assert_quiet_on_closed_pipe

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
LLAMA_POINTS = {
    "embeddings", "resid_pre", "attn_in", "value", "attn_scores", "attn_probs", "z", "attn_out",
    "attn_out_post", "resid_mid", "mlp_in", "mlp_pre", "mlp_pre_linear", "mlp_act", "mlp_out",
    "mlp_out_post", "resid_post", "final_norm", "lm_head",
}  # fmt: skip


def _json_points(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["points", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_smollm2_has_30_layers_of_the_points_a_llama_serves(capsys) -> None:
    table = _json_points(capsys, SMOLLM2)
    assert table["n_layers"] == 30
    present = {row["point"]: row for row in table["points"] if row["absent"] is None}
    assert set(present) == LLAMA_POINTS
    for row in present.values():
        if row["scope"] == "layer":
            assert row["layers"] == list(range(30)), row["point"]
    assert present["resid_post"]["shape"] == "[batch, seq, 576]"
    assert present["value"]["width"] == 3 * 64  # 3 kv heads of 64
    assert present["mlp_act"]["width"] == 1536
    assert present["attn_probs"]["shape"] == "[batch, 9, seq, seq]"
    assert present["lm_head"]["width"] == 49152


def test_the_absent_points_say_why(capsys) -> None:
    rows = {r["point"]: r for r in _json_points(capsys, SMOLLM2)["points"]}
    assert "QK-norm" in rows["q_norm_in"]["absent"]
    assert "mixture-of-experts" in rows["router_logits"]["absent"]
    assert "hyper-connection" in rows["resid_streams"]["absent"]
    assert all(rows[n]["absent"] for n in rows if n not in LLAMA_POINTS)


def test_the_table_names_every_point_and_the_reasons(capsys) -> None:
    assert main(["points", SMOLLM2]) == 0
    out = capsys.readouterr().out
    assert "30 layers" in out and "19 of 34 points" in out
    assert "resid_post" in out and "0-29" in out
    assert "absent on this model (15)" in out and "QK-norm" in out


def test_a_moe_model_shows_which_layers_route(capsys) -> None:
    rows = {r["point"]: r for r in _json_points(capsys, "deepseek-ai/DeepSeek-V3")["points"]}
    assert rows["router_logits"]["layers"] == list(range(3, 61))
    assert rows["mlp_act"]["layers"] == [0, 1, 2]
    assert "latent attention" in rows["value"]["absent"]


def test_a_model_folder_and_a_config_file_work_like_a_bundled_id(tmp_path: Path, capsys) -> None:
    (tmp_path / "config.json").write_text(json.dumps(load_known_config("openai-community/gpt2")))
    by_folder = _json_points(capsys, str(tmp_path))
    by_file = _json_points(capsys, str(tmp_path / "config.json"))
    assert by_folder["points"] == by_file["points"]
    assert by_folder["n_layers"] == 12
    rows = {r["point"]: r for r in by_folder["points"]}
    assert (
        "gated" in rows["mlp_pre_linear"]["absent"] or "plain" in rows["mlp_pre_linear"]["absent"]
    )


def test_bad_input_is_a_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    assert main(["points", "no/such-model"]) == 2
    assert "neither a config file" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{not json")
    assert main(["points", str(tmp_path)]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["points", str(empty)]) == 2
    assert "without a config.json" in capsys.readouterr().err


def test_backends_lists_first_party_backends_with_the_install_hint(capsys) -> None:
    assert main(["backends", "--json"]) == 0
    rows = {r["backend"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"eager", "vllm", "vllm-static", "vllm-generate"} <= set(rows)
    for row in rows.values():
        assert row["status"] in {"ready", "cannot run here", "not installed", "not provided"}
        if row["status"] == "not installed":
            assert row["detail"].startswith("pip install interpoint-")
        if row["status"] == "not provided":
            assert "registers no" in row["detail"] and "upgrade interpoint-" in row["detail"]


def test_the_console_script_is_installed() -> None:
    exe = shutil.which("interp", path=str(Path(sys.executable).parent))
    assert exe, "the `interp` console script is not installed next to this interpreter"
    result = subprocess.run([exe, "points", SMOLLM2], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "30 layers" in result.stdout


@pytest.mark.parametrize(
    "model_id", [m for m in known_model_ids() if config_provenance(m) is not None]
)
def test_a_reconstructed_config_answers_offline_through_the_console_script(model_id: str) -> None:
    exe = shutil.which("interp", path=str(Path(sys.executable).parent))
    assert exe, "the `interp` console script is not installed next to this interpreter"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": "/nonexistent"}
    result = subprocess.run(
        [exe, "points", model_id, "--json"], capture_output=True, text=True, check=False, env=env
    )
    assert result.returncode == 0, result.stderr
    table = json.loads(result.stdout)
    facts = facts_for(model_id)
    assert table["n_layers"] == facts.n_layers
    rows = {row["point"]: row for row in table["points"]}
    if facts.n_streams > 1:
        # Parallel residual streams (Gemma-3n's AltUp): a bare resid_post is refused, naming
        # the per-stream address to use instead.
        assert "resid_post.L.stream-K" in rows["resid_post"]["absent"]
        return
    assert rows["resid_post"]["absent"] is None
    assert rows["resid_post"]["shape"] == f"[batch, seq, {facts.d_model}]"
    assert rows["resid_post"]["layers"] == list(range(facts.n_layers))


def test_a_path_that_does_not_exist_is_called_one(capsys) -> None:
    assert main(["points", "/no/such/path"]) == 2
    err = capsys.readouterr().err
    assert "the path '/no/such/path' does not exist" in err
    assert main(["points", "./config.json"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_mistyped_id_gets_suggestions_in_the_shells_words(capsys) -> None:
    assert main(["points", "Qwen/Qwen3-8b"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'Qwen/Qwen3-8B'" in err and "`interp models`" in err
    assert "ModelFacts.from_config" not in err and "known_model_ids()" not in err


def test_models_lists_the_bundled_ids(capsys) -> None:
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert SMOLLM2 in lines and "Qwen/Qwen3-8B" in lines
    assert main(["models", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == lines


def test_a_closed_pipe_ends_quietly() -> None:
    # `interp points MODEL | head`: the reader is gone before anything is written.
    assert_quiet_on_closed_pipe("interp_core.cli", "points", SMOLLM2)
