"""Reference runner for TransformerLens: TransformerBridge (raw or compatibility mode) and
HookedTransformer. Executed with a reference environment's python; imports only TransformerLens,
transformers, torch, safetensors and the standard library.

Modes:
- tl_bridge: `TransformerBridge.boot_transformers(folder)`: HF modules wrapped with hooks, raw
  HF numerics (eager attention).
- tl_bridge_compat: the same after `enable_compatibility_mode()` with default processing
  (fold_ln, center_writing_weights, center_unembed, fold_value_biases). Each read carries a
  compat class; the convention ("raw" / "centred") is decided here from the processing that
  actually ran (see translate.py).
- tl_hooked: `HookedTransformer` built from the folder's config.json with no processing, via the
  explicit-config recipe: `from_pretrained` rejects local paths, the loader sniffs folder names
  (a path containing "llama" or "gemma" takes a name-only branch), GPT-2 configs written by
  transformers 5 lack `n_ctx`, and Gemma-2 has no config path from a local folder.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _runner_common as common

_FORWARD = "LOGITS"


def _has_value_bias(model_dir: str) -> bool:
    """Whether the checkpoint has a value-projection bias (read from the weight names)."""
    from safetensors import safe_open

    suffixes = ("v_proj.bias", "c_attn.bias", "query_key_value.bias", "qkv_proj.bias", "Wqkv.bias")
    for file in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as handle:
            if any(name.endswith(suffixes) for name in handle.keys()):
                return True
    return False


def _bridge(job: common.Job, compat: bool) -> tuple[Any, dict[str, str]]:
    from transformer_lens.model_bridge import TransformerBridge

    try:
        bridge = TransformerBridge.boot_transformers(
            job.model_dir, device="cpu", dtype=torch.float32
        )
    except Exception as exc:
        message = f"TransformerBridge.boot_transformers failed: {common.describe(exc)}"
        raise common.Unsupported(message) from exc
    conventions: dict[str, str] = {}
    if compat:
        value_bias = _has_value_bias(job.model_dir)
        bridge.enable_compatibility_mode(disable_warnings=True)
        cfg = bridge.cfg
        centred_writes = getattr(cfg, "normalization_type", None) in ("LN", "LNPre")
        softcap = getattr(cfg, "output_logits_soft_cap", -1.0) or -1.0
        conventions = {
            "residual": "centred" if centred_writes else "raw",
            "logits": "raw" if softcap > 0 else "centred",
            "unchanged": "raw",
            # fold_ln turns a LayerNorm's bias into a value bias, and fold_value_biases then
            # moves every value bias into the output bias: value and z change.
            "value": "not_expressible" if value_bias or centred_writes else "raw",
        }
        job.notes.append(
            f"compatibility mode: normalization_type={getattr(cfg, 'normalization_type', None)}, "
            f"writing weights centred={centred_writes}, unembed centred={softcap <= 0}, "
            f"value biases present={value_bias}"
        )
    return bridge, conventions


def _neutral_folder(job: common.Job) -> Path:
    """A symlink to the model under a name TransformerLens cannot mistake for a model name."""
    base = Path(tempfile.gettempdir())
    if any(word in str(base).lower() for word in ("llama", "gemma")):
        base = Path("/tmp")
    folder = Path(tempfile.mkdtemp(prefix="tlref", dir=base)) / f"m{job.index}"
    if any(word in str(folder).lower() for word in ("llama", "gemma")):
        message = f"cannot make a neutral folder name for HookedTransformer (got {folder})"
        raise common.Unsupported(message)
    folder.symlink_to(Path(job.model_dir).resolve(), target_is_directory=True)
    return folder


def _gemma2_config(local: dict[str, Any], loading: Any) -> dict[str, Any]:
    """HookedTransformer's Gemma-2 config for a local folder: TL 3.9 only knows Gemma-2 by its
    hub names, so start from its built-in 2b dict and overwrite every dimension."""
    cfg = dict(loading.convert_hf_model_config("google/gemma-2-2b"))
    n_layers = local["num_hidden_layers"]
    layer_types = local.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)
    ]
    rope = local.get("rope_parameters") or {}
    cfg.update(
        d_model=local["hidden_size"],
        d_head=local.get("head_dim") or local["hidden_size"] // local["num_attention_heads"],
        n_heads=local["num_attention_heads"],
        d_mlp=local["intermediate_size"],
        n_layers=n_layers,
        n_ctx=local.get("max_position_embeddings", cfg["n_ctx"]),
        eps=local.get("rms_norm_eps", cfg["eps"]),
        d_vocab=local["vocab_size"],
        act_fn=local.get("hidden_activation") or cfg["act_fn"],
        rotary_base=rope.get("rope_theta", local.get("rope_theta", cfg["rotary_base"])),
        rotary_dim=local.get("head_dim") or local["hidden_size"] // local["num_attention_heads"],
        n_key_value_heads=local.get("num_key_value_heads", local["num_attention_heads"]),
        window_size=local.get("sliding_window") or cfg["window_size"],
        attn_types=["local" if t == "sliding_attention" else "global" for t in layer_types],
        attn_scores_soft_cap=local.get("attn_logit_softcapping") or -1.0,
        output_logits_soft_cap=local.get("final_logit_softcapping") or -1.0,
        attn_scale=math.sqrt(local.get("query_pre_attn_scalar", cfg.get("d_head", 256))),
    )
    return cfg


def unprocessed(folder: str, hf: Any, tokenizer: Any = None) -> Any:
    """HookedTransformer of `folder`'s config holding `hf`'s weights with no weight processing
    (no folded norms, centring or folded value biases), so its activations are the raw HF ones.
    Shared with the bench's runner (`interp_validator/bench/runner_engines.py`)."""
    import transformer_lens.loading_from_pretrained as loading
    from transformer_lens import HookedTransformer

    cfg = loading.get_pretrained_model_config(
        folder, fold_ln=False, device="cpu", dtype=torch.float32
    )
    state = loading.get_pretrained_state_dict(folder, cfg, hf)
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    model.load_and_process_state_dict(
        state,
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=False,
    )
    return model


