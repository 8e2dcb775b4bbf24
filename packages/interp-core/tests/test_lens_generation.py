"""The lens over a generation's checks: what each lens resolves to, and what is refused, by name.

Pure core: nothing here runs a model. Each refusal names what was wrong and what to pass.
"""

from __future__ import annotations

import pytest

from interp_core.errors import InvalidArgument, UnknownPoint
from interp_core.lens_generation import LensStep, check_lens_generation, check_skip_reach
from interp_core.readouts import LensSpec

HELD = {"tuned": [0, 2]}


def _plan(lenses: object, **options: object) -> object:
    return check_lens_generation(lenses, n_layers=3, vocab_size=8, held=HELD, **options)


def test_lenses_resolve_to_specs_and_the_union_of_their_layers() -> None:
    plan = _plan([LensSpec([2, 0]), "logit", "tuned"], top_n=4, skip_before=2)
    assert [spec.layers for spec in plan.lenses] == [(2, 0), (0, 1, 2), (0, 2)]
    assert [spec.jacobian for spec in plan.lenses] == [False, False, True]
    assert plan.lenses[2].jacobian_set == "tuned"
    assert plan.layers == (0, 1, 2)
    assert (plan.top_n, plan.point, plan.skip_before) == (4, "resid_post", 2)
    assert plan.fitted_sets() == ("tuned",)
    assert _plan(LensSpec(None)).lenses[0].layers == (0, 1, 2)  # one spec, not a list


@pytest.mark.parametrize(
    ("lenses", "options", "error", "words"),
    [
        (["jacobian"], {}, InvalidArgument, "names no lens of this model.*'logit', 'tuned'"),
        ([LensSpec([1], jacobian=True, jacobian_set="tuned")], {}, InvalidArgument, "no J_bar"),
        ([LensSpec([0], jacobian=True, jacobian_set="x")], {}, InvalidArgument, "no lens set"),
        (["tuned"], {"point": "resid_mid"}, InvalidArgument, "fitted on resid_post"),
        ([LensSpec([3])], {}, InvalidArgument, r"layers \[3\], but this model has 3"),
        ([LensSpec([0])], {"point": "attn_out"}, InvalidArgument, "cannot decode attn_out"),
        ([LensSpec([0])], {"point": "resid_psot"}, UnknownPoint, "resid_psot"),
        ([LensSpec([0])], {"top_n": 0}, InvalidArgument, "top_k=0"),
        ([LensSpec([0])], {"skip_before": -1}, InvalidArgument, "skip_before=-1"),
        ([LensSpec([0])], {"skip_before": True}, InvalidArgument, "skip_before=True"),
        ([LensSpec([0])], {"word_mask": [True] * 7}, InvalidArgument, "7 entries.*has 8"),
        ([LensSpec([0])], {"word_mask": [1] * 8}, InvalidArgument, "booleans"),
        ([LensSpec([0])], {"word_mask": "words"}, InvalidArgument, "boolean array"),
        ([], {}, InvalidArgument, "got no lens"),
        ([3], {}, InvalidArgument, "lenses\\[0\\] is a int"),
    ],
)
def test_refusals_name_the_problem(lenses: object, options: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        _plan(lenses, **options)


def test_skip_before_past_the_last_read_position_is_refused() -> None:
    plan = _plan(["logit"], skip_before=12)
    check_skip_reach(plan, prompt_length=10, max_new_tokens=4)  # positions 0..12 are read
    with pytest.raises(InvalidArgument, match="past the last position this call reads \\(11"):
        check_skip_reach(plan, prompt_length=10, max_new_tokens=3)


def test_a_step_is_plain_data() -> None:
    step = LensStep(3, 7, True, ([[1, 2]],), ([[0.5, 0.25]],), next_token_id=9)
    assert step.finish_reason is None and step.next_token_id == 9
