"""How do we name one activation, unambiguously, on any model?

An `Address` is a point name plus the coordinates that pick one instance of it: the layer (for
layer-scoped points) and, on hyper-connection trunks, the residual stream. It has exactly one
string form, which is what users type, what files store and what travels between processes:

    embeddings                  a trunk point: no layer
    resid_post.10               a layer point at layer 10
    resid_post.5.stream-2       one residual stream of a multi-stream trunk
    path.model.layers.3.mlp     the raw output of a module, the escape hatch for anything else

The string form uses only RFC 3986 unreserved characters, so it is safe in URLs, shells and file
names. Parsing is strict and total: any string either becomes an `Address` whose `str()` gives the
same string back, or raises `AddressError` saying what is wrong and, where it can tell, what was
probably meant. There is no head coordinate: per-head tensors are returned flattened. Layer and
stream numbers are below 2**63 (they travel as int64); a longer number is refused before Python
converts it.

`to_addresses(points)` reads the `points` argument of a capture: a list (or other collection) of
addresses; a bare string, a single address or None is refused naming the list form, never
wrapped silently.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from interp_core.errors import AddressError, InvalidArgument, UnknownCoordinate, UnknownPoint
from interp_core.points import Scope, get_point, is_point, point_names

__all__ = [
    "COORDINATES",
    "INDEX_LIMIT",
    "PATH_PREFIX",
    "Address",
    "AddressLike",
    "to_address",
    "to_addresses",
]

PATH_PREFIX = "path."
# The coordinates an address may carry after the layer, in the only order they may appear.
# Append-only: an older reader meeting a newer coordinate raises UnknownCoordinate (version skew).
COORDINATES = ("stream",)
# Layers and streams are int64 wherever they travel; no model comes near this many.
INDEX_LIMIT = 2**63
_INDEX_DIGITS = len(str(INDEX_LIMIT))

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_LAYER = re.compile(r"(0|[1-9][0-9]*)\Z")
_COORD = re.compile(r"([a-z][a-z0-9_]*)-(0|[1-9][0-9]*)\Z")
_PATH_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|0|[1-9][0-9]*)\Z")
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*\Z")

AddressLike = Any  # Address | str | tuple[str, int | None] | tuple[str, int | None, int | None]


def _nearest_points(name: str) -> list[str]:
    return difflib.get_close_matches(name, point_names(), n=3, cutoff=0.6)


def _unknown_point_message(name: str, text: str) -> str:
    message = f"{text!r} names no standardized point ({name!r} is not one of the 34)"
    near = _nearest_points(name)
    if near:
        message += "; did you mean " + " or ".join(near) + "?"
    else:
        message += (
            "; run `interp points` for the list, or write path.<module.path> for a raw module"
        )
    return message


def _check_int(value: object, what: str, text: str) -> int:
    # bool is an int subclass; True as a layer is a bug in the caller, not layer 1.
    if isinstance(value, bool) or not isinstance(value, int):
        message = f"{what} of {text!r} must be an int, got {type(value).__name__} {value!r}"
        raise AddressError(message)
    if value < 0:
        message = (
            f"{what} of {text!r} is {_show_int(value)}: negative indices are not addresses "
            f"(count from 0; resolve -1 against the model's n_layers yourself)"
        )
        raise AddressError(message)
    if value >= INDEX_LIMIT:
        message = (
            f"{what} of {text!r} is {_show_int(value)}, beyond 2**63 - 1: no model has that "
            f"many; use one of the model's own (model.n_layers says how many layers it has)"
        )
        raise AddressError(message)
    return value


def _show_int(value: int) -> str:
    # str() of an int with thousands of digits raises (sys.get_int_max_str_digits).
    if abs(value) < 10**30:
        return str(value)
    return f"a {value.bit_length()}-bit number"


def _index(digits: str, what: str, text: str) -> int:
    """A layer or coordinate value read from its digits, refused before int() when too long."""
    if len(digits) > _INDEX_DIGITS or int(digits) >= INDEX_LIMIT:
        message = (
            f"{_show_text(text)}: the {what} has {len(digits)} digits, beyond 2**63 - 1: no model "
            f"has that many; use one of the model's own (model.n_layers says how many layers)"
        )
        raise AddressError(message)
    return int(digits)


def _show_text(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(text[:60] + "...") + f" ({len(text)} chars)"


@dataclass(frozen=True, slots=True)
class Address:
    """One activation: a point name, its layer (layer-scoped points) and stream (multi-stream).

    The constructor validates as strictly as `Address.parse`; an `Address` that exists is well
    formed. Whether a model *has* the point is a separate question (see `interp_core.points`).
    """

    name: str
    layer: int | None = None
    stream: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            message = f"an address name must be a str, got {type(self.name).__name__}"
            raise AddressError(message)
        shown = _describe(self.name, self.layer, self.stream)
        if self.name.startswith(PATH_PREFIX) or self.name == "path":
            _check_path(self.name, shown)
            if self.layer is not None or self.stream is not None:
                message = (
                    f"{shown}: a module path takes no layer or stream; the path already names "
                    f"one module (e.g. path.model.layers.3.mlp)"
                )
                raise AddressError(message)
            return
        if not _NAME.match(self.name):
            raise _bad_name(self.name, shown)
        if not is_point(self.name):
            if "." in self.name:
                raise _bad_name(self.name, shown)
            raise UnknownPoint(_unknown_point_message(self.name, shown))
        spec = get_point(self.name)
        if self.layer is not None:
            _check_int(self.layer, "the layer", shown)
        if self.stream is not None:
            _check_int(self.stream, "the stream", shown)
        if spec.scope is Scope.TRUNK and self.layer is not None:
            message = (
                f"{shown}: {self.name} is a trunk point and has no layer; did you mean {self.name}?"
            )
            raise AddressError(message)
        if spec.scope is Scope.LAYER and self.layer is None:
            message = (
                f"{shown}: {self.name} exists once per layer, so it needs one; "
                f"did you mean {self.name}.0 (or another layer)?"
            )
            raise AddressError(message)
        if self.stream is not None and not spec.accepts_stream:
            message = (
                f"{shown}: {self.name} takes no stream coordinate; only "
                f"{', '.join(n for n in point_names() if get_point(n).accepts_stream)} "
                f"read one residual stream of a multi-stream trunk"
            )
            if spec.multi_stream_only:
                message += f" ({self.name} already covers every stream)"
            raise AddressError(message)

    # --- string form ----------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = [self.name]
        if self.layer is not None:
            parts.append(str(self.layer))
        if self.stream is not None:
            parts.append(f"stream-{self.stream}")
        return ".".join(parts)

    @classmethod
    def parse(cls, text: str) -> Address:
        """Read the one string form back into an `Address`; anything else is an `AddressError`."""
        if not isinstance(text, str):
            message = f"an address is parsed from a str, got {type(text).__name__} {text!r}"
            raise AddressError(message)
        if text == "":
            message = "an empty string is not an address; try resid_post.0 or embeddings"
            raise AddressError(message)
        if text != text.strip():
            message = f"{text!r} has surrounding whitespace; did you mean {text.strip()!r}?"
            raise AddressError(message)
        if not _UNRESERVED.match(text):
            raise AddressError(_foreign_syntax_message(text))
        if text == "path" or text.startswith(PATH_PREFIX):
            return cls(text)
        head, *rest = text.split(".")
        if not _NAME.match(head):
            raise _bad_name(head, text)
        if not is_point(head):
            # A dotted string whose head is no point and resembles none is most likely a module
            # path typed bare; one that resembles a point is a misspelt point.
            if rest and not _nearest_points(head) and all(_PATH_SEGMENT.match(s) for s in rest):
                message = (
                    f"{text!r} is not an address: {head!r} names no point; "
                    f"did you mean path.{text}? (raw modules are addressed as path.<module.path>)"
                )
                raise AddressError(message)
            raise UnknownPoint(_unknown_point_message(head, text))
        layer: int | None = None
        stream: int | None = None
        seen: set[str] = set()
        for index, part in enumerate(rest):
            if part == "":
                message = f"{text!r} has an empty component (two dots, or a trailing dot)"
                raise AddressError(message)
            if index == 0 and not _COORD.match(part):
                if _LAYER.match(part):
                    layer = _index(part, "layer", text)
                    continue
                raise _bad_layer(head, part, text)
            match = _COORD.match(part)
            if match is None:
                raise _bad_coordinate(head, layer, part, text)
            key, value = match.group(1), _index(match.group(2), "coordinate", text)
            if key not in COORDINATES:
                message = (
                    f"{text!r} carries coordinate {key!r}, which this version of interp-core "
                    f"does not know (known: {', '.join(COORDINATES)}); an address written by a "
                    f"newer release? Upgrade interp-core, or drop the coordinate"
                )
                raise UnknownCoordinate(message)
            if key in seen:
                message = f"{text!r} gives the {key} coordinate twice; keep one"
                raise AddressError(message)
            seen.add(key)
            stream = value
        return cls(head, layer, stream)

    # --- conveniences ---------------------------------------------------------------------------
    @classmethod
    def module(cls, module_path: str) -> Address:
        """The raw-module escape hatch: the output of the module at a dotted path."""
        return cls(PATH_PREFIX + module_path)

    @property
    def is_path(self) -> bool:
        return self.name.startswith(PATH_PREFIX)

    @property
    def module_path(self) -> str | None:
        """The dotted module path of a `path.` address, else None."""
        return self.name[len(PATH_PREFIX) :] if self.is_path else None

    @property
    def site(self) -> Address:
        """The address without its stream: where a hook sits, whichever stream it reads."""
        return Address(self.name, self.layer) if self.stream is not None else self

    def at(self, layer: int) -> Address:
        """The same point at another layer."""
        return Address(self.name, layer, self.stream)


def to_address(obj: AddressLike) -> Address:
    """Accept what users write — an Address, its string form, or a (name, layer[, stream]) tuple."""
    if isinstance(obj, Address):
        return obj
    if isinstance(obj, str):
        return Address.parse(obj)
    if isinstance(obj, tuple):
        if not 1 <= len(obj) <= 3:
            message = (
                f"an address tuple is (name, layer) or (name, layer, stream); got {len(obj)} "
                f"elements {obj!r}"
            )
            raise AddressError(message)
        return Address(*obj)
    message = (
        f"cannot read an address from {type(obj).__name__} {obj!r}; pass an Address, a string "
        f"such as 'resid_post.3', or a tuple such as ('resid_post', 3)"
    )
    raise AddressError(message)


def to_addresses(points: Any) -> list[Address]:
    """Read the `points` argument of a capture: a collection of things `to_address` accepts.

    A bare string, a single `Address` or None is refused (InvalidArgument) naming the list form:
    wrapping it silently would hide a caller that meant something else (a string iterated
    character by character, a forgotten argument). Each element that is no address raises the
    `AddressError` of `to_address`.
    """
    if isinstance(points, str | bytes | Address):
        text = points.decode(errors="replace") if isinstance(points, bytes) else str(points)
        shown = text if len(text) <= 80 else text[:60] + "..."
        message = (
            f"points={shown!r} is one address, but points takes a list of them (a string would "
            f"be read character by character); pass [{shown!r}]"
        )
        raise InvalidArgument(message)
    if points is None:
        message = "points=None: pass a list of addresses such as ['resid_post.0'], or [] for none"
        raise InvalidArgument(message)
    if isinstance(points, Mapping) or not isinstance(points, Iterable):
        message = (
            f"points is a {type(points).__name__}, not a list of addresses; pass a list such as "
            f"['resid_post.0', 'attn_probs.3']"
        )
        raise InvalidArgument(message)
    return [to_address(point) for point in points]


# --- diagnostics --------------------------------------------------------------------------------
def _describe(name: object, layer: object, stream: object) -> str:
    def show(value: object) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            return _show_int(value)
        if isinstance(value, str):
            return _show_text(value)
        return repr(value)

    args = [show(name)]
    if layer is not None or stream is not None:
        args.append(show(layer))
    if stream is not None:
        args.append(show(stream))
    return f"Address({', '.join(args)})"


def _check_path(name: str, shown: str) -> None:
    segments = name[len(PATH_PREFIX) :].split(".") if name != "path" else []
    if not segments or segments == [""]:
        message = (
            f"{shown}: a path address needs a module after 'path.', e.g. path.model.layers.3.mlp"
        )
        raise AddressError(message)
    for segment in segments:
        if not _PATH_SEGMENT.match(segment):
            message = (
                f"{shown}: module path segment {segment!r} is neither an attribute name nor an "
                f"index without leading zeros"
            )
            raise AddressError(message)


def _bad_name(name: str, text: str) -> AddressError:
    lowered = name.lower().replace("-", "_")
    if lowered != name and is_point(lowered):
        return AddressError(f"{text!r}: point names are lower case; did you mean {lowered}?")
    message = f"{text!r}: {name!r} is not a point name (lower-case letters, digits and _)"
    near = _nearest_points(lowered)
    if near:
        message += "; did you mean " + " or ".join(near) + "?"
    return AddressError(message)


def _bad_layer(name: str, part: str, text: str) -> AddressError:
    if re.fullmatch(r"-[0-9]+", part):
        message = (
            f"{text!r}: layer {part} is negative; addresses count layers from 0 "
            f"(resolve {part} against the model's n_layers yourself)"
        )
    elif re.fullmatch(r"0[0-9]+", part):
        message = f"{text!r}: a layer has no leading zeros; did you mean {name}.{int(part)}?"
    elif re.fullmatch(r"[a-z]+[0-9]+", part) and not part.startswith("stream"):
        digits = re.sub(r"^[a-z]+", "", part)
        message = f"{text!r}: the layer is a bare number; did you mean {name}.{int(digits)}?"
    else:
        message = f"{text!r}: expected a layer number after {name!r}, got {part!r}"
    return AddressError(message)


def _bad_coordinate(name: str, layer: int | None, part: str, text: str) -> AddressError:
    base = name if layer is None else f"{name}.{layer}"
    spaced = re.fullmatch(r"([a-z]+)_?([0-9]+)", part)
    if spaced and spaced.group(1) in COORDINATES:
        fixed = f"{spaced.group(1)}-{int(spaced.group(2))}"
        return AddressError(
            f"{text!r}: coordinates are written key-value; did you mean {base}.{fixed}?"
        )
    if _LAYER.match(part) or re.fullmatch(r"-?[0-9]+", part):
        return AddressError(
            f"{text!r}: only one layer number is allowed, and it comes right after the name"
        )
    if re.fullmatch(r"[a-z]+-(-[0-9]+|0[0-9]+)", part):
        return AddressError(
            f"{text!r}: coordinate values are non-negative integers without leading zeros"
        )
    return AddressError(
        f"{text!r}: {part!r} is not a coordinate "
        f"(known: {', '.join(c + '-N' for c in COORDINATES)})"
    )


def _foreign_syntax_message(text: str) -> str:
    # Recognise the separators people bring from other tools and say what the address would be.
    guess = re.fullmatch(
        r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[:/\[\( ,@#]\s*(-?[0-9]+)\s*[\]\)]?\s*", text
    )
    if guess and is_point(guess.group(1).lower()):
        return (
            f"{text!r} is not an address; did you mean {guess.group(1).lower()}.{guess.group(2)}?"
        )
    return (
        f"{text!r} contains characters an address never has (only letters, digits and . _ - ~); "
        f"write name.layer, e.g. resid_post.5"
    )
