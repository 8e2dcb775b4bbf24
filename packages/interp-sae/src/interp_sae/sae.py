"""One sparse autoencoder (or transcoder) at a point: encode, decode, steer by a feature.

Whatever file format it came from (`interp_sae.formats`), an SAE is held here in one form:

    sae_in   = norm_in(x) − input_bias            input_bias: b_dec when the format subtracts it
    pre      = sae_in @ W_enc + b_enc             W_enc [d_in, d_sae]
    features = act(pre)                           relu | jumprelu | topk | gated (below)
    out      = norm_out(features @ W_dec + b_dec) W_dec [d_sae, d_out]

    relu      max(pre, 0)
    jumprelu  max(pre, 0)·[pre > threshold]
    topk      the k largest of pre (times ‖W_dec[i]‖ when rescale_by_decoder_norm), ReLU'd, the
              rest 0
    gated     [sae_in @ W_enc + b_gate > 0] · max(sae_in @ (W_enc·exp(r_mag)) + b_mag, 0)

`norm_in`/`norm_out` are SAELens' run-time normalisations (`layer_norm`, `constant_norm_rescale`)
or the identity; they are per row, so decoding a normalised SAE needs the rows it encoded.

An SAE reads at `address`; a transcoder reads at `address` and writes (decodes) at
`write_address`. Arithmetic runs in float32 (float64 for float64 inputs), whatever dtype the
activations arrive in, so results do not depend on the model's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from interp_core.address import Address
from interp_core.errors import CapabilityUnsupported, InvalidArgument
from interp_core.steering import SteeringSpec

__all__ = ["ACTIVATIONS", "NORMALIZATIONS", "SAE", "TopK"]

ACTIVATIONS = ("relu", "jumprelu", "topk", "gated")
NORMALIZATIONS = ("none", "layer_norm", "constant_norm_rescale")


@dataclass(frozen=True)
class TopK:
    """The k largest features per row: `values` and `indices`, both `[..., k]`, largest first."""

    values: torch.Tensor
    indices: torch.Tensor


@dataclass(eq=False)
class SAE:
    """A sparse autoencoder at `address` (a transcoder when `write_address` differs)."""

    address: Address
    write_address: Address
    activation: Literal["relu", "jumprelu", "topk", "gated"]
    W_enc: torch.Tensor
    b_enc: torch.Tensor
    W_dec: torch.Tensor
    b_dec: torch.Tensor
    input_bias: torch.Tensor | None = None
    threshold: torch.Tensor | None = None
    k: int | None = None
    rescale_by_decoder_norm: bool = False
    b_gate: torch.Tensor | None = None
    r_mag: torch.Tensor | None = None
    b_mag: torch.Tensor | None = None
    normalize: str = "none"
    format: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        d_sae = self.W_enc.shape[1]
        if self.W_dec.shape[0] != d_sae or self.b_enc.shape != (d_sae,):
            message = (
                f"the SAE at {self.source or self.address} has W_enc {tuple(self.W_enc.shape)}, "
                f"b_enc {tuple(self.b_enc.shape)} and W_dec {tuple(self.W_dec.shape)}, which "
                f"disagree on the number of features; the file is malformed"
            )
            raise InvalidArgument(message)
        if self.b_dec.shape != (self.W_dec.shape[1],):
            message = f"the SAE's b_dec is {tuple(self.b_dec.shape)}, not ({self.W_dec.shape[1]},)"
            raise InvalidArgument(message)
        if self.activation not in ACTIVATIONS or self.normalize not in NORMALIZATIONS:
            message = f"activation {self.activation!r} / normalisation {self.normalize!r}"
            raise InvalidArgument(message)

    # --- shape ----------------------------------------------------------------------------------
    @property
    def d_in(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def d_sae(self) -> int:
        return int(self.W_enc.shape[1])

    @property
    def d_out(self) -> int:
        return int(self.W_dec.shape[1])

    @property
    def is_transcoder(self) -> bool:
        return self.write_address != self.address

    @property
    def nbytes(self) -> int:
        tensors = [getattr(self, name) for name in _TENSORS]
        return sum(t.numel() * t.element_size() for t in tensors if t is not None)

    @property
    def device(self) -> torch.device:
        return self.W_enc.device

    def to(self, device: torch.device | str) -> SAE:
        """This SAE with every tensor on `device` (a new object; the old one is unchanged)."""
        moved = {n: getattr(self, n) for n in _TENSORS}
        moved = {n: (t.to(device) if t is not None else None) for n, t in moved.items()}
        return SAE(
            address=self.address,
            write_address=self.write_address,
            activation=self.activation,
            k=self.k,
            rescale_by_decoder_norm=self.rescale_by_decoder_norm,
            normalize=self.normalize,
            format=self.format,
            source=self.source,
            extra=dict(self.extra),
            **moved,
        )

    def __repr__(self) -> str:
        kind = "transcoder" if self.is_transcoder else "SAE"
        where = f"{self.address}" + (f" -> {self.write_address}" if self.is_transcoder else "")
        shape = f"d_in={self.d_in}, d_sae={self.d_sae}"
        return f"<{self.format} {self.activation} {kind} at {where}: {shape}>"

    # --- encode / decode ------------------------------------------------------------------------
    def _rows(self, acts: Any, width: int, what: str) -> torch.Tensor:
        tensor = torch.as_tensor(acts)
        if tensor.shape[-1:] != (width,):
            message = (
                f"the {what} given to the SAE at {self.address} are {tuple(tensor.shape)}; their "
                f"last axis must be {width} wide"
            )
            raise InvalidArgument(message)
        dtype = torch.promote_types(tensor.dtype, torch.float32)
        return tensor.to(device=self.device, dtype=dtype)

    def _normalise(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """`norm_in(x)` and what `norm_out` needs to undo it (SAELens' definitions)."""
        if self.normalize == "layer_norm":
            mu = x.mean(dim=-1, keepdim=True)
            centred = x - mu
            std = centred.std(dim=-1, keepdim=True)
            return centred / (std + 1e-5), (mu, std)
        if self.normalize == "constant_norm_rescale":
            coeff = (self.d_in**0.5) / x.norm(dim=-1, keepdim=True)
            return x * coeff, (coeff,)
        return x, ()

    def _denormalise(self, y: torch.Tensor, stats: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.normalize == "layer_norm":
            mu, std = stats
            return y * std + mu
        if self.normalize == "constant_norm_rescale":
            return y / stats[0]
        return y

    def _w(self, name: str, like: torch.Tensor) -> torch.Tensor:
        tensor = getattr(self, name)
        return tensor.to(dtype=like.dtype)

    def encode(self, acts: Any) -> torch.Tensor:
        """Feature activations `[..., d_sae]` for activation rows `[..., d_in]`."""
        x = self._rows(acts, self.d_in, "activations")
        x, _ = self._normalise(x)
        if self.input_bias is not None:
            x = x - self._w("input_bias", x)
        pre = x @ self._w("W_enc", x)
        if self.activation == "gated":
            gate = (pre + self._w("b_gate", x)) > 0
            magnitude = x @ (self._w("W_enc", x) * self._w("r_mag", x).exp()) + self._w("b_mag", x)
            return gate.to(x.dtype) * torch.relu(magnitude)
        pre = pre + self._w("b_enc", x)
        if self.activation == "relu":
            return torch.relu(pre)
        if self.activation == "jumprelu":
            return torch.relu(pre) * (pre > self._w("threshold", x)).to(x.dtype)
        if self.rescale_by_decoder_norm:
            pre = pre * self._w("W_dec", x).norm(dim=-1)
        assert self.k is not None
        values, indices = torch.topk(pre, k=min(self.k, self.d_sae), dim=-1)
        return torch.zeros_like(pre).scatter_(-1, indices, torch.relu(values))

    def encode_topk(self, acts: Any, k: int) -> TopK:
        """The `k` largest feature activations per row, largest first."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.d_sae:
            message = f"top_k={k!r}: pass an int from 1 to the SAE's {self.d_sae} features"
            raise InvalidArgument(message)
        return top_features(self.encode(acts), k)

    def decode(self, features: Any, acts: Any = None) -> torch.Tensor:
        """Reconstruction `[..., d_out]` of feature activations `[..., d_sae]`.

        `acts` are the rows the features were encoded from; an SAE with a run-time
        normalisation needs them (its output is scaled back by their statistics).
        """
        f = self._rows(features, self.d_sae, "feature activations")
        stats: tuple[torch.Tensor, ...] = ()
        if self.normalize != "none":
            if acts is None:
                message = (
                    f"the SAE at {self.address} normalises its input ({self.normalize}), so "
                    f"decoding needs the rows that were encoded to undo it: pass decode(features, "
                    f"acts)"
                )
                raise InvalidArgument(message)
            _, stats = self._normalise(self._rows(acts, self.d_in, "activations").to(f.dtype))
        if self.rescale_by_decoder_norm:
            f = f / self._w("W_dec", f).norm(dim=-1)
        out = f @ self._w("W_dec", f) + self._w("b_dec", f)
        # SAELens' transcoders do not scale their output back: it lives at another point.
        return out if self.is_transcoder else self._denormalise(out, stats)

    def reconstruct(self, acts: Any) -> torch.Tensor:
        """`decode(encode(acts), acts)`."""
        return self.decode(self.encode(acts), acts)

    # --- steering -------------------------------------------------------------------------------
    def decoder_row(self, feature: int) -> torch.Tensor:
        """The direction feature `feature` writes: W_dec[feature] (unit norm under rescaling)."""
        row = self.W_dec[self._feature(feature)].to(torch.float32)
        if self.rescale_by_decoder_norm:
            row = row / row.norm()
        return row.detach().cpu().clone()

    def _feature(self, feature: int) -> int:
        if isinstance(feature, bool) or not isinstance(feature, int):
            message = f"feature {feature!r} is not an int index"
            raise InvalidArgument(message)
        if not 0 <= feature < self.d_sae:
            message = (
                f"feature {feature} is out of range: this SAE has features 0..{self.d_sae - 1}"
            )
            raise InvalidArgument(message)
        return feature

    def steering(self, feature: int, strength: float, positions: Any = None) -> SteeringSpec:
        """Add `strength × W_dec[feature]` at the point this SAE writes (`write_address`)."""
        return SteeringSpec(
            self.write_address, self.decoder_row(feature), "add", strength, positions
        )

    def clamp(self, feature: int, value: float, positions: Any = None) -> SteeringSpec:
        """Set `feature` to `value`, keeping the rest of the row and the reconstruction error.

        For a row `h` with the feature at `f(h)`, the write is `h + (value − f(h))·W_dec[feature]`:
        the SAE's reconstruction with the feature replaced, plus the error term `h − decode(h)`
        the SAE leaves. It runs inside the forward as the `clamp` steering op, which reads the
        feature with one encoder row; that is exact for ReLU and JumpReLU SAEs without run-time
        normalisation, and refused for the rest.
        """
        index = self._feature(feature)
        why = None
        if self.is_transcoder:
            why = "a transcoder reads at one point and writes at another, and clamp is one write"
        elif self.activation in ("topk", "gated"):
            why = (
                f"a {self.activation} feature depends on more than its own encoder row, so the "
                "forward pass cannot read it with one dot product"
            )
        elif self.normalize != "none":
            why = f"the SAE normalises each row first ({self.normalize}), which clamp cannot fold"
        if why:
            error = CapabilityUnsupported.build(
                f"cannot clamp feature {index} of the {self.activation} SAE at {self.address}",
                why,
                "steer by the feature instead (sae.steering(feature, strength))",
            )
            raise error
        encoder = self.W_enc[:, index].to(torch.float64)
        bias = float(self.b_enc[index].to(torch.float64))
        if self.input_bias is not None:
            bias -= float(encoder @ self.input_bias.to(torch.float64))
        threshold = 0.0 if self.threshold is None else float(self.threshold[index])
        return SteeringSpec(
            self.address,
            self.decoder_row(index),
            "clamp",
            value,
            positions,
            encoder=encoder.to(torch.float32).cpu().clone(),
            bias=bias,
            threshold=threshold,
        )


_TENSORS = (
    "W_enc",
    "b_enc",
    "W_dec",
    "b_dec",
    "input_bias",
    "threshold",
    "b_gate",
    "r_mag",
    "b_mag",
)


def top_features(dense: torch.Tensor, k: int) -> TopK:
    """The k largest entries per row of dense feature activations, largest first."""
    values, indices = torch.topk(dense, k=k, dim=-1, sorted=True)
    return TopK(values, indices)
