"""Where a model string is found: disk, the HF cache, the bundled configs, the Hub."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest
from sizer_helpers import required

from interp_core.known_models import config_provenance, known_model_ids, load_known_config
from interp_sizer import HubUnavailable, UnknownModel, resolve_model, size


def test_a_bundled_id_resolves_offline_from_the_core_catalogue() -> None:
    model = resolve_model("Qwen/Qwen3-8B", hub=False)
    assert model.origin == "bundled" and model.inventory.source == "config"
    assert model.facts.n_layers == 36


@pytest.mark.parametrize(
    "model_id", [m for m in known_model_ids() if config_provenance(m) is not None]
)
def test_a_reconstructed_config_is_priced_offline_near_its_stated_size(
    model_id: str, monkeypatch
) -> None:
    # The weights the sizer derives from the reconstructed dimensions must land within 10% of
    # the parameter total the public pages state: a second, independent check of the file.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = size(model_id)
    assert report.model.origin == "bundled" and report.dtype == "bfloat16"
    entry = config_provenance(model_id)
    assert entry is not None
    derived = report.weights_bytes / 2  # two bytes per bfloat16 parameter
    assert abs(derived - entry["parameters"]) / entry["parameters"] < 0.10
    assert report.kv_bytes_per_token > 0 and report.fits


def test_the_hf_cache_wins_and_brings_exact_headers(tmp_path: Path, monkeypatch) -> None:
    snapshot = tmp_path / "models--acme--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (tmp_path / "models--acme--tiny" / "refs").mkdir()
    (tmp_path / "models--acme--tiny" / "refs" / "main").write_text("abc123")
    config = load_known_config("HuggingFaceTB/SmolLM2-135M")
    (snapshot / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model = resolve_model("acme/tiny")
    assert model.origin == "hf cache" and model.model_id == "acme/tiny"
    assert model.facts.d_model == 576


def _fake_hub(config: dict, tensors: dict[str, tuple[str, list[int], int]]) -> types.ModuleType:
    hub = types.ModuleType("huggingface_hub")

    def hf_hub_download(repo_id: str, filename: str) -> str:
        path = Path(os.environ["FAKE_HUB_DIR"]) / filename
        path.write_text(json.dumps(config))
        return str(path)

    def get_safetensors_metadata(repo_id: str):
        infos, offset = {}, 0
        for name, (dtype, shape, nbytes) in tensors.items():
            infos[name] = types.SimpleNamespace(
                dtype=dtype, shape=shape, data_offsets=(offset, offset + nbytes)
            )
            offset += nbytes
        file_meta = types.SimpleNamespace(tensors=infos)
        return types.SimpleNamespace(files_metadata={"model.safetensors": file_meta})

    hub.hf_hub_download = hf_hub_download
    hub.get_safetensors_metadata = get_safetensors_metadata
    return hub


def test_the_hub_path_reads_config_and_headers_only(tmp_path: Path, monkeypatch) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "vocab_size": 100,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": True,
    }
    tensors = {
        "model.embed_tokens.weight": ("BF16", [100, 64], 12_800),
        "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64], 8192),
        "model.norm.weight": ("BF16", [64], 128),
    }
    monkeypatch.setenv("FAKE_HUB_DIR", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", _fake_hub(config, tensors))
    model = resolve_model("acme/remote")
    assert model.origin == "hub" and model.weights_exact
    assert model.inventory.stored_bytes == 12_800 + 8192 + 128


def test_without_the_hub_client_the_refusal_names_the_extra(monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import raises ImportError
    with pytest.raises(HubUnavailable, match=r"interpoint-sizer\[hub\]"):
        resolve_model("acme/not-local")


def test_offline_unknown_ids_never_touch_the_network() -> None:
    with pytest.raises(UnknownModel, match="HF_HUB_OFFLINE is set"):
        resolve_model("acme/not-local")
    with pytest.raises(UnknownModel, match="no model given"):
        resolve_model("  ")


def test_a_folder_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnknownModel, match=r"folder without a config\.json"):
        resolve_model(tmp_path)


@pytest.mark.hub
def test_sizing_a_repo_straight_from_the_hub(monkeypatch) -> None:
    # Runs only where the Hub is reachable and someone asked for it: no probe of the network.
    if "hub" not in required():
        pytest.skip("needs the HuggingFace Hub; set INTERP_REQUIRE=hub where it is reachable")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    report = size("Qwen/Qwen3-0.6B", hub=True, gpu="L4", max_model_len=4096)
    assert report.model.origin == "hub" and report.model.weights_exact
    assert report.selected.fits
