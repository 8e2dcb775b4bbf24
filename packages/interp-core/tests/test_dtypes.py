"""One table of dtype names: every spelling users bring, and what `auto` means."""

from __future__ import annotations

import pytest

from interp_core.dtypes import (
    AUTO_DTYPE,
    DTYPE_ALIASES,
    DTYPES,
    accepted_dtype_names,
    canonical_dtype,
    resolve_dtype,
)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("float32", "float32"),
        ("fp32", "float32"),
        ("f32", "float32"),
        ("float", "float32"),
        ("bfloat16", "bfloat16"),
        ("bf16", "bfloat16"),
        ("float16", "float16"),
        ("fp16", "float16"),
        ("f16", "float16"),
        ("half", "float16"),
        ("auto", "auto"),
        ("  BF16 ", "bfloat16"),
        ("torch.bfloat16", "bfloat16"),
        ("torch.half", "float16"),
    ],
)
def test_every_spelling_names_one_dtype(name: str, canonical: str) -> None:
    assert canonical_dtype(name) == canonical


@pytest.mark.parametrize("name", ["int8", "float64", "fp8", "bfloat", "", None, 16])
def test_anything_else_is_not_a_dtype_name(name: object) -> None:
    assert canonical_dtype(name) is None
    assert resolve_dtype(name, "bfloat16") is None


def test_auto_is_the_stated_dtype_else_bfloat16() -> None:
    assert resolve_dtype("auto", "float32") == "float32"
    assert resolve_dtype("auto", "torch.float16") == "float16"
    assert resolve_dtype("auto", "bf16") == "bfloat16"
    assert resolve_dtype("auto", None) == "bfloat16"
    assert resolve_dtype("auto", "float8_e4m3fn") == "bfloat16"  # not a load dtype
    assert resolve_dtype("fp32", "bfloat16") == "float32"  # an explicit name wins


def test_the_table_is_closed() -> None:
    assert set(DTYPE_ALIASES.values()) <= set(DTYPES)
    assert not set(DTYPE_ALIASES) & {*DTYPES, AUTO_DTYPE}
    names = accepted_dtype_names()
    assert len(names) == len(set(names)) == len(DTYPES) + 1 + len(DTYPE_ALIASES)
    assert all(resolve_dtype(name, None) in DTYPES for name in names)
