"""The lens-space ops and the steering scopes in the core: formulas by hand, checks, resolution.

Each op's float64 reference is compared with its formula written out here (not with another
call of the library), and each scope with the explicit positions it stands for.
"""

from __future__ import annotations

import math

import pytest

from interp_core.errors import SteeringSpecError
from interp_core.steering import SteeringSpec
from interp_core.steering_lens import special_token_ids
from interp_core.writes import admit_writes, spec_from_wire, spec_to_wire

H = [3.0, -4.0, 12.0]  # ‖h‖ = 13
V = [2.0, 0.0, 0.0]  # v̂ = e0
T = [0.0, 0.0, 5.0]  # t̂ = e2


def _spec(op: str, **fields: object) -> SteeringSpec:
    return SteeringSpec("resid_post.0", V, op, **fields)  # type: ignore[arg-type]


def test_norm_add_adds_the_clamped_fraction_of_the_rows_norm_along_the_unit_direction() -> None:
    # scale 0.5 under a cap of 0.2: the added norm is 0.2·13 = 2.6 along e0.
    assert _spec("norm_add", scale=0.5, max_fraction=0.2).delta_reference(H) == [2.6, 0.0, 0.0]
    # Below the cap (and with none) it is scale·‖h‖; a negative scale is bounded alike.
    assert _spec("norm_add", scale=0.1, max_fraction=0.2).delta_reference(H)[0] == 0.1 * 13
    assert _spec("norm_add", scale=3.0).delta_reference(H)[0] == 39.0
    assert _spec("norm_add", scale=-3.0, max_fraction=1.0).delta_reference(H)[0] == -13.0


def test_ablate_swap_and_normalised_add_follow_their_formulas() -> None:
    assert _spec("ablate").apply_reference_row(H) == [0.0, -4.0, 12.0]  # h − (h·v̂)v̂
    # h + (h·ŝ)(t̂ − ŝ): the 3 along e0 moves onto e2.
    assert _spec("swap", target=T).apply_reference_row(H) == [0.0, -4.0, 15.0]
    assert _spec("add", scale=1.5, normalize=True).delta_reference(H) == [1.5, 0.0, 0.0]
    assert _spec("add", scale=1.5).delta_reference(H) == [3.0, 0.0, 0.0]  # v as given


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"op": "norm_add", "max_fraction": 0.0}, "a finite fraction > 0"),
        ({"op": "norm_add", "max_fraction": math.inf}, "a finite fraction > 0"),
        ({"op": "add", "max_fraction": 1.0}, "only norm_add"),
        ({"op": "swap"}, "has no target"),
        ({"op": "swap", "target": [1.0]}, "a target of 1 values"),
        ({"op": "swap", "target": [0.0, 0.0, 0.0]}, "all zeros"),
        ({"op": "add", "target": T}, "only swap"),
        ({"op": "ablate", "scale": 2.0}, "no coefficient"),
        ({"op": "ablate", "normalize": True}, "only add"),
        ({"op": "add", "generated": "no"}, "is a switch"),
        ({"op": "add", "normalize": True, "vector": [0.0, 0.0, 0.0]}, "all zeros"),
    ],
)
def test_unsound_fields_are_refused_naming_the_fix(fields: dict, words: str) -> None:
    arguments = {"address": "resid_post.0", "vector": V, **fields}
    with pytest.raises(SteeringSpecError, match=words):
        SteeringSpec(**arguments)  # type: ignore[arg-type]


def test_every_new_field_travels_the_wire() -> None:
    spec = SteeringSpec(
        "resid_post.0", V, "swap", target=T, generated=False, skip_special=True, positions=[0]
    )
    back = spec_from_wire(spec_to_wire(spec))
    assert (back.target, back.generated, back.skip_special) == (tuple(T), False, True)
    fraction = spec_from_wire(spec_to_wire(_spec("norm_add", scale=0.3, max_fraction=0.25)))
    assert fraction.max_fraction == 0.25


class _Model:
    facts = None


def test_prompt_only_resolves_to_the_prompts_positions() -> None:
    spec = _spec("add", generated=False)
    (resolved,) = admit_writes(_Model(), spec, None, (9, "this call"), prompts=[[5, 6, 7, 8]])
    assert resolved.positions == (0, 1, 2, 3) and resolved.generated
    listed = _spec("add", generated=False, positions=[1, 6])
    (kept,) = admit_writes(_Model(), listed, None, (9, "this call"), prompts=[[5, 6, 7, 8]])
    assert kept.positions == (1,)
    with pytest.raises(SteeringSpecError, match="leaves no position"):
        admit_writes(
            _Model(), _spec("add", generated=False, positions=[6]), None, (9, "x"), prompts=[[1]]
        )


def test_skip_special_drops_the_prompts_special_tokens_and_refuses_uneven_batches() -> None:
    spec = _spec("add", skip_special=True)
    (resolved,) = admit_writes(
        _Model(), spec, None, (6, "this call"), prompts=[[1, 7, 2, 8]], special={1, 2}
    )
    assert resolved.positions == (1, 3, 4, 5)  # generated positions 4, 5 stay steered
    with pytest.raises(SteeringSpecError, match="different positions in different rows"):
        admit_writes(
            _Model(), spec, None, (4, "x"), prompts=[[1, 7, 2, 8], [7, 1, 2, 8]], special={1}
        )
    # A client that forwards the call (remote) leaves the scope for the server to resolve.
    (forwarded,) = admit_writes(_Model(), spec, None)
    assert forwarded.skip_special
    with pytest.raises(SteeringSpecError, match="cannot resolve"):
        admit_writes(_Model(), spec, None, (4, "this call"))


def test_special_ids_come_from_the_tokenizers_special_and_added_special_tokens() -> None:
    class Added:
        def __init__(self, special: bool) -> None:
            self.special = special

    class Tokenizer:
        def __init__(self) -> None:
            self.all_special_ids = [0, 2]
            self.added_tokens_decoder = {50: Added(True), 51: Added(False)}

    assert special_token_ids(Tokenizer()) == {0, 2, 50}
    assert special_token_ids(None) == frozenset()
