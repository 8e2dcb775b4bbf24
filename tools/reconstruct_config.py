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
_NAMED = re.compile(r"similar configuration to that of\s+the\s+\[([\w.\-]+/[\w.\-]+)\]")


def reconstruct(model_type: str) -> tuple[str, dict[str, Any]]:
    """(the checkpoint the config class's docstring names, its config.json from the defaults)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type not in CONFIG_MAPPING:
        raise SystemExit(f"transformers has no config class for model_type {model_type!r}")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise SystemExit(f"transformers has no causal-LM class for model_type {model_type!r}")
    cls = CONFIG_MAPPING[model_type]
    named = _NAMED.search(cls.__doc__ or "")
    if named is None:
        raise SystemExit(
            f"{cls.__name__}'s docstring names no checkpoint its defaults describe, so they are "
            f"not evidence of any published config; nothing to reconstruct"
        )
    defaults = {k: v for k, v in cls().to_dict().items() if k not in _INTERNAL_KEYS}
    config = {"architectures": [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]], **defaults}
    return named.group(1), config


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
