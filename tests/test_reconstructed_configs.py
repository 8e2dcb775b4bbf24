"""Are the reconstructed bundled configs exactly what their recorded source gives?

Each entry of `interp_core/model_configs/PROVENANCE.json` says a file is transformers' documented
defaults for the checkpoint the config class's docstring names (or, with `base`, for another
size of the family; with `base: null`, generic defaults of a class naming none), plus the
entry's sourced corrections. With that transformers release
installed, `tools/reconstruct_config.py` rebuilds each file; it must match key for key, and the
docstring must name the very repo id the file is bundled under, or its `base`. Another
transformers release may document other defaults, so the comparison runs only on the recorded one.
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
    from reconstruct_config import rebuild, reconstruct

    bundled = load_known_config(model_id)
    entry = config_provenance(model_id)
    assert entry is not None
    # `base: null`: the docstring names no checkpoint, and must still name none.
    generic = "base" in entry and entry["base"] is None
    named, _ = reconstruct(bundled["model_type"], generic=generic)
    assert named == entry.get("base", model_id)
    target, rebuilt = rebuild(bundled["model_type"], model_id)
    assert target == model_id
    assert json.loads(json.dumps(rebuilt)) == bundled  # as stored: tuples become lists


@pytest.mark.parametrize("model_id", RECORDED)
def test_each_correction_changes_a_default_unless_it_restates_a_base_dimension(
    model_id: str,
) -> None:
    # A correction claims the defaults are wrong for that key; one equal to the default would
    # claim a disagreement nobody found. Only a `base` entry restates unchanged headline
    # dimensions, because every one of them must carry a source there.
    release = _recorded_release(model_id)
    installed = ".".join(transformers.__version__.split(".")[:2])
    if installed != release:
        pytest.skip(f"recorded from transformers {release}; {installed} is installed")
    from reconstruct_config import reconstruct

    entry = config_provenance(model_id)
    assert entry is not None
    generic = "base" in entry and entry["base"] is None
    _, defaults = reconstruct(load_known_config(model_id)["model_type"], generic=generic)
    defaults = json.loads(json.dumps(defaults))
    for key, value in entry.get("corrections", {}).items():
        # A key the defaults lack (a `head_dim` the class reads with getattr) is an addition.
        if key in defaults and "base" not in entry:
            assert defaults[key] != value, f"{key}: the correction equals the default"


def test_another_checkpoint_is_refused_without_an_entry_naming_the_defaults_as_its_base() -> None:
    # Defaults describe the checkpoint the docstring names; rebuilding another one from them
    # without a recorded base (and its sourced dimensions) would pass one model off as another.
    from reconstruct_config import rebuild

    with pytest.raises(SystemExit, match="needs a PROVENANCE entry with base"):
        rebuild("exaone4", "acme/not-a-recorded-checkpoint")
    named, _ = rebuild("exaone4")
    assert named == "LGAI-EXAONE/EXAONE-4.0-32B"
    target, config = rebuild("exaone4", "LGAI-EXAONE/EXAONE-4.0-1.2B")
    assert (target, config["num_hidden_layers"]) == ("LGAI-EXAONE/EXAONE-4.0-1.2B", 30)


def test_generic_defaults_are_refused_unless_every_headline_key_is_corrected() -> None:
    # `base: null` (a docstring naming no checkpoint): a default left standing for a dimension
    # would be a published value nobody checked; a class whose docstring does name one must use
    # that as its base instead.
    from reconstruct_config import _rebuild_generic, headline_keys, reconstruct

    named, defaults = reconstruct("bamba", generic=True)
    assert named is None
    keys = headline_keys(defaults)
    assert {"num_hidden_layers", "attn_layer_indices", "mamba_d_state", "vocab_size"} <= set(keys)
    assert "rms_norm_eps" not in keys
    corrections = {k: defaults[k] for k in keys}
    _rebuild_generic("bamba", "acme/bamba", {"corrections": corrections})
    del corrections["mamba_d_state"]
    with pytest.raises(SystemExit, match=r"uncorrected: \['mamba_d_state'\]"):
        _rebuild_generic("bamba", "acme/bamba", {"corrections": corrections})
    entry = {"corrections": corrections, "omitted": ["mamba_d_state"]}
    assert "mamba_d_state" not in _rebuild_generic("bamba", "acme/bamba", entry)
    with pytest.raises(SystemExit, match=re.escape("should say base 'LGAI-EXAONE/EXAONE-4.0-32B'")):
        _rebuild_generic("exaone4", "acme/exaone", {"corrections": {}})


def test_omitted_keys_leave_the_file_and_an_unknown_one_is_refused() -> None:
    # An entry may drop the defaults' settings of a sublayer kind its checkpoint lacks; dropping a
    # key the defaults never held would claim a removal that removed nothing.
    from reconstruct_config import omit_keys

    assert omit_keys({"a": 1, "n_routed_experts": 8}, ["n_routed_experts"]) == {"a": 1}
    with pytest.raises(SystemExit, match="not in the defaults"):
        omit_keys({"a": 1}, ["n_routed_experts"])
