"""Which GPU(s) and settings run a model on each interp-engine backend, before anything loads?

`size(model, ...)` reads the model's config (and safetensors headers when they are on disk),
prices weights, KV cache, activations, capture buffers and overheads per backend, dtype,
quantization, KV dtype and GPU count, and returns a `SizingReport`: which GPUs of the catalogue
fit, the smallest fitting configuration, KV tokens and the longest context at a concurrency, a
roofline speed estimate, and the `load_model(...)` call it priced. Standard library and
interp-core only; `huggingface_hub` is imported only to reach the Hub, and only if installed.
"""

from interp_sizer.__about__ import __version__
from interp_sizer.calibration import CALIBRATIONS, GIB, Calibration
from interp_sizer.errors import (
    HubUnavailable,
    SizerError,
    UnknownGpu,
    UnknownModel,
    UnsupportedSetting,
)
from interp_sizer.gpus import GPUS, GpuSpec, get_gpu, gpu_names
from interp_sizer.kv import KVLayout, VllmKVCapacity, kv_layout, vllm_kv_capacity
from interp_sizer.plan import GpuFit, SizingReport, SizingRequest, Term, size
from interp_sizer.roofline import Throughput
from interp_sizer.source import ResolvedModel, resolve_config, resolve_model
from interp_sizer.weights import (
    ParameterCount,
    WeightInventory,
    checkpoint_inventory,
    parameter_count,
    read_safetensors_header,
)

__all__ = [
    "CALIBRATIONS",
    "GIB",
    "GPUS",
    "Calibration",
    "GpuFit",
    "GpuSpec",
    "HubUnavailable",
    "KVLayout",
    "ParameterCount",
    "ResolvedModel",
    "SizerError",
    "SizingReport",
    "SizingRequest",
    "Term",
    "Throughput",
    "UnknownGpu",
    "UnknownModel",
    "UnsupportedSetting",
    "VllmKVCapacity",
    "WeightInventory",
    "__version__",
    "checkpoint_inventory",
    "get_gpu",
    "gpu_names",
    "kv_layout",
    "parameter_count",
    "read_safetensors_header",
    "resolve_config",
    "resolve_model",
    "size",
    "vllm_kv_capacity",
]
