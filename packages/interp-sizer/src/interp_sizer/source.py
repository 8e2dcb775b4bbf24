"""Which model is the user asking about, and what do its config and checkpoint say?

A model string is tried, in order, as: a `config.json` file or a model folder on disk; a repo id
in the local HuggingFace cache (config plus any downloaded safetensors); one of the configs
bundled with interp-core (`interp_core.known_models`), so popular models size offline; and last,
when the optional `hub` extra is installed and the machine is online, the Hub itself — the config
and the safetensors headers only, never a weight.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_core.configs import hf_cache_snapshot, read_config_file
from interp_core.errors import ConfigError
from interp_core.facts import ModelFacts
from interp_core.known_models import known_model_ids, load_known_config
from interp_sizer.errors import HubUnavailable, UnknownModel
from interp_sizer.formats import checkpoint_quantization, normalize_dtype
from interp_sizer.weights import (
    TensorRecord,
    WeightInventory,
    checkpoint_inventory,
    config_inventory,
    read_safetensors_header,
    safetensors_files,
)

__all__ = ["ResolvedModel", "resolve_config", "resolve_model"]


@dataclass(frozen=True)
class ResolvedModel:
    """A model the sizer can price: its id for `load_model`, config, facts and weights."""

    model_id: str  # what the snippet passes to load_model (repo id or folder path)
    origin: str  # 'folder', 'config file', 'hf cache', 'bundled', 'hub' or 'mapping'
    config: Mapping[str, Any]
    facts: ModelFacts
    inventory: WeightInventory
    native_dtype: str

    @property
    def weights_exact(self) -> bool:
        return self.inventory.source == "safetensors"


def _build(
    model_id: str,
    origin: str,
    config: Mapping[str, Any],
    records: list[TensorRecord] | None,
    files: tuple[str, ...] = (),
) -> ResolvedModel:
    facts = ModelFacts.from_config(config)
    native = normalize_dtype("auto", facts.torch_dtype)
    if records:
        inventory = checkpoint_inventory(records, files)
    else:
        inventory = config_inventory(facts, native, checkpoint_quantization(config))
    return ResolvedModel(model_id, origin, dict(config), facts, inventory, native)


def _folder_records(folder: Path) -> tuple[list[TensorRecord] | None, tuple[str, ...]]:
    files = safetensors_files(folder)
    if not files:
        return None, ()
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        # A partly downloaded sharded checkpoint would undercount: use it only when complete.
        weight_map = read_config_file(index).get("weight_map", {})
        needed = {str(name) for name in weight_map.values()}
        if not needed <= {file.name for file in files}:
            return None, ()
    records: list[TensorRecord] = []
    for file in files:
        records.extend(read_safetensors_header(file))
    return records, tuple(str(file) for file in files)


def resolve_config(config: Mapping[str, Any], model_id: str = "my-model") -> ResolvedModel:
    """A model from a config mapping alone (pasted into the app, or built in a test)."""
    if not isinstance(config, Mapping):
        error = ConfigError.build(
            f"a model config must be a JSON object, not {type(config).__name__}",
            "the sizer reads a model's dimensions from its config.json keys",
            "Paste the whole config.json",
        )
        raise error
    return _build(model_id, "mapping", config, None)


def resolve_model(model: str | os.PathLike[str], *, hub: bool | None = None) -> ResolvedModel:
    """Find `model` on disk, in the HF cache, among the bundled configs, or on the Hub.

    `hub=None` tries the Hub only when nothing local matches and `HF_HUB_OFFLINE` is unset;
    `hub=False` never goes online; `hub=True` goes online even for a bundled model, to read
    its safetensors headers (exact weights).
    """
    text = os.fspath(model).strip()
    if not text:
        error = UnknownModel.build(
            "no model given",
            "the sizer needs a config to read dimensions from",
            "Pass a HF repo id such as 'Qwen/Qwen3-8B', a model folder or a config.json path",
        )
        raise error
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            error = UnknownModel.build(
                f"{text!r} is a folder without a config.json",
                "a model folder holds config.json beside its weights",
                "Point at the model folder itself, or at its config.json",
            )
            raise error
        records, files = _folder_records(path)
        return _build(str(path), "folder", read_config_file(path / "config.json"), records, files)
    if path.is_file():
        records, files = _folder_records(path.parent)
        return _build(str(path.parent), "config file", read_config_file(path), records, files)
    if hub is not True:
        snapshot = hf_cache_snapshot(text) if "/" in text else None
        if snapshot is not None:
            records, files = _folder_records(snapshot)
            return _build(
                text, "hf cache", read_config_file(snapshot / "config.json"), records, files
            )
        if text in known_model_ids():
            return _build(text, "bundled", load_known_config(text), None)
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    if hub is False or (hub is None and (offline or "/" not in text)):
        raise UnknownModel(_unknown_message(text, offline))
    if hub is None and _bundled_spelling(text) is not None:
        # Only the case differs from a bundled id: a typo, answered at once instead of after
        # the Hub client's retries.
        raise UnknownModel(_unknown_message(text, offline, tried_hub=False))
    return _from_hub(text)


def _bundled_spelling(text: str) -> str | None:
    """The bundled id `text` matches when case is ignored, if it differs only by case."""
    folded = text.casefold()
    return next((n for n in known_model_ids() if n.casefold() == folded and n != text), None)


def _suggestions(text: str) -> str:
    known = known_model_ids()
    by_folded = {name.casefold(): name for name in known}
    close = difflib.get_close_matches(text.casefold(), list(by_folded), n=3, cutoff=0.5)
    return f" Did you mean {', '.join(repr(by_folded[c]) for c in close)}?" if close else ""


def _unknown_message(text: str, offline: bool, *, tried_hub: bool = False) -> str:
    known = known_model_ids()
    hint = _suggestions(text)
    online = (
        " The Hub was not tried because HF_HUB_OFFLINE is set."
        if offline
        else " The Hub was not tried (a repo id has the form 'org/name')."
        if "/" not in text
        else " The Hub was not tried: it differs only in case from a bundled id."
        if not tried_hub and _bundled_spelling(text) is not None
        else ""
    )
    return (
        f"unknown model {text!r}: it is not a file or folder here, not in the local HuggingFace "
        f"cache and not one of the {len(known)} bundled configs.{online}{hint} Pass a model "
        f"folder, a config.json path, a bundled id (`interp-size --list-models`), or a Hub repo "
        f"id with the `hub` extra installed (pip install 'interpoint-sizer[hub]')"
    )


def _hub_failure(exc: Exception) -> str:
    """What went wrong on the Hub, in words (the client's exception class means nothing to a
    user)."""
    name = type(exc).__name__
    if "RepositoryNotFound" in name or ("EntryNotFound" in name and "Local" not in name):
        return "the Hub has no such repository (or it is private)"
    if "Gated" in name:
        return "the repository is gated: accept its licence on the Hub and log in"
    if any(part in name for part in ("LocalEntryNotFound", "Offline", "Connect", "Timeout")):
        return "the Hub could not be reached and the config is not in the local cache"
    return "the Hub did not return its config.json"


def _from_hub(repo_id: str) -> ResolvedModel:
    try:
        import huggingface_hub  # the optional `hub` extra; never imported on the offline paths
    except ImportError as exc:
        error = HubUnavailable.build(
            f"{repo_id!r} is not on this machine and the Hub client is not installed",
            "reading a config from the Hub needs huggingface_hub",
            "pip install 'interpoint-sizer[hub]', or pass a local model folder or config.json",
        )
        raise error from exc
    try:
        config_path = huggingface_hub.hf_hub_download(repo_id, "config.json")
        config = read_config_file(Path(config_path))
    except Exception as exc:  # the client raises many types: offline, gated, missing, HTTP
        error = UnknownModel.build(
            f"cannot fetch the config of {repo_id!r} from the Hub",
            _hub_failure(exc),
            (
                f"{_suggestions(repo_id)} Check the repo id (Hub ids are case-sensitive) and "
                "your network or token, pass a bundled id (`interp-size --list-models`) or a "
                "local config.json"
            ).strip(),
        )
        raise error from exc
    records: list[TensorRecord] = []
    try:
        metadata = huggingface_hub.get_safetensors_metadata(repo_id)
        for file_meta in metadata.files_metadata.values():
            for name, info in file_meta.tensors.items():
                start, end = info.data_offsets
                records.append(TensorRecord(name, str(info.dtype), tuple(info.shape), end - start))
    except Exception:  # no safetensors on the Hub (or no access): price from the config instead
        records = []
    return _build(repo_id, "hub", config, records or None)