def _hooked(job: common.Job) -> Any:
    import transformer_lens.loading_from_pretrained as loading
    from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config

    try:  # a probe, so an old TransformerLens is refused by name; `unprocessed` builds it
        from transformer_lens import HookedTransformer  # noqa: F401
    except ImportError as exc:
        message = f"this TransformerLens has no HookedTransformer: {common.describe(exc)}"
        raise common.Unsupported(message) from exc
    if not hasattr(GPT2Config(), "n_ctx"):
        # transformers 5 no longer writes/aliases n_ctx; TransformerLens still reads it.
        GPT2Config.n_ctx = property(lambda self: self.n_positions)
    local = json.loads((Path(job.model_dir) / "config.json").read_text())
    folder = _neutral_folder(job)
    original_convert = loading.convert_hf_model_config
    if (local.get("architectures") or [""])[0] == "Gemma2ForCausalLM":

        def convert(name: str, **kwargs: Any) -> dict[str, Any]:
            if str(name) == str(folder):
                return _gemma2_config(local, loading)
            return original_convert(name, **kwargs)

        loading.convert_hf_model_config = convert
    try:
        hf = AutoModelForCausalLM.from_pretrained(
            job.model_dir, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        tokenizer = AutoTokenizer.from_pretrained(job.model_dir)
        model = unprocessed(str(folder), hf, tokenizer)
    except Exception as exc:
        message = f"HookedTransformer (explicit-config recipe) failed: {common.describe(exc)}"
        raise common.Unsupported(message) from exc
    finally:
        loading.convert_hf_model_config = original_convert
        shutil.rmtree(folder.parent, ignore_errors=True)  # the symlink was needed to load only
    return model.eval()


def run(mode: str, job: common.Job) -> None:
    compat = mode == "tl_bridge_compat"
    conventions: dict[str, str] = {}
    if mode in ("tl_bridge", "tl_bridge_compat"):
        model, conventions = _bridge(job, compat)
    elif mode == "tl_hooked":
        model = _hooked(job)
    else:
        message = f"runner_tl.py has no mode {mode!r}"
        raise ValueError(message)
    available = set(model.hook_dict)
    wanted: list[dict[str, Any]] = []
    for read in job.reads:
        convention = "raw"
        if compat:
            convention = conventions[read.get("compat_class") or "unchanged"]
            if convention == "not_expressible":
                job.not_expressible(
                    read,
                    "not expressible in compatibility mode: fold_value_biases moves the value "
                    "bias (the model's own, or the LayerNorm bias fold_ln folds into W_V) into "
                    "the output bias, which changes value and z",
                )
                continue
        read = {**read, "convention": convention}
        if read["target"] != _FORWARD and read["target"] not in available:
            job.not_expressible(
                read, f"{type(model).__name__} has no hook {read['target']} on this model"
            )
            continue
        wanted.append(read)
    names = {read["target"] for read in wanted}
    try:
        logits, cache = model.run_with_cache(job.ids(), names_filter=lambda name: name in names)
    except Exception as exc:
        message = f"{type(model).__name__}.run_with_cache failed: {common.describe(exc)}"
        raise common.Unsupported(message) from exc
    captured = dict(cache.items())
    for read in wanted:
        target = read["target"]
        if target == _FORWARD:
            job.put(read, logits, source="forward logits")
        elif target in captured:
            job.put(read, captured[target])
        else:
            job.not_expressible(read, f"hook {target} exists but did not fire on this model")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(common.main(run))
