"""Rebuild a checkpoint's config.json from transformers' documented configuration defaults.

    python tools/reconstruct_config.py MODEL_TYPE [--as MODEL_ID] [--write]

There is no Hub access where interp-core's offline configs are made, and a config is never
written from memory. transformers' configuration classes state which checkpoint their defaults
describe ("Instantiating a configuration with the defaults will yield a similar configuration
to that of <org/name>"), so their defaults are evidence that can be read back: this prints the
checkpoint the docstring names and the config.json form of the defaults (the causal-LM class
as `architectures`, without the keys transformers adds to every config object and no published
config.json holds). With `--write` it also stores it under `interp_core/model_configs/`.

Where the defaults disagree with the published file, the checkpoint's PROVENANCE entry may carry
`corrections` ({config key: value}, each replacing that key whole) with, for every corrected
key, the public sources that state the value (`correction_sources`). They are applied on top of
the defaults here, so the bundled file is always "defaults + sourced corrections" and a test can
rebuild it. `--as MODEL_ID` rebuilds a checkpoint other than the one the docstring names (another
size of the family): its entry must then say which one the defaults describe (`base`), and its
corrections turn that one into it. Such an entry may also list `omitted` keys: the defaults'
settings of a sublayer kind the checkpoint has none of (a base with experts, a checkpoint
without), which would describe no layer of it; each needs a source showing that absence.
A config class whose docstring names no checkpoint (Bamba) has defaults that describe nothing
published; its entry may say `base: null` (generic defaults) only when its corrections state
every headline key the defaults hold (`headline_keys`), or list it, sourced, as `omitted` (a
key the published file does not state), so no default stands for a dimension.

A reconstruction is bundled only after its headline dimensions have been checked against an
independent public source; `interp_core/model_configs/PROVENANCE.json` records the source, the
pages checked and what could not be checked. This tool writes no provenance: that entry is a
person's judgement, not the tool's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "packages/interp-core/src/interp_core/model_configs"

# Keys every PreTrainedConfig carries for transformers' own use (labels, output switches, the
# writing version); a checkpoint's published config.json states none of them. `dtype` is left
# out too: the defaults say nothing about the dtype a checkpoint was published in.
_INTERNAL_KEYS = frozenset(
    {
        "_name_or_path",
        "architectures",
        "chunk_size_feed_forward",
        "dtype",
        "id2label",
        "is_encoder_decoder",
        "label2id",
        "output_attentions",
        "output_hidden_states",
        "problem_type",
        "return_dict",
        "transformers_version",
    }
)
# Keys whose defaults would stand for a dimension of the checkpoint (what ModelFacts and the
# sizer read): with `base: null` each one the defaults hold must be a sourced correction.
_HEADLINE_KEYS = frozenset(
    {
        "head_dim",
        "hidden_size",
        "intermediate_size",
        "max_position_embeddings",
        "num_attention_heads",
        "num_hidden_layers",
        "num_key_value_heads",
        "tie_word_embeddings",
        "vocab_size",
    }
)
_HEADLINE_PREFIXES = (
    "attn_layer",
    "layer_types",
    "layers_block_type",
    "mamba_",
    "moe_",
    "num_experts",
)
_NAMED = re.compile(r"similar configuration to that of\s+the\s+\[([\w.\-]+/[\w.\-]+)\]")


def reconstruct(model_type: str, generic: bool = False) -> tuple[str | None, dict[str, Any]]:
    """(the checkpoint the config class's docstring names, its config.json from the defaults).

    `generic` accepts a docstring that names none (the name is then None): the defaults are
    then no evidence of any checkpoint, and `rebuild` requires every headline key corrected."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING:
        raise SystemExit(f"transformers has no config class for model_type {model_type!r}")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise SystemExit(f"transformers has no causal-LM class for model_type {model_type!r}")
    cls = CONFIG_MAPPING[model_type]
    named = _NAMED.search(cls.__doc__ or "")
    if named is None and not generic:
        raise SystemExit(
            f"{cls.__name__}'s docstring names no checkpoint its defaults describe, so they are "
            f"not evidence of any published config; nothing to reconstruct"
        )
    defaults = {k: v for k, v in cls().to_dict().items() if k not in _INTERNAL_KEYS}
    config = {"architectures": [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]], **defaults}
    return (None if named is None else named.group(1)), config


