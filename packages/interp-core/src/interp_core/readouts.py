"""What do the read-outs that are not captures take, and when is their input refused?

The plain data and the checks of four calls every backend serves the same way:

* `unembed_rows(token_ids)` / `embed_rows(token_ids)`: rows of the unembedding `W_U` and of the
  token embedding `W_E` (`[k, d_model]`); `check_token_ids` refuses ids outside the vocabulary
  before any device indexing (an out-of-range gather on CUDA poisons the whole context).
* `decode_residuals(residuals, top_k=None)`: logits, or `TopTokens(ids, probs)` of the top-k.
* `project(tokens, directions)`: each `DirectionSet` (k vectors at one point, an optional bias and
  ReLU: a linear probe, or an SAE encoder sent by the client) evaluated where the activations are.
* Fitted (Jacobian / tuned) lenses: one `[d_model, d_model]` matrix `J_bar[layer]` per layer,
  applied to that layer's residual before it is decoded, `decode(J_bar @ h)`. A set is installed
  under a name (`set_lens_jacobians(mapping_or_path, name=...)`) and read by
  `logit_lens(tokens, LensSpec(layers, jacobian=True, jacobian_set=name))`.

Lens files come in three layouts, told apart by their keys (`jacobian_mapping`):

* `{"J": {layer: tensor}}` — the public Jacobian-lens layout;
* `{"parameters": {"jacobians": {layer: tensor}}}` — the J++ lens layout;
* ours, a safetensors file with one tensor `J.<layer>` per layer and the metadata
  `format = "interp-lens"`, `n_layers`, `d_model` (and optionally `model`), so the file says which
  model it fits before any matrix is read.

Nothing here imports a tensor library: tensors are whatever the backend accepts, read through
their `.shape` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from interp_core.address import to_address
from interp_core.errors import InvalidArgument

__all__ = [
    "LENS_FORMAT",
    "NONLINEARITIES",
    "DirectionSet",
    "LensSpec",
    "TopTokens",
    "check_direction_sets",
    "check_fitted_layers",
    "check_jacobians",
    "check_token_ids",
    "jacobian_mapping",
    "lens_from_layers",
    "lens_set_bytes",
    "load_torch_lens",
    "require_lens_file",
]

NONLINEARITIES = ("none", "relu")
LENS_FORMAT = "interp-lens"  # the `format` metadata of our safetensors lens layout
DEFAULT_SET = "default"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return None if shape is None else tuple(int(d) for d in shape)


class TopTokens(NamedTuple):
    """`decode_residuals(..., top_k=k)`: ids `[..., k]` (int64) and probabilities `[..., k]`
    (float32, over the full vocabulary), best first."""

    ids: Any
    probs: Any


@dataclass(frozen=True)
class LensSpec:
    """One lens read-out: the layers to decode, and whether each goes through its fitted
    `J_bar` (from the set `jacobian_set`, installed with `set_lens_jacobians`) first."""

    layers: Sequence[int] | None
    jacobian: bool = False
    jacobian_set: str = DEFAULT_SET

    def __post_init__(self) -> None:
        if not isinstance(self.jacobian, bool):
            message = f"LensSpec(jacobian={self.jacobian!r}) must be True or False"
            raise InvalidArgument(message)
        if not isinstance(self.jacobian_set, str) or not self.jacobian_set:
            message = (
                f"LensSpec(jacobian_set={self.jacobian_set!r}) must name a set installed with "
                f"set_lens_jacobians (a non-empty string; the default set is {DEFAULT_SET!r})"
            )
            raise InvalidArgument(message)
        if self.layers is not None and not isinstance(self.layers, str | bytes):
            object.__setattr__(self, "layers", tuple(self.layers))


def lens_from_layers(layers: object) -> tuple[Any, LensSpec | None]:
    """`logit_lens`'s `layers` argument split into the plain layers and the fitted lens, if any:
    a `LensSpec` with `jacobian=True` asks for the fitted read-out, one without is a plain lens."""
    if isinstance(layers, LensSpec):
        return (None if layers.layers is None else list(layers.layers)), (
            layers if layers.jacobian else None
        )
    return layers, None


@dataclass(frozen=True)
class DirectionSet:
    """`k` directions read at one point: `vectors` `[k, width]` in the basis of the point's rows,
    an optional `bias` `[k]` added to the dot products, then `nonlinearity` ("none" or "relu").
    A probe is `k = 1`; an SAE encoder is `k = d_sae` with its bias and a ReLU."""

    point: Any
    vectors: Any
    bias: Any = None
    nonlinearity: str = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "point", to_address(self.point))
        shape = _shape(self.vectors)
        if shape is None or len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
            message = (
                f"DirectionSet at {self.point}: vectors must be a [k, width] array with k >= 1, "
                f"got {'no array' if shape is None else list(shape)}"
            )
            raise InvalidArgument(message)
        if self.bias is not None and _shape(self.bias) != (shape[0],):
            message = (
                f"DirectionSet at {self.point}: bias must be [{shape[0]}] (one per vector), got "
                f"{_shape(self.bias)}"
            )
            raise InvalidArgument(message)
        if self.nonlinearity not in NONLINEARITIES:
            message = (
                f"DirectionSet at {self.point}: nonlinearity={self.nonlinearity!r} is not one of "
                f"{', '.join(repr(n) for n in NONLINEARITIES)}"
            )
            raise InvalidArgument(message)

    @property
    def k(self) -> int:
        return int(_shape(self.vectors)[0])  # type: ignore[index]

    @property
    def width(self) -> int:
        return int(_shape(self.vectors)[1])  # type: ignore[index]


def check_direction_sets(directions: object, facts: Any) -> list[DirectionSet]:
    """A non-empty sequence of `DirectionSet`s whose width is their point's on this model."""
    from interp_core.shapes import point_width  # the registry; keep this module light

    if isinstance(directions, DirectionSet):
        directions = [directions]
    if isinstance(directions, str | bytes) or not isinstance(directions, Sequence):
        message = f"project takes a list of DirectionSet, got {type(directions).__name__}"
        raise InvalidArgument(message)
    if not directions:
        message = "project got no DirectionSet, so it would return nothing; pass at least one"
        raise InvalidArgument(message)
    sets = []
    for index, item in enumerate(directions):
        if not isinstance(item, DirectionSet):
            message = (
                f"project's directions[{index}] is a {type(item).__name__}, not a DirectionSet"
            )
            raise InvalidArgument(message)
        width = int(point_width(item.point, facts))
        if item.width != width:
            message = (
                f"DirectionSet {index} at {item.point} is {item.width} wide, but {item.point} is "
                f"{width} wide on this model; a direction must be in the basis of its point's rows"
            )
            raise InvalidArgument(message)
        sets.append(item)
    return sets


