"""How many bytes does one value take, in each dtype and quantization format the sizer prices?

Three vocabularies meet here: the dtype names users pass (`bfloat16`, `fp16`, `auto`: the table
of names and aliases is interp-core's, shared with the backends), the dtype codes safetensors
headers use (`BF16`, `F8_E4M3`, `U8`), and the quantization schemes of
`load_model(quantization=...)` and of pre-quantized checkpoints (`quantization_config` in
`config.json`). Which backends may apply a scheme is also decided here, so the refusal names the
alternative in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interp_core.dtypes import AUTO_DTYPE, resolve_dtype
from interp_sizer import calibration as cal
from interp_sizer.errors import UnsupportedSetting

__all__ = [
    "BACKENDS",
    "DTYPE_BYTES",
    "KV_CACHE_DTYPES",
    "QUANTIZATIONS",
    "SAFETENSORS_BITS",
    "CheckpointQuantization",
    "Quantization",
    "check_quantization",
    "checkpoint_quantization",
    "dtype_bytes",
    "kv_dtype_bytes",
    "normalize_dtype",
]

# The backends the sizer prices; the names are interp_core.backends.FIRST_PARTY's.
BACKENDS = ("eager", "vllm", "vllm-static", "vllm-generate")
VLLM_BACKENDS = ("vllm", "vllm-static", "vllm-generate")

# Bytes per value of each dtype in interp_core.dtypes.DTYPES (the names and their aliases).
DTYPE_BYTES: Mapping[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}

# Bits per stored element of each safetensors dtype code.
SAFETENSORS_BITS: Mapping[str, int] = {
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F32": 32,
    "I32": 32,
    "U32": 32,
    "F16": 16,
    "BF16": 16,
    "I16": 16,
    "U16": 16,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "I8": 8,
    "U8": 8,
    "BOOL": 8,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "F4": 4,
}

# Values `kv_cache_dtype=` accepts on vLLM, and the bytes each stores per value.
KV_CACHE_DTYPES: Mapping[str, int | None] = {
    "auto": None,  # the model dtype
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


def normalize_dtype(dtype: str | None, native: str | None) -> str:
    """The dtype a load will compute in: 'auto' means the checkpoint's own (bf16 if unstated).

    The names and aliases are interp-core's (`interp_core.dtypes`), the ones every backend
    accepts; the snippet then names the resolved dtype.
    """
    name = resolve_dtype(AUTO_DTYPE if dtype is None else dtype, native)
    if name is None:
        error = UnsupportedSetting.build(
            f"dtype {dtype!r} is not one the sizer prices",
            "a model loads its activations and unquantized weights in float32, bfloat16 or float16",
            "Pass dtype='bfloat16', 'float16', 'float32' or 'auto' (the checkpoint's own); "
            "narrower weights are a quantization= choice",
        )
        raise error
    return name


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype: str, backend: str) -> int:
    """Bytes per cached value; refuses a KV dtype the backend cannot apply."""
    name = "auto" if kv_cache_dtype is None else str(kv_cache_dtype).strip().lower()
    if name not in KV_CACHE_DTYPES:
        error = UnsupportedSetting.build(
            f"kv_cache_dtype {kv_cache_dtype!r} is unknown",
            "the paged KV cache stores the model dtype ('auto') or 8-bit floats",
            f"Pass one of {', '.join(KV_CACHE_DTYPES)}",
        )
        raise error
    if name != "auto" and backend == "eager":
        error = UnsupportedSetting.build(
            f"kv_cache_dtype={name!r} on the eager backend",
            "HF transformers keeps its KV cache in the model dtype; only vLLM quantizes it",
            "Use backend='vllm' (or 'vllm-static'), or leave kv_cache_dtype='auto'",
        )
        raise error
    stated = KV_CACHE_DTYPES[name]
    return stated if stated is not None else DTYPE_BYTES[model_dtype]


@dataclass(frozen=True)
class Quantization:
    """A quantize-on-load scheme: bytes per linear weight and where it can run."""

    name: str
    calibration: cal.Calibration
    backends: tuple[str, ...]
    refusal_instead: str  # what to use where the scheme is refused

    @property
    def bytes_per_weight(self) -> float:
        return float(self.calibration.value)


QUANTIZATIONS: Mapping[str, Quantization] = {
    "fp8": Quantization(
        "fp8",
        cal.FP8_BYTES_PER_WEIGHT,
        VLLM_BACKENDS,
        "use a vLLM backend, or load a repo that ships FP8 weights",
    ),
    "bnb-4bit": Quantization("bnb-4bit", cal.BNB4_BYTES_PER_WEIGHT, ("eager", *VLLM_BACKENDS), ""),
    "bnb-8bit": Quantization(
        "bnb-8bit",
        cal.BNB8_BYTES_PER_WEIGHT,
        ("eager",),
        "use backend='eager', or quantization='fp8' on vLLM for the same one byte per weight",
    ),
}


def check_quantization(quantization: str | None, backend: str) -> Quantization | None:
    """The scheme for a `quantization=` argument, refused where the backend cannot apply it."""
    if quantization is None or str(quantization).lower() in ("", "none"):
        return None
    scheme = QUANTIZATIONS.get(str(quantization).lower())
    if scheme is None:
        error = UnsupportedSetting.build(
            f"quantization {quantization!r} is not a quantize-on-load scheme",
            "interp-engine narrows weights on load with fp8, bnb-4bit or bnb-8bit; formats such "
            "as MXFP4, AWQ or GPTQ come pre-quantized in the checkpoint and are read from its "
            "config",
            f"Pass one of {', '.join(QUANTIZATIONS)}, or size a pre-quantized repo",
        )
        raise error
    if backend not in scheme.backends:
        error = UnsupportedSetting.build(
            f"quantization={scheme.name!r} on the {backend} backend",
            f"{backend} cannot apply it",
            scheme.refusal_instead[0].upper() + scheme.refusal_instead[1:],
        )
        raise error
    return scheme


@dataclass(frozen=True)
class CheckpointQuantization:
    """What a pre-quantized checkpoint's config says about its packed weights."""

    method: str  # quant_method as the config spells it
    bytes_per_weight: float
    experts_only: bool  # gpt-oss packs only the routed experts; attention stays 16-bit
    calibration: cal.Calibration


