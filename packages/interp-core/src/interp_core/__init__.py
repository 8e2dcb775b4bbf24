"""interp-core: the dependency-free heart of interp-engine.

Addresses and the 34 standardized points, model facts read from a config, point shapes, the
backend protocol and registry with `load_model`, steering specs, and the sync free functions.
Everything here imports only the standard library; backends bring the tensors.
"""

from interp_core.__about__ import __version__
from interp_core.address import Address, to_address
from interp_core.backends import (
    BackendFallbackWarning,
    BackendSelection,
    available_backends,
    cuda_available,
    get_backend,
    load_model,
    register_backend,
    select_backend,
    vllm_installed,
)
from interp_core.cache import ActivationCache
from interp_core.chat import ChatSpans, TokenSpan, message_spans
from interp_core.errors import (
    AddressError,
    BackendNotInstalled,
    BackendUnavailable,
    CapabilityUnsupported,
    ConfigError,
    EngineDied,
    GradientsUnsupported,
    HubKernelUnsupported,
    InterpError,
    NestedEventLoop,
    NoChatTemplateError,
    PointNotCaptured,
    PointUnsupported,
    SteeringSpecError,
    UnknownBackend,
    UnknownCoordinate,
    UnknownPoint,
)
from interp_core.facts import MLAFacts, ModelFacts, MoEFacts
from interp_core.points import POINTS, PointSpec, get_point, point_names, points_for
from interp_core.protocol import Backend, InterpModel
from interp_core.results import Generation, GenerationStep, LensPrediction, LensResult, Support
from interp_core.shapes import point_shape, point_width
from interp_core.steering import SteeringSpec, active_steering, steer
from interp_core.sync import (
    SyncModel,
    capture,
    capture_attention,
    capture_generation,
    capture_residuals,
    decode_residuals,
    generate,
    generate_stream,
    generate_text,
    logit_lens,
    run_with_cache,
    shutdown,
    sync_model,
    warmup,
)

__all__ = [
    "POINTS",
    "ActivationCache",
    "Address",
    "AddressError",
    "Backend",
    "BackendFallbackWarning",
    "BackendNotInstalled",
    "BackendSelection",
    "BackendUnavailable",
    "CapabilityUnsupported",
    "ChatSpans",
    "ConfigError",
    "EngineDied",
    "Generation",
    "GenerationStep",
    "GradientsUnsupported",
    "HubKernelUnsupported",
    "InterpError",
    "InterpModel",
    "LensPrediction",
    "LensResult",
    "MLAFacts",
    "MoEFacts",
    "ModelFacts",
    "NestedEventLoop",
    "NoChatTemplateError",
    "PointNotCaptured",
    "PointSpec",
    "PointUnsupported",
    "SteeringSpec",
    "SteeringSpecError",
    "Support",
    "SyncModel",
    "TokenSpan",
    "UnknownBackend",
    "UnknownCoordinate",
    "UnknownPoint",
    "__version__",
    "active_steering",
    "available_backends",
    "capture",
    "capture_attention",
    "capture_generation",
    "capture_residuals",
    "cuda_available",
    "decode_residuals",
    "generate",
    "generate_stream",
    "generate_text",
    "get_backend",
    "get_point",
    "load_model",
    "logit_lens",
    "message_spans",
    "point_names",
    "point_shape",
    "point_width",
    "points_for",
    "register_backend",
    "run_with_cache",
    "select_backend",
    "shutdown",
    "steer",
    "sync_model",
    "to_address",
    "vllm_installed",
    "warmup",
]
