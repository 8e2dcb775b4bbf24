"""Do the four places that name families agree on which families there are?

A family is one core row (`interp_core.family_conventions.FAMILY_ROWS`) plus its test model
(`interp_testmodels.configs.FAMILIES`); vLLM's support table (`interp_vllm.support.FAMILIES`) and
the validator's module layouts (`interp_validator.references.hf_layouts.LAYOUTS`) are keyed by
the same names. A family added to one of them and forgotten in another fails here, naming it.
"""

from __future__ import annotations

from interp_core.family_conventions import FAMILY_ROWS
from interp_testmodels.configs import FAMILIES as TEST_MODELS
from interp_validator.references.hf_layouts import LAYOUTS, layout_key
from interp_vllm.support import FAMILIES as VLLM_SUPPORT

# Core rows with no test model: conventions the reader needs for published configs of families
# the engine reads but does not test end to end (and the multimodal wrapper type `gemma3`, whose
# text model `gemma3_text` is the tested one).
ROWS_WITHOUT_TEST_MODEL = frozenset(
    {"codegen", "gemma3", "gpt_neo", "granitemoeshared", "mpt", "persimmon"}
)

TESTED_TYPES = frozenset(spec.model_type for spec in TEST_MODELS.values())


def test_every_test_model_has_a_core_row() -> None:
    assert sorted(TESTED_TYPES - set(FAMILY_ROWS)) == []


def test_every_core_row_has_a_test_model_or_says_why_not() -> None:
    assert sorted(set(FAMILY_ROWS) - TESTED_TYPES) == sorted(ROWS_WITHOUT_TEST_MODEL)


def test_vllm_support_names_only_tested_families() -> None:
    assert sorted(set(VLLM_SUPPORT) - TESTED_TYPES) == []


def test_every_test_model_has_a_validator_layout_and_no_layout_is_orphaned() -> None:
    keys = {model_type: layout_key(model_type) for model_type in TESTED_TYPES}
    assert sorted(t for t, key in keys.items() if key is None) == []
    assert sorted(set(LAYOUTS) - set(keys.values())) == []
