"""Are the reconstructed bundled configs exactly what their recorded source gives?

Each entry of `interp_core/model_configs/PROVENANCE.json` says a file is transformers' documented
defaults for the checkpoint the config class's docstring names. With that transformers release
installed, `tools/reconstruct_config.py` rebuilds each file; it must match key for key, and the
docstring must name the very repo id the file is bundled under. Another transformers release may
document other defaults, so the comparison runs only on the recorded one.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

import transformers  # noqa: E402  (the workspace installs it; its absence must fail, not skip)

from interp_core.known_models import (  # noqa: E402
    config_provenance,
    known_model_ids,
    load_known_config,
)

RECORDED = sorted(m for m in known_model_ids() if config_provenance(m) is not None)


def _recorded_release(model_id: str) -> str:
    entry = config_provenance(model_id)
    assert entry is not None
    found = re.match(r"transformers (\d+\.\d+) ", str(entry["source"]))
    assert found is not None, entry["source"]
    return found.group(1)


@pytest.mark.parametrize("model_id", RECORDED)
def test_reconstructed_config_matches_its_recorded_source(model_id: str) -> None:
    release = _recorded_release(model_id)
    installed = ".".join(transformers.__version__.split(".")[:2])
    if installed != release:
        pytest.skip(f"recorded from transformers {release}; {installed} is installed")
    from reconstruct_config import reconstruct

    bundled = load_known_config(model_id)
    named, rebuilt = reconstruct(bundled["model_type"])
    assert named == model_id
    assert json.loads(json.dumps(rebuilt)) == bundled  # as stored: tuples become lists
