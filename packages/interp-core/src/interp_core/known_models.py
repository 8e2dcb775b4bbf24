"""Which models can interp-core describe with no network at all, and what do their configs say?

interp-core ships the `config.json` of a few dozen popular checkpoints under
`interp_core/model_configs/`, one file per model named `<org>--<name>.json`. They are facts only
(no weights, no tokenizer) and serve two readers: the sizer's offline catalogue, which prices a
model before anything is downloaded, and tests that want a real architecture without the Hub.

Not every file was downloaded: some are reconstructed from the defaults transformers documents
as describing a named checkpoint, with any key the defaults get wrong corrected to the value
public sources state, and bundled only once their headline dimensions matched independent public
pages. `model_configs/PROVENANCE.json` says which, from what, which keys were corrected on whose
word, and what was checked; `config_provenance` reads it. Files without an entry there predate
that record.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts

__all__ = [
    "bundled_first",
    "config_provenance",
    "facts_for",
    "known_model_ids",
    "load_known_config",
]

_CONFIG_DIR = "model_configs"
# Names no config (it has no `--`), so `known_model_ids` never lists it.
_PROVENANCE = "PROVENANCE.json"
_SUFFIX = ".json"
# `/` cannot appear in a file name, and no Hub org or model name contains `--`.
_SEPARATOR = "--"


def _config_dir() -> Traversable:
    return resources.files("interp_core").joinpath(_CONFIG_DIR)


def _file_name(model_id: str) -> str:
    return model_id.replace("/", _SEPARATOR, 1) + _SUFFIX


@cache
def known_model_ids() -> tuple[str, ...]:
    """The HuggingFace repo ids whose configs ship with interp-core, sorted."""
    ids = (
        entry.name[: -len(_SUFFIX)].replace(_SEPARATOR, "/", 1)
        for entry in _config_dir().iterdir()
        if entry.name.endswith(_SUFFIX) and _SEPARATOR in entry.name
    )
    return tuple(sorted(ids))


def load_known_config(model_id: str) -> dict[str, Any]:
    """The bundled `config.json` of `model_id`, parsed into a fresh dict the caller may change."""
    if not isinstance(model_id, str):
        message = (
            f"a model id is a HuggingFace repo id string such as 'Qwen/Qwen3-8B', not "
            f"{type(model_id).__name__}. Pass the repo id as a string"
        )
        raise ConfigError(message)
    if model_id not in known_model_ids():
        raise ConfigError(_unknown_model_message(model_id))
    text = _config_dir().joinpath(_file_name(model_id)).read_text(encoding="utf-8")
    return json.loads(text)


def bundled_first(
    fetch: Callable[[str], Mapping[str, Any]] | None,
) -> Callable[[str], Mapping[str, Any]]:
    """A `fetch` for `interp_core.configs.model_config`: the bundled config of a known repo id,
    else `fetch(name)` (the Hub), else an `OSError` that `model_config` turns into its refusal.

    `model_config` reads a local folder or the HF cache before calling it, so a downloaded model's
    own config always wins; a known id then needs no network at construction (the backends read
    the checkpoint's own config again when they load weights).
    """

    def fetch_config(name: str) -> Mapping[str, Any]:
        if name in known_model_ids():
            return load_known_config(name)
        if fetch is None:
            message = f"{name!r} is not on disk and not one of the bundled configs"
            raise OSError(message)
        return fetch(name)

    return fetch_config


@cache
def _provenance() -> dict[str, dict[str, Any]]:
    text = _config_dir().joinpath(_PROVENANCE).read_text(encoding="utf-8")
    return json.loads(text)["configs"]


def config_provenance(model_id: str) -> dict[str, Any] | None:
    """Where a bundled config came from when it was not downloaded: `source` (what it was
    reconstructed from), `checked_against` (the public pages its dimensions were compared with),
    `checked` (which of its numbers they confirm), `parameters` (the total they state) and
    `note`; where the defaults were wrong, `corrections` ({key: value}) and `correction_sources`
    ({key: [page or owner/repo/path@commit, ...]}), and `base` when the defaults describe another
    size of the family. None for a bundled config without an entry; refused for an unknown id.
    """
    load_known_config(model_id)  # the same refusal for an unknown id
    entry = _provenance().get(model_id)
    return None if entry is None else copy.deepcopy(entry)


def facts_for(model_id: str) -> ModelFacts:
    """`ModelFacts` of a bundled model, read from its shipped config."""
    return ModelFacts.from_config(load_known_config(model_id))


def _unknown_model_message(model_id: str) -> str:
    known = known_model_ids()
    # Match case-blind so 'qwen/qwen3-8b' still finds 'Qwen/Qwen3-8B'.
    by_folded = {name.casefold(): name for name in known}
    close = difflib.get_close_matches(model_id.casefold(), list(by_folded), n=3, cutoff=0.5)
    nearest = ", ".join(f"'{by_folded[name]}'" for name in close)
    hint = f" The nearest known ids are {nearest}." if nearest else ""
    return (
        f"'{model_id}' is not one of the {len(known)} model configs bundled with interp-core, so "
        f"its facts cannot be read offline.{hint} For any other model, pass its own config.json "
        f"mapping to `ModelFacts.from_config`; `known_model_ids()` lists the bundled ones"
    )
