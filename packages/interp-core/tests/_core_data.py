"""The data files under `data/`: published config shapes and hand-written expected values.

They are data, so they live as JSON beside the tests rather than as Python literals: a table
reads as the numbers it is, and a test states only what it changes. Paths are taken from this
file, so the suite finds them in pytest's importlib mode from any working directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interp_core.testing.published_shapes import config_file

DATA = Path(__file__).parent / "data"


def load(name: str) -> Any:
    """The JSON file `data/<name>`, as json reads it (so 1 and 1.0 stay apart)."""
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def data_config(name: str, section: str | None = None, **overrides: Any) -> dict[str, Any]:
    """The config.json mapping `data/configs/<name>.json`, `overrides` on top (inside `section`
    where given)."""
    return config_file(DATA / "configs" / f"{name}.json", section, **overrides)