def checkpoint_quantization(config: Mapping[str, Any]) -> CheckpointQuantization | None:
    """The checkpoint's own quantization, read from `quantization_config`, or None."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        text = config.get("text_config")
        quant = text.get("quantization_config") if isinstance(text, Mapping) else None
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4":
        return CheckpointQuantization(
            method, cal.MXFP4_BYTES_PER_WEIGHT.value, True, cal.MXFP4_BYTES_PER_WEIGHT
        )
    if method == "fp8" or (method == "compressed-tensors" and "fp8" in str(quant).lower()):
        blockwise = quant.get("weight_block_size") is not None
        per_weight = cal.FP8_BYTES_PER_WEIGHT.value + (
            cal.FP8_BLOCK_SCALE_BYTES_PER_WEIGHT.value if blockwise else 0.0
        )
        source = cal.FP8_BLOCK_SCALE_BYTES_PER_WEIGHT if blockwise else cal.FP8_BYTES_PER_WEIGHT
        return CheckpointQuantization(method, per_weight, False, source)
    if method in ("awq", "gptq", "compressed-tensors"):
        bits = quant.get("bits") or quant.get("w_bit") or 4
        per_weight = cal.INT4_GROUP128_BYTES_PER_WEIGHT.value * (int(bits) / 4)
        return CheckpointQuantization(method, per_weight, False, cal.INT4_GROUP128_BYTES_PER_WEIGHT)
    if method == "bitsandbytes":
        four = bool(quant.get("load_in_4bit"))
        source = cal.BNB4_BYTES_PER_WEIGHT if four else cal.BNB8_BYTES_PER_WEIGHT
        return CheckpointQuantization(
            "bnb-4bit" if four else "bnb-8bit", source.value, False, source
        )
    error = UnsupportedSetting.build(
        f"the checkpoint is quantized with {method!r}",
        "the sizer has no byte count for that format",
        "Size the unquantized repo, or report the format so it can be added with its source",
    )
    raise error