def headline_keys(config: dict[str, Any]) -> list[str]:
    """The keys of `config` that state a dimension or layer pattern of the model, sorted."""
    return sorted(k for k in config if k in _HEADLINE_KEYS or k.startswith(_HEADLINE_PREFIXES))


def provenance_entry(model_id: str) -> dict[str, Any] | None:
    """The PROVENANCE.json entry of `model_id`, None when it has none."""
    record = json.loads((CONFIG_DIR / "PROVENANCE.json").read_text(encoding="utf-8"))
    return record["configs"].get(model_id)


def apply_corrections(config: dict[str, Any], corrections: dict[str, Any]) -> dict[str, Any]:
    """`config` with each corrected key replaced whole (a nested mapping too, so a correction
    states the entire value a source gives, never a merge with defaults nobody checked)."""
    return {**config, **corrections}


def omit_keys(config: dict[str, Any], omitted: list[str]) -> dict[str, Any]:
    """`config` without the `omitted` keys, refusing a key the defaults do not hold (a typo would
    otherwise claim a removal that removed nothing)."""
    missing = sorted(set(omitted) - set(config))
    if missing:
        raise SystemExit(f"omitted keys {missing} are not in the defaults")
    return {k: v for k, v in config.items() if k not in omitted}


def rebuild(model_type: str, model_id: str | None = None) -> tuple[str, dict[str, Any]]:
    """(the checkpoint id, its config: the defaults plus its entry's sourced corrections).

    `model_id` defaults to the checkpoint the docstring names. Another id needs an entry whose
    `base` is the named checkpoint; an entry whose `base` is not what the docstring names (a
    transformers release that moved on) is refused rather than rebuilt from other defaults.
    """
    entry = None if model_id is None else provenance_entry(model_id)
    if entry is not None and "base" in entry and entry["base"] is None:
        return model_id, _rebuild_generic(model_type, model_id, entry)
    named, config = reconstruct(model_type)
    target = model_id or named
    entry = provenance_entry(target)
    base = target if entry is None else entry.get("base", target)
    if base != named:
        raise SystemExit(
            f"{model_type}'s defaults describe {named}, not {base}; {target} needs a PROVENANCE "
            f"entry with base {named!r} and sourced corrections for its dimensions"
        )
    if entry is not None:
        config = apply_corrections(config, entry.get("corrections", {}))
        config = omit_keys(config, entry.get("omitted", []))
    return target, config


def _rebuild_generic(model_type: str, model_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """`model_id`'s config from generic defaults (`base: null`): refused when the docstring does
    name a checkpoint (its entry should then use that as `base`) or when a headline key the
    defaults hold is left uncorrected (a default would stand for a published dimension)."""
    named, config = reconstruct(model_type, generic=True)
    if named is not None:
        raise SystemExit(
            f"{model_type}'s defaults describe {named}: {model_id}'s entry should say base "
            f"{named!r}, not null"
        )
    corrections, omitted = entry.get("corrections", {}), entry.get("omitted", [])
    missing = [k for k in headline_keys(config) if k not in corrections and k not in omitted]
    if missing:
        raise SystemExit(
            f"{model_id} rebuilds from generic defaults (base null), so every headline key must "
            f"be a sourced correction (or a sourced omission); uncorrected: {missing}"
        )
    config = apply_corrections(config, corrections)
    return omit_keys(config, entry.get("omitted", []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("model_type")
    parser.add_argument("--as", dest="model_id", help="the checkpoint to rebuild (needs a base)")
    parser.add_argument("--write", action="store_true", help="store it under model_configs/")
    args = parser.parse_args(argv)
    model_id, config = rebuild(args.model_type, args.model_id)
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    if args.write:
        path = CONFIG_DIR / (model_id.replace("/", "--", 1) + ".json")
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    else:
        print(f"# {model_id}", file=sys.stderr)
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
