"""The vLLM backend reads dtype names from interp-core's one table, as eager and the sizer do.

vLLM itself knows `bfloat16`, `float16`, `half`, `float32`, `float` and `auto`, but not the short
forms (`bf16`, `fp32`) the other packages accept; the backend hands vLLM the canonical name. No
engine starts: the model builds its engine on first use.
"""

from __future__ import annotations

import pytest

from interp_core.dtypes import canonical_dtype
from interp_testmodels.families import build_family
from interp_vllm.model import VLLMModel


@pytest.mark.parametrize(
    ("name", "passed"),
    [("bf16", "bfloat16"), ("BFloat16", "bfloat16"), ("auto", "auto"), ("fp32", "float32")],
)
def test_the_engine_gets_the_canonical_dtype_name(name: str, passed: str) -> None:
    model = VLLMModel(str(build_family("llama")), dtype=name)
    assert model._settings.dtype == passed == canonical_dtype(name)
