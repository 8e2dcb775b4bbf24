"""Known issues reach only the backends they concern.

Gemma-4's config-reader issue is vLLM's: the eager backend warned it on every load, telling users
of a backend the entry itself says is unaffected.
"""

from __future__ import annotations

from interp_core.compat import KNOWN_ISSUES, known_issues_for


def test_a_vllm_only_issue_is_not_an_eager_warning() -> None:
    (issue,) = known_issues_for("gemma4_text", "5.19.0", backend="vllm")
    assert issue.backends == ("vllm",) and "per_layer_config" in issue.problem
    assert known_issues_for("gemma4_text", "5.19.0", backend="eager") == ()
    # Without a backend (the docs' compatibility page) every entry that applies is listed.
    assert known_issues_for("gemma4_text", "5.19.0") == (issue,)
    assert known_issues_for("gemma4_text", "5.14.1", backend="vllm") == ()


def test_issues_without_backends_reach_every_backend() -> None:
    (issue,) = known_issues_for("deepseek_v2", "5.14.0", backend="eager")
    assert issue.backends == ()
    assert known_issues_for("deepseek_v2", "5.14.0", backend="vllm") == (issue,)
    assert {b for i in KNOWN_ISSUES for b in i.backends} <= {"eager", "vllm"}