def check_token_ids(token_ids: object, vocab_size: int, method: str) -> list[int]:
    """A non-empty list of token ids inside the vocabulary, or InvalidArgument naming a bad one."""
    if _is_int(token_ids):
        token_ids = [token_ids]
    tolist = getattr(token_ids, "tolist", None)
    if callable(tolist):
        token_ids = tolist()
    if isinstance(token_ids, str | bytes) or not isinstance(token_ids, Sequence):
        message = f"{method} takes a list of token ids, got {type(token_ids).__name__}"
        raise InvalidArgument(message)
    if not token_ids:
        message = f"{method} got no token id, so it would return nothing; pass at least one"
        raise InvalidArgument(message)
    ids = []
    for value in token_ids:
        if not _is_int(value) or not 0 <= int(value) < vocab_size:
            message = (
                f"{method}: {value!r} is not a token id of this model (ids are ints in "
                f"[0, {vocab_size}))"
            )
            raise InvalidArgument(message)
        ids.append(int(value))
    return ids


# --- fitted lenses ------------------------------------------------------------------------------
def jacobian_mapping(checkpoint: object, source: str) -> dict[int, Any]:
    """The `{layer: J_bar}` of a lens file in any of the three layouts; `checkpoint` is what the
    file held (a mapping of tensors; ours is flat, `J.<layer>`)."""
    if not isinstance(checkpoint, Mapping):
        message = f"{source} is not a lens file: it holds a {type(checkpoint).__name__}"
        raise InvalidArgument.build(message, None, _LAYOUTS)
    if isinstance(checkpoint.get("J"), Mapping):
        found = checkpoint["J"]
    elif isinstance(checkpoint.get("parameters"), Mapping) and isinstance(
        checkpoint["parameters"].get("jacobians"), Mapping
    ):
        found = checkpoint["parameters"]["jacobians"]
    elif checkpoint and all(isinstance(k, str) and k.startswith("J.") for k in checkpoint):
        found = {key[2:]: value for key, value in checkpoint.items()}
    else:
        keys = ", ".join(sorted(str(k) for k in list(checkpoint)[:5])) or "none"
        message = f"{source} is not a lens file in a layout this reads (its keys: {keys})"
        raise InvalidArgument.build(message, None, _LAYOUTS)
    mapping: dict[int, Any] = {}
    for key, value in found.items():
        try:
            layer = int(key)
        except (TypeError, ValueError):
            message = f"{source} has a J_bar under {key!r}, which is not a layer number"
            raise InvalidArgument(message) from None
        mapping[layer] = value
    if not mapping:
        message = f"{source} holds no J_bar"
        raise InvalidArgument.build(message, None, _LAYOUTS)
    return mapping


