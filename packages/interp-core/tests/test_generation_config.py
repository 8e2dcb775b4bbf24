"""Is a checkpoint's generation_config.json read as transformers reads it, and resolved right?

`recommended_sampling` keeps the knobs the file states, in our vocabulary ("off" values as the
neutral setting, `do_sample: false` as greedy); `resolve_sampling` lets a set knob win, fills an
unset one from the file, falls back to the library defaults, and records which decided each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interp_core.errors import ConfigError, InvalidArgument
from interp_core.generation_config import read_generation_config, recommended_sampling
from interp_core.sampling import LIBRARY_DEFAULTS, resolve_sampling


def _folder(tmp_path: Path, config: object) -> Path:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "generation_config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_file_is_read_from_the_folder_or_beside_config_json(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"temperature": 0.6, "eos_token_id": 2})
    assert read_generation_config(folder) == {"temperature": 0.6, "eos_token_id": 2}
    assert read_generation_config(folder / "config.json") == read_generation_config(folder)
    assert read_generation_config(tmp_path / "nowhere") is None


def test_an_unreadable_file_is_refused_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="use_generation_config=False"):
        read_generation_config(tmp_path)
    (tmp_path / "generation_config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        read_generation_config(tmp_path)


def test_recommendations_in_our_vocabulary() -> None:
    stated = recommended_sampling(
        {"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0, "eos_token_id": [1, 2]}
    )
    assert stated == {"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": None}
    assert recommended_sampling({"top_k": 0, "top_p": 1.0})["top_k"] is None
    assert recommended_sampling({"top_p": 1.0}) == {"top_p": None}
    # transformers samples greedily when do_sample is false, whatever the temperature says.
    assert recommended_sampling({"do_sample": False, "temperature": 0.9})["temperature"] == 0.0
    assert recommended_sampling({"temperature": "hot", "top_k": True}) == {}
    assert recommended_sampling(None) == {}


def test_resolution_caller_then_checkpoint_then_default() -> None:
    stated = {"temperature": 0.6, "top_k": 20, "repetition_penalty": 1.1}
    used = resolve_sampling(stated, max_new_tokens=4, top_k=3, presence_penalty=0.5)
    assert (used.temperature, used.top_k, used.repetition_penalty) == (0.6, 3, 1.1)
    assert used.presence_penalty == 0.5 and used.top_p is None
    assert used.sources == {
        "temperature": "generation_config",
        "top_k": "caller",
        "top_p": "default",
        "min_p": "default",
        "presence_penalty": "caller",
        "frequency_penalty": "default",
        "repetition_penalty": "generation_config",
    }
    off = resolve_sampling(stated, max_new_tokens=4, use_generation_config=False)
    assert {knob: getattr(off, knob) for knob in LIBRARY_DEFAULTS} == LIBRARY_DEFAULTS
    assert off.as_dict()["sources"]["temperature"] == "default"


def test_a_checkpoint_value_is_checked_like_a_callers() -> None:
    with pytest.raises(
        InvalidArgument, match=r"generation_config.json recommends repetition_penalty=-1\.0"
    ):
        resolve_sampling({"repetition_penalty": -1.0}, max_new_tokens=4)
    with pytest.raises(InvalidArgument, match="unknown sampling arguments"):
        resolve_sampling({}, max_new_tokens=4, temprature=0.5)
