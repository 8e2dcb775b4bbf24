"""Which sampling settings does a checkpoint recommend, in its `generation_config.json`?

A checkpoint's authors write the settings they tuned it for into `generation_config.json`, beside
`config.json`; transformers' `generate` and `vllm serve` both fill a knob the caller leaves unset
from it. This module reads the file (standard library JSON, from the model folder or the
huggingface_hub cache, never downloaded) and turns it into the knobs `interp_core.sampling`
resolves: `recommended_sampling` keeps only what the file states, in our vocabulary.

Reading conventions, the ones transformers uses:

* a value that means "off" (`top_k` 0, `top_p` 1.0, `min_p` 0, `repetition_penalty` 1.0) is a
  statement of the neutral setting, kept as that neutral value (`top_k`/`top_p`/`min_p`: None);
* `do_sample: false` is a recommendation of greedy decoding: temperature 0, whatever
  temperature the file also states (transformers ignores the temperature then too);
* fields that are not sampling knobs (token ids, `max_length`, beam settings) are not read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interp_core.configs import hf_cache_snapshot, read_json_object

__all__ = ["GENERATION_CONFIG", "SAMPLING_KNOBS", "read_generation_config", "recommended_sampling"]

GENERATION_CONFIG = "generation_config.json"

# The knobs a checkpoint may recommend and the resolution fills; generation_config.json spells
# each the way we do (transformers' names), so no renaming is needed.
SAMPLING_KNOBS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)


def _file_of(model_id_or_path: str | os.PathLike[str]) -> Path | None:
    path = Path(model_id_or_path)
    if path.is_dir():
        folder: Path | None = path
    elif path.is_file():
        folder = path.parent  # a path to config.json names the model folder too
    else:
        folder = hf_cache_snapshot(os.fspath(model_id_or_path))
    if folder is None:
        return None
    found = folder / GENERATION_CONFIG
    return found if found.is_file() else None


def read_generation_config(model_id_or_path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint's `generation_config.json` as a dict, or None when it has none on disk.

    A file that exists but is not a JSON object raises `ConfigError`: a recommendation that
    cannot be read is not silently replaced by the library defaults.
    """
    found = _file_of(model_id_or_path)
    if found is None:
        return None
    return read_json_object(
        found,
        "repair or delete the checkpoint's generation_config.json, or load with "
        "use_generation_config=False in each generate call",
        "a generation_config.json holds one object of settings",
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def recommended_sampling(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The sampling knobs `config` (a parsed generation_config.json) states, normalised.

    Keys are from `SAMPLING_KNOBS`; a knob the file does not state is absent. A stated value of
    the wrong type (a string temperature) is left out rather than guessed at; the resolution
    then uses the library default for it, and reports that it did.
    """
    if not config:
        return {}
    stated: dict[str, Any] = {}
    for knob in SAMPLING_KNOBS:
        value = config.get(knob)
        if _number(value):
            stated[knob] = value
    if "top_k" in stated:
        top_k = stated["top_k"]
        stated["top_k"] = None if int(top_k) <= 0 else int(top_k)
    if "top_p" in stated:
        stated["top_p"] = None if float(stated["top_p"]) >= 1.0 else float(stated["top_p"])
    if "min_p" in stated:
        stated["min_p"] = None if float(stated["min_p"]) <= 0.0 else float(stated["min_p"])
    for knob in ("temperature", "repetition_penalty", "presence_penalty", "frequency_penalty"):
        if knob in stated:
            stated[knob] = float(stated[knob])
    if config.get("do_sample") is False:
        stated["temperature"] = 0.0
    return stated
