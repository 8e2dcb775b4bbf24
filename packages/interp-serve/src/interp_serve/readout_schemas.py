"""The bodies of the read-out routes (`readout_routes`): JSON ones, and the JSON that rides in
a safetensors body's `interp` metadata key when the request carries tensors.

Tensors travel as safetensors both ways, never as JSON lists: a residual batch or a lens of
`n_layers × d_model²` floats would be many times larger as text, and safetensors cannot carry
code. Unknown fields are refused, as on every route.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DecodeMeta",
    "DirectionMeta",
    "FittedLensRequest",
    "LensFileRequest",
    "ProjectMeta",
    "WeightRowsRequest",
]

_STRICT = ConfigDict(extra="forbid")


class WeightRowsRequest(BaseModel):
    model_config = _STRICT
    token_ids: list[Any] = Field(description="token ids whose rows to return, in order")


class DecodeMeta(BaseModel):
    """`decode_residuals`: the body is safetensors with one tensor `residuals` `[..., d_model]`."""

    model_config = _STRICT
    top_k: Any = Field(None, description="return the top-k ids and probabilities instead")
    raw: bool = Field(False, description="logits before the multiplier and softcap (eager)")


class DirectionMeta(BaseModel):
    """One direction set; its tensors are `vectors.<i>` `[k, width]` and optionally `bias.<i>`."""

    model_config = _STRICT
    point: str = Field(description="the address the directions are read at")
    nonlinearity: str = Field("none", description="none or relu, applied last")


class ProjectMeta(BaseModel):
    """`project`: the body is safetensors with the sets' vectors (and biases)."""

    model_config = _STRICT
    tokens: list[Any] = Field(description="token ids: one prompt `[seq]` or a batch")
    sets: list[DirectionMeta] = Field(description="the direction sets, in order")
    steering: list[dict[str, Any]] = Field(default_factory=list, description="steering specs")


class LensFileRequest(BaseModel):
    """Install a lens file the server holds (in its `--lens-dir`), by its name there."""

    model_config = _STRICT
    file: str = Field(description="a file name in the server's lens folder (no path)")


class FittedLensRequest(BaseModel):
    """The logit lens through a fitted lens set installed on the server."""

    model_config = _STRICT
    tokens: list[Any] = Field(description="token ids of one prompt")
    layers: list[Any] | None = Field(None, description="layers to read (default: all)")
    jacobian_set: str = Field("default", description="the installed set's name")
    top_k: Any = 10
    point: Any = "resid_post"
