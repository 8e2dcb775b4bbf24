"""Hand-built model facts for the registry and shape tests, one per architectural trait.

Small, distinct numbers on purpose: a width rule that reads the wrong fact (d_model instead of
n_heads*head_dim, n_heads instead of n_kv_heads) produces a different number and fails. The
numbers are data (data/point_models.json, with a note on each model whose numbers say why).
"""

from __future__ import annotations

from typing import Any

from _core_data import load

from interp_core.facts import MLAFacts, ModelFacts, MoEFacts


def _facts(row: dict[str, Any]) -> ModelFacts:
    """One row of data/point_models.json; its lists are the tuples the facts hold."""
    fields = {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in row.items()
        if key != "note"
    }
    if "moe" in fields:
        fields["moe"] = MoEFacts(
            **{**fields["moe"], "sparse_layers": tuple(fields["moe"]["sparse_layers"])}
        )
    if "mla" in fields:
        fields["mla"] = MLAFacts(**fields["mla"])
    return ModelFacts(**fields)


ALL_MODELS = {name: _facts(row) for name, row in load("point_models.json")["models"].items()}

LLAMA = ALL_MODELS["llama"]
QWEN3 = ALL_MODELS["qwen3"]
MOE_PREFIX = ALL_MODELS["moe_prefix"]
ALL_SPARSE = ALL_MODELS["all_sparse"]
MLA = ALL_MODELS["mla"]
PARALLEL = ALL_MODELS["parallel"]
GPT2 = ALL_MODELS["gpt2"]
HYBRID = ALL_MODELS["hybrid"]
MAMBA = ALL_MODELS["mamba"]
HYPER = ALL_MODELS["hyper"]
GEMMA2 = ALL_MODELS["gemma2"]
