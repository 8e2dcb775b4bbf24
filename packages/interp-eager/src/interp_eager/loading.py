"""What does the eager backend need settled before it loads any weights?

The config read (local folder, HF cache or the hub through transformers), the torch dtype a
requested name means, and the load options that must be refused before a download starts:
quantization, the GPU count. `EagerModel.__init__` calls these; nothing here touches a model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import torch

from interp_core.configs import model_config
from interp_core.dtypes import accepted_dtype_names, resolve_dtype
from interp_core.errors import CapabilityUnsupported, HubKernelUnsupported
from interp_core.family_conventions import conventions_for
from interp_core.known_models import bundled_first

__all__ = [
    "bnb_config",
    "check_gpus",
    "check_hub_kernels",
    "check_hub_kernels_here",
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

    return model_config(model_id, fetch=bundled_first(fetch))  # known ids work offline


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
            f"pip install 'interpoint-eager[quant]' (CUDA only)"
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


# DeepSeek-V4's FP8 linear and expert paths in transformers fetch `kernels-community/deep-gemm`,
# a build for compute capability 9.0 only; from kernels 0.16.1 its refusal on any other GPU is no
# longer caught by transformers' Triton fallback and kills the first forward. These two settings
# keep transformers off DeepGEMM.
_DEEPGEMM_ENV = "TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR"
_DEEPGEMM_EXPERTS = "grouped_mm"
_KERNELS_ESCAPING = (0, 16, 1)


def _fp8_hub_kernel(config: Mapping[str, Any]) -> bool:
    """Whether the family's FP8 path runs through a hub kernel built for one GPU generation."""
    return conventions_for(str(config.get("model_type", ""))).fp8_hub_kernel


def _version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string, as far as it reads ("0.16.1rc1" -> (0, 16, 1))."""
    match = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    if match is None:
        return ()
    return tuple(int(part) for part in match.groups() if part is not None)


def _kernels_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernels")
    except PackageNotFoundError:
        return None


def check_hub_kernels(
    config: Mapping[str, Any],
    model_kwargs: Mapping[str, Any],
    *,
    capability: tuple[int, int] | None,
    kernels_version: str | None,
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Refuse (`HubKernelUnsupported`) a load whose first forward would die in a hub kernel.

    `capability` is the CUDA compute capability the model will run on (None off CUDA).
    """
    if not _fp8_hub_kernel(config) or capability is None or capability == (9, 0):
        return
    quant = config.get("quantization_config") or {}
    if "fp8" not in str(quant.get("quant_method", "")).lower():
        return
    if kernels_version is None or _version_tuple(kernels_version) < _KERNELS_ESCAPING:
        return
    disabled = environ.get(_DEEPGEMM_ENV) == "1"
    grouped = model_kwargs.get("experts_implementation") == _DEEPGEMM_EXPERTS
    if disabled and grouped:
        return
    missing = [
        *([] if disabled else [f"the environment variable {_DEEPGEMM_ENV}=1"]),
        *([] if grouped else [f"experts_implementation={_DEEPGEMM_EXPERTS!r}"]),
    ]
    what = (
        f"DeepSeek-V4's FP8 checkpoint on the eager backend on a GPU of compute capability "
        f"{capability[0]}.{capability[1]} with kernels {kernels_version}"
    )
    why = (
        "transformers would run its FP8 paths through the hub kernel kernels-community/deep-gemm, "
        "built for compute capability 9.0 only, and from kernels 0.16.1 that refusal kills the "
        "first forward instead of falling back to Triton"
    )
    instead = (
        f"set {_DEEPGEMM_ENV}=1 and pass experts_implementation={_DEEPGEMM_EXPERTS!r} "
        f"(missing: {' and '.join(missing)}), or serve the model on a vLLM backend, which is "
        f"unaffected"
    )
    raise HubKernelUnsupported.build(what, why, instead)


def cuda_capability(device: Any, num_gpus: int) -> tuple[int, int] | None:
    """The compute capability the model will run on; None when it runs off CUDA."""
    if num_gpus <= 1 and not str(device).startswith("cuda"):
        return None
    if not torch.cuda.is_available():
        return None
    index = torch.device(device).index if str(device).startswith("cuda") else None
    major, minor = torch.cuda.get_device_capability(index or 0)
    return (int(major), int(minor))


def check_hub_kernels_here(
    config: Mapping[str, Any], model_kwargs: Mapping[str, Any], device: Any, num_gpus: int
) -> None:
    """`check_hub_kernels` for this machine: its GPU and its installed `kernels`."""
    if not _fp8_hub_kernel(config):
        return
    check_hub_kernels(
        config,
        model_kwargs,
        capability=cuda_capability(device, num_gpus),
        kernels_version=_kernels_version(),
    )
