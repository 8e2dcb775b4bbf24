"""Where is each family's tiny random model, and how is it built without a model hub?

No model hub is reachable in tests, so every family the engine supports is tested on a model
built here from its tiny config (`interp_testmodels.configs`): random weights, a few hundred
kilobytes, built in well under a second, saved with `save_pretrained` plus the shared test
tokenizer (`interp_testmodels.tokenizer`), and loaded back by path through the ordinary loaders.
The eager, vLLM and validator suites all use these folders, so a family is defined once.

Every parameter a default init leaves constant (norm weights, biases, attention sinks,
hyper-connection scales) is moved off its constant, so a norm or bias that is skipped or applied
twice changes the result.

`build_family(name)` returns the folder, building it at most once per cache key: the family, the
factory version, transformers and torch versions, the dtype, and a digest of the config and
tokenizer recipe. Builds write to a private temporary folder renamed into place, so concurrent
test workers never see a half-written model.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp_testmodels.cache import cache_root, publish_folder
from interp_testmodels.configs import FAMILIES, FAMILY_NAMES, UNAVAILABLE, FamilySpec
from interp_testmodels.tokenizer import build_tokenizer, pin_tokenizer_class, tokenizer_fingerprint

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "DTYPES",
    "FACTORY_VERSION",
    "FAMILIES",
    "FAMILY_NAMES",
    "MANIFEST_NAME",
    "UNAVAILABLE",
    "FamilySpec",
    "build_all",
    "build_family",
    "family_cache_root",
    "load_family",
]

# Bump when a change here alters what a build writes for an unchanged config (perturbation,
# tokenizer handling, files written); config edits change the digest by themselves.
FACTORY_VERSION = 1

MANIFEST_NAME = "interp_test_model.json"
DTYPES = ("float32", "bfloat16", "float16")

# How far a constant-initialised parameter moves: norm weights become 1 + 0.1·N(0,1) (or
# 0.1·N(0,1) where the norm stores weight - 1), biases 0.1·N(0,1). Attention sinks get a full
# N(0,1) so the sink takes a visible share of every attention row.
_PERTURB_SCALE = 0.1
_SINK_SCALE = 1.0

_BUILD_LOCK = threading.Lock()


def family_cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where built families live: `cache_dir`, else `$INTERP_TEST_CACHE`, else the user cache."""
    return cache_root(cache_dir, "INTERP_TEST_CACHE", "test-models")


def _spec(name: str) -> FamilySpec:
    try:
        return FAMILIES[name]
    except KeyError:
        message = (
            f"no test family named {name!r}: the families are {', '.join(FAMILY_NAMES)} "
            f"(transformers model_type names; the text-only Gemma-3, Qwen3.5 and Llama-4 are "
            f"'gemma3', 'qwen3_5', 'qwen3_5_moe' and 'llama4')"
        )
        raise KeyError(message) from None


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        message = f"dtype {dtype!r} is not one the factory saves in: choose one of {DTYPES}"
        raise ValueError(message)


def _provenance(spec: FamilySpec, dtype: str) -> dict[str, Any]:
    import torch
    import transformers

    return {
        "family": spec.name,
        "model_type": spec.model_type,
        "factory_version": FACTORY_VERSION,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype": dtype,
        "seed": _seed(spec.name),
        "config": spec.config,
        "tokenizer": tokenizer_fingerprint(),
    }


def _cache_key(spec: FamilySpec, dtype: str) -> str:
    provenance = _provenance(spec, dtype)
    digest = hashlib.sha256(json.dumps(provenance, sort_keys=True).encode()).hexdigest()[:12]
    return f"{spec.name}-{dtype}-f{FACTORY_VERSION}-tf{provenance['transformers']}-{digest}"


def _seed(name: str) -> int:
    # A stable per-family seed (Python's str hash is salted per process).
    return zlib.crc32(name.encode())


