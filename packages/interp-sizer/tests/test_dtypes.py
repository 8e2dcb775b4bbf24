"""The sizer prices exactly the dtype names the backends load, with the same meaning.

The names and their aliases are interp-core's table (`interp_core.dtypes`); the eager suite
checks the same table from the backend's side.
"""

from __future__ import annotations

import pytest

from interp_core.dtypes import DTYPES, accepted_dtype_names, resolve_dtype
from interp_sizer import UnsupportedSetting, size
from interp_sizer.formats import DTYPE_BYTES, normalize_dtype


def test_every_load_dtype_has_a_byte_count() -> None:
    assert set(DTYPE_BYTES) == set(DTYPES)


@pytest.mark.parametrize("stated", ["bfloat16", "float32", "float16", None])
def test_every_accepted_name_is_priced_as_the_core_table_means_it(stated: str | None) -> None:
    for name in accepted_dtype_names():
        assert normalize_dtype(name, stated) == resolve_dtype(name, stated), (name, stated)
    assert normalize_dtype(None, stated) == resolve_dtype("auto", stated)


@pytest.mark.parametrize("name", ["int8", "float64", "fp8", "bfloat"])
def test_other_names_are_refused(name: str) -> None:
    with pytest.raises(UnsupportedSetting, match="quantization"):
        normalize_dtype(name, "bfloat16")


def test_an_alias_prices_and_prints_the_canonical_name() -> None:
    report = size("meta-llama/Llama-3.1-8B", gpu="H100-80GB", max_model_len=8192, dtype="half")
    assert report.dtype == "float16"
    assert 'dtype="float16"' in report.snippet
