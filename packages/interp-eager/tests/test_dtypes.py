"""The eager backend reads dtype names from interp-core's one table, as the sizer does.

A name the sizer prices must load the same dtype here: `bf16`, `half`, `fp32`, `auto` and the
rest mean one thing in every package. The model is constructed without loading weights, so each
case is only the name lookup.
"""

from __future__ import annotations

import pytest
import torch

from interp_core.dtypes import accepted_dtype_names, resolve_dtype
from interp_core.errors import CapabilityUnsupported
from interp_eager.model import EagerModel
from interp_testmodels.families import build_family


@pytest.fixture(scope="module")
def llama_path() -> str:
    return str(build_family("llama"))


@pytest.mark.parametrize("name", accepted_dtype_names())
def test_every_accepted_name_loads_the_dtype_the_core_table_names(
    name: str, llama_path: str
) -> None:
    model = EagerModel(llama_path, dtype=name)
    expected = resolve_dtype(name, model.facts.torch_dtype)
    assert expected is not None
    assert model.dtype == getattr(torch, expected)
    # Case, spaces and torch's own spelling do not matter.
    assert EagerModel(llama_path, dtype=f" {name.upper()} ").dtype == model.dtype


def test_every_name_the_sizer_prices_means_the_same_dtype_here() -> None:
    from interp_eager.loading import torch_dtype  # what EagerModel(dtype=...) calls

    # A declared test dependency (interp-eager's test group): absent, this must fail, not skip.
    from interp_sizer import formats

    for stated in ("bfloat16", "float16", "float32", "torch.float16", None, "int8"):
        for name in accepted_dtype_names():
            priced = formats.normalize_dtype(name, stated)
            assert torch_dtype(name, stated) == getattr(torch, priced), (name, stated)


def test_auto_is_the_checkpoints_own_dtype(llama_path: str) -> None:
    model = EagerModel(llama_path, dtype="auto")
    stated = model.facts.torch_dtype
    assert model.dtype == getattr(torch, resolve_dtype(stated, None) or "bfloat16")
    assert EagerModel(llama_path, dtype=torch.float16).dtype == torch.float16


@pytest.mark.parametrize("name", ["int8", "float64", "fp8", "", "bfloat"])
def test_names_outside_the_table_are_refused_with_the_accepted_ones(
    name: str, llama_path: str
) -> None:
    with pytest.raises(CapabilityUnsupported, match="bf16"):
        EagerModel(llama_path, dtype=name)