_LAYOUTS = (
    'save the lens as {"J": {layer: tensor}}, {"parameters": {"jacobians": {layer: tensor}}}, '
    "or as safetensors with one tensor J.<layer> per layer (docs/guides/logit-lens.md)"
)


def check_jacobians(
    mapping: Mapping[Any, Any],
    facts: Any,
    source: str,
    meta: Mapping[str, str] | None = None,
) -> dict[int, Any]:
    """Refuse a lens fitted for another model (its layer count or width), naming both, before
    any matrix reaches a device; return `{layer: J_bar}` with int layers."""
    n_layers, d_model = int(facts.n_layers), int(facts.d_model)
    model = f"{getattr(facts, 'architecture', 'this model')} ({n_layers} layers, d_model {d_model})"
    meta = dict(meta or {})
    stated = {k: meta.get(k) for k in ("n_layers", "d_model") if meta.get(k) is not None}
    if stated and (
        int(stated.get("n_layers", n_layers)) != n_layers
        or int(stated.get("d_model", d_model)) != d_model
    ):
        message = (
            f"{source} is a lens for a model of {stated.get('n_layers', '?')} layers and d_model "
            f"{stated.get('d_model', '?')}, not for this {model}"
        )
        raise InvalidArgument.build(message, None, "load the lens fitted for this model")
    if not isinstance(mapping, Mapping) or not mapping:
        message = f"{source} holds no J_bar: a lens maps layers to [d_model, d_model] matrices"
        raise InvalidArgument(message)
    out: dict[int, Any] = {}
    for key, matrix in mapping.items():
        if not _is_int(key) and not (isinstance(key, str) and key.isdigit()):
            message = f"{source} has a J_bar under {key!r}, which is not a layer number"
            raise InvalidArgument(message)
        layer = int(key)
        shape = _shape(matrix)
        if not 0 <= layer < n_layers:
            message = f"{source} has a J_bar for layer {layer}, but this is a {model}"
            raise InvalidArgument.build(message, None, "load the lens fitted for this model")
        if shape != (d_model, d_model):
            message = (
                f"{source}'s J_bar for layer {layer} is {list(shape) if shape else 'no array'}, "
                f"but this {model} needs [{d_model}, {d_model}]"
            )
            raise InvalidArgument.build(message, None, "load the lens fitted for this model")
        out[layer] = matrix
    return dict(sorted(out.items()))


def check_fitted_layers(
    spec: LensSpec, held: Mapping[str, Sequence[int]], layers: Sequence[int]
) -> None:
    """Refuse a fitted lens whose set is not installed, or that lacks a layer asked for: a layer
    read without its J_bar would be a plain logit lens under a fitted lens's name."""
    if spec.jacobian_set not in held:
        names = ", ".join(sorted(held)) or "none"
        message = (
            f"no lens set {spec.jacobian_set!r} is installed on this model (installed: {names})"
        )
        raise InvalidArgument.build(
            message, None, "install it first: set_lens_jacobians(path_or_mapping, name=...)"
        )
    have = set(held[spec.jacobian_set])
    missing = [layer for layer in layers if layer not in have]
    if missing:
        message = (
            f"lens set {spec.jacobian_set!r} has no J_bar for layers {missing} (it holds "
            f"{sorted(have)})"
        )
        instead = "read those layers with a second, plain LensSpec(layers, jacobian=False)"
        raise InvalidArgument.build(message, None, instead)


def lens_set_bytes(n_layers: int, d_model: int, dtype_bytes: int) -> int:
    """What one resident lens set holds: a `[d_model, d_model]` matrix per layer."""
    return int(n_layers) * int(d_model) ** 2 * int(dtype_bytes)


def require_lens_file(path: Path) -> None:
    """Refuse a lens path that names no file."""
    if not path.is_file():
        message = f"no lens file at {path}"
        raise InvalidArgument.build(message, None, "pass the path of a .safetensors or .pt lens")


def load_torch_lens(torch: Any, path: Path) -> Any:
    """A torch lens file read with `torch.load(weights_only=True)` (the caller's `torch`: the
    core does not import it): tensors and plain containers only, so a file that needs code to
    load is refused, as the library's error, never executed."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        message = f"{path} cannot be read as a lens file ({type(error).__name__}: {error})"
        why = "only safetensors and torch.load(weights_only=True) files are read: no pickled code"
        raise InvalidArgument.build(message, why, "save the lens as safetensors") from error
