"""What does the eager backend need settled before it loads any weights?

The config read (local folder, HF cache or the hub through transformers), the torch dtype a
requested name means, and the load options that must be refused before a download starts:
quantization, the GPU count. `EagerModel.__init__` calls these; nothing here touches a model.
"""

from __future__ import annotations

from typing import Any

import torch

from interp_core.configs import model_config
from interp_core.dtypes import accepted_dtype_names, resolve_dtype
from interp_core.errors import CapabilityUnsupported

__all__ = [
    "bnb_config",
    "check_gpus",
    "check_quantization",
    "read_config",
    "torch_dtype",
    "transformers_version",
]

# The canonical dtype names of interp_core.dtypes (which also holds their aliases and "auto").
_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def read_config(model_id: str, trust_remote_code: bool) -> dict[str, Any]:
    def fetch(name: str) -> dict[str, Any]:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code).to_dict()

    return model_config(model_id, fetch=fetch)


def torch_dtype(dtype: Any, stated: str | None) -> torch.dtype:
    """The torch dtype `dtype` names; `stated` is the checkpoint's own (what "auto" means)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = resolve_dtype(dtype, stated)
    if name is not None:
        return _TORCH_DTYPES[name]
    message = (
        f"dtype={dtype!r} is not a dtype the eager backend loads; use one of "
        f"{', '.join(accepted_dtype_names())}"
    )
    raise CapabilityUnsupported(message)


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def check_quantization(quantization: str | None) -> str | None:
    if quantization in (None, "bnb-4bit", "bnb-8bit"):
        return quantization
    if quantization == "fp8":
        message = (
            "quantization='fp8' is not something the eager backend can apply on load; use a vLLM "
            "backend (load_model(..., backend='vllm', quantization='fp8')) or a checkpoint "
            "shipped in FP8"
        )
        raise CapabilityUnsupported(message)
    message = f"quantization={quantization!r} is unknown; use 'bnb-4bit', 'bnb-8bit' or None"
    raise CapabilityUnsupported(message)


def bnb_config(quantization: str, dtype: torch.dtype) -> Any:
    try:
        import bitsandbytes  # noqa: F401
        from transformers import BitsAndBytesConfig
    except ImportError as error:
        message = (
            f"quantization={quantization!r} needs bitsandbytes; "
            f"pip install 'interp-eager[quant]' (CUDA only)"
        )
        raise CapabilityUnsupported(message) from error
    if quantization == "bnb-4bit":
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=dtype)
    return BitsAndBytesConfig(load_in_8bit=True)


def check_gpus(num_gpus: int) -> None:
    available = torch.cuda.device_count()
    if available < num_gpus:
        message = (
            f"num_gpus={num_gpus} but this machine has {available} CUDA device(s); pass "
            f"num_gpus={max(available, 1)}"
        )
        raise CapabilityUnsupported(message)