def build_family(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: str = "float32",
) -> Path:
    """The folder of family `name`'s tiny model and tokenizer, built on first use.

    Loadable with `AutoModelForCausalLM.from_pretrained(path)` and
    `AutoTokenizer.from_pretrained(path)`. Idempotent: a folder already in the cache is returned
    as is. Safe under concurrency: each builder writes a private temporary folder and renames it
    into place; the loser of a race discards its copy and returns the winner's.
    """
    spec = _spec(name)
    _check_dtype(dtype)
    root = family_cache_root(cache_dir)
    target = root / _cache_key(spec, dtype)
    if (target / MANIFEST_NAME).is_file():
        return target
    # Threads of one process take turns: the weights come from torch's global random stream,
    # which two interleaved builds would share. Processes need no lock, only the rename.
    with _BUILD_LOCK:
        if (target / MANIFEST_NAME).is_file():
            return target
        return publish_folder(
            target, MANIFEST_NAME, lambda folder: _write_family(spec, dtype, folder)
        )


def build_all(
    names: tuple[str, ...] | list[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: str = "float32",
) -> dict[str, Path]:
    """Build (or find) several families; all of them when `names` is None."""
    return {
        name: build_family(name, cache_dir=cache_dir, dtype=dtype)
        for name in (FAMILY_NAMES if names is None else names)
    }


def _write_family(spec: FamilySpec, dtype: str, folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    config = spec.make_config()
    # Seed right before construction so the weights depend on nothing built earlier in the
    # process; the perturbation continues the same random stream. fork_rng hands the caller's
    # random state back untouched, so building a model inside a seeded test changes nothing.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_seed(spec.name))
        model = AutoModelForCausalLM.from_config(
            config, attn_implementation="eager", dtype=torch.float32
        )
        _perturb(model)
    model.to(getattr(torch, dtype)).eval()
    model.save_pretrained(folder)

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(folder)
    pin_tokenizer_class(folder)

    manifest = {**_provenance(spec, dtype), "notes": spec.notes, "traits": list(spec.traits)}
    # Written last: its presence is what marks a folder complete.
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _perturb(model: torch.nn.Module) -> None:
    """Move every constant-initialised parameter off its constant, so all of them matter."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if not param.is_floating_point():
                continue
            if leaf == "sinks":
                param.add_(_SINK_SCALE * torch.randn_like(param))
            elif "bias" in leaf or _is_constant(param):
                param.add_(_PERTURB_SCALE * torch.randn_like(param))
        for name, buffer in model.named_buffers():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "e_score_correction_bias":
                # DeepSeek's selection-only bias: zero would hide a router that ignores it.
                buffer.add_(_PERTURB_SCALE * torch.randn_like(buffer))
            elif leaf == "layer_scalar":
                # Gemma-4 multiplies each block's output by a learned scalar (a buffer, ones at
                # init): at one, a backend that skips it would go unnoticed.
                buffer.add_(_PERTURB_SCALE * torch.randn_like(buffer))
            elif leaf == "tid2eid":
                # DeepSeek-V4's hash routing table ships zeros (the checkpoint fills it); give
                # each token top-k distinct experts so the routing is not one expert k times.
                n_tokens, top_k = buffer.shape
                n_experts = model.config.n_routed_experts
                table = torch.rand(n_tokens, n_experts).argsort(dim=-1)[:, :top_k]
                buffer.copy_(table.to(buffer.dtype))


def _is_constant(param: torch.Tensor) -> bool:
    flat = param.detach().reshape(-1)
    return bool(flat.numel() > 0 and (flat == flat[0]).all())


def load_family(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: str = "float32",
    attn_implementation: str = "eager",
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Family `name` loaded back from its folder with plain transformers, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_family(name, cache_dir=cache_dir, dtype=dtype)
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=getattr(torch, dtype), attn_implementation=attn_implementation
    ).eval()
    return model, AutoTokenizer.from_pretrained(path)
