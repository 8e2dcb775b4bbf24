"""Where is a model's `config.json`, and what does it say? Read from disk, never downloaded.

A model is named by a local folder, a path to a config file, or a HuggingFace repo id; a repo id
is looked up in the huggingface_hub cache by reading its folder layout directly, so the core needs
no network library. Backends that can reach the Hub pass a `fetch` to `model_config`. The configs
of popular models that ship with interp-core, for use with no network at all, are in
`interp_core.known_models`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from interp_core.errors import ConfigError

__all__ = [
    "hf_cache_snapshot",
    "local_config",
    "model_config",
    "read_config_file",
    "read_json_object",
]


def hf_cache_snapshot(repo_id: str) -> Path | None:
    """The newest local snapshot folder of a HF repo in the huggingface_hub cache, or None.

    Reads the cache layout directly (models--org--name/snapshots/<revision>/) so the core needs
    no network library; the revision `refs/main` names wins, else the most recently written one.
    """
    root = os.environ.get("HF_HUB_CACHE")
    if root is None:
        home = os.environ.get(
            "HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
        )
        root = os.path.join(home, "hub")
    repo = Path(root) / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text().strip()
        if (snapshot / "config.json").is_file():
            return snapshot
    found = sorted(repo.glob("snapshots/*/config.json"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else None


def _hf_cache_config(model_id: str) -> Path | None:
    snapshot = hf_cache_snapshot(model_id)
    return snapshot / "config.json" if snapshot is not None else None


def model_config(
    model_id_or_path: str | os.PathLike[str],
    *,
    fetch: Callable[[str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The model's config: from disk (`local_config`), else from `fetch(model_id)`.

    Backends pass a `fetch` that can reach the Hub or its cache (transformers' AutoConfig); the
    core itself never downloads. A folder without config.json, or a failed fetch, is a
    `ConfigError` that says to pass a downloaded model folder.
    """
    path = Path(model_id_or_path)
    if path.is_dir() and not (path / "config.json").is_file():
        message = f"{str(path)!r} is a folder without a config.json; it is not a model folder"
        raise ConfigError(message)
    found = local_config(model_id_or_path)
    if found is not None:
        return found
    if fetch is None:
        message = (
            f"cannot read the config of {str(model_id_or_path)!r}: it is not on disk; pass the "
            f"path of a downloaded model folder"
        )
        raise ConfigError(message)
    try:
        return dict(fetch(str(model_id_or_path)))
    except OSError as exc:
        message = (
            f"cannot read the config of {str(model_id_or_path)!r}: not a local folder, and the "
            f"HF hub or cache could not provide it ({exc}); pass the path of a downloaded model "
            f"folder"
        )
        raise ConfigError(message) from exc


def local_config(model_id_or_path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The model's config.json if it is on disk (a model folder, or the HF cache), else None.

    Never downloads: the core has no network code. A file that exists but is not JSON raises
    `ConfigError`.
    """
    path = Path(model_id_or_path)
    config_path: Path | None
    if path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            return None
    elif path.is_file() and path.name.endswith(".json"):
        config_path = path
    else:
        config_path = _hf_cache_config(os.fspath(model_id_or_path))
    if config_path is None:
        return None
    return read_config_file(config_path)


def read_config_file(config_path: Path) -> dict[str, Any]:
    """The JSON object in `config_path`; refuses a file that cannot be read or holds no object.

    Every reader of a model's JSON files (the facts here, the sizer's folders and indexes) refuses
    a damaged file with the same error.
    """
    return read_json_object(
        config_path,
        "repair or re-download the model's config.json",
        "a config.json holds one object of settings",
    )


def read_json_object(path: Path, repair: str, expected: str) -> dict[str, Any]:
    """The JSON object in `path`, or a `ConfigError` advising `repair` (the file cannot be read
    or parsed) or saying what it should hold, `expected` (it parsed to something else)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        error = ConfigError.build(
            f"cannot read {str(path)!r}", f"{type(exc).__name__}: {exc}", repair
        )
        raise error from exc
    if not isinstance(loaded, dict):
        error = ConfigError.build(f"{str(path)!r} is not a JSON object", None, expected)
        raise error
    return loaded
