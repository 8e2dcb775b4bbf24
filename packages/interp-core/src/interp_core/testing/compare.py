"""How does the conformance kit compare tensors without knowing their library?

By duck typing: a tensor's shape is its `.shape`, its values are its `.tolist()`. Anything else
that is a (nested) sequence of numbers works too. Comparisons run in pure Python, so they are
slow on big tensors; the kit is meant for the tiny test models backends build for their tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "assert_close",
    "assert_equal",
    "flatten",
    "max_abs_diff",
    "shape_of",
    "to_nested",
]


def to_nested(tensor: Any) -> Any:
    """Nested Python lists of numbers (a bare number for a 0-d tensor)."""
    tolist = getattr(tensor, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(tensor, Sequence) and not isinstance(tensor, str | bytes):
        return [to_nested(item) for item in tensor]
    return tensor


def shape_of(tensor: Any) -> tuple[int, ...]:
    """The shape from `.shape` when present, else inferred from nesting (ragged → ValueError)."""
    shape = getattr(tensor, "shape", None)
    if shape is not None:
        return tuple(int(d) for d in shape)
    return _nested_shape(to_nested(tensor))


def _nested_shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list | tuple):
        return ()
    if not value:
        return (0,)
    inner = {_nested_shape(item) for item in value}
    if len(inner) != 1:
        message = f"ragged nesting: sub-shapes {sorted(inner)} under one axis"
        raise ValueError(message)
    return (len(value), *inner.pop())


def flatten(tensor: Any) -> list[float]:
    """All values in row-major order, as floats (ints and bools included)."""
    out: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, list | tuple):
            for item in value:
                walk(item)
        else:
            out.append(float(value))

    walk(to_nested(tensor))
    return out


def max_abs_diff(a: Any, b: Any) -> float:
    """Largest |a - b| over matching elements (inf when only one side is NaN)."""
    worst = 0.0
    for x, y in zip(flatten(a), flatten(b), strict=True):
        if math.isnan(x) or math.isnan(y):
            if not (math.isnan(x) and math.isnan(y)):
                return math.inf
            continue
        worst = max(worst, abs(x - y))
    return worst


def _first_mismatch(xs: list[float], ys: list[float], atol: float, rtol: float) -> int | None:
    for index, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if math.isnan(x) and math.isnan(y):
            continue
        if x == y:  # also covers equal infinities
            continue
        if not abs(x - y) <= atol + rtol * abs(y):
            return index
    return None


def assert_close(
    actual: Any, expected: Any, *, atol: float = 0.0, rtol: float = 0.0, what: str = "tensor"
) -> None:
    """Raise AssertionError unless shapes match and |a − e| ≤ atol + rtol·|e| elementwise.

    With the default tolerances this is exact equality (NaN equals NaN).
    """
    shape_a, shape_e = shape_of(actual), shape_of(expected)
    if shape_a != shape_e:
        message = f"{what}: shape {shape_a} where {shape_e} was expected"
        raise AssertionError(message)
    xs, ys = flatten(actual), flatten(expected)
    index = _first_mismatch(xs, ys, atol, rtol)
    if index is None:
        return
    bad = sum(
        1 for i in range(len(xs)) if _first_mismatch([xs[i]], [ys[i]], atol, rtol) is not None
    )
    message = (
        f"{what}: {bad} of {len(xs)} elements differ beyond atol={atol}, rtol={rtol}; first at "
        f"flat index {index}: {xs[index]!r} vs expected {ys[index]!r}; max |diff| "
        f"{max_abs_diff(actual, expected):.3g}"
    )
    raise AssertionError(message)


def assert_equal(actual: Any, expected: Any, *, what: str = "tensor") -> None:
    """Exact equality of shape and values."""
    assert_close(actual, expected, atol=0.0, rtol=0.0, what=what)
