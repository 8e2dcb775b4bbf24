"""Which tiny checkpoint recommends its own sampling settings, for the generation tests?

`recommending_checkpoint(folder, settings)` lays out a family's tiny model (files linked, not
copied) under `folder` with a `generation_config.json` that states `settings` beside the token ids
the family already writes, so a test can load a checkpoint whose authors "recommend" a
temperature, a top_k or a repetition penalty.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from interp_testmodels.families import build_family

__all__ = ["RECOMMENDED", "recommending_checkpoint"]

# What the tests' checkpoint recommends: none of these is a library default, so a knob that
# followed the file is told apart from one that did not.
RECOMMENDED: dict[str, Any] = {
    "do_sample": True,
    "temperature": 0.7,
    "top_k": 5,
    "repetition_penalty": 1.3,
}


def recommending_checkpoint(
    folder: str | os.PathLike[str],
    settings: dict[str, Any] | None = None,
    *,
    family: str = "llama",
) -> Path:
    """`folder` holding family `family`'s checkpoint with `settings` (default `RECOMMENDED`)
    written into its generation_config.json; returns the folder."""
    source = build_family(family)
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name != "generation_config.json" and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    config: dict[str, Any] = {}
    stated = source / "generation_config.json"
    if stated.is_file():
        config = json.loads(stated.read_text())
    config.update(RECOMMENDED if settings is None else settings)
    (target / "generation_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return target
