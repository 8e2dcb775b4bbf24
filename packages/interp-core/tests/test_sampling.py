"""Sampling arguments: one check in the core, so every backend refuses alike.

The conformance kit (`check_argument_refusals`) holds each backend to these exact words; here the
check itself: what it accepts, how it normalises, and one message per argument.
"""

from __future__ import annotations

import math

import pytest

from interp_core.errors import InvalidArgument
from interp_core.sampling import Sampling, check_lens_top_k, check_sampling
from interp_core.testing.checks import BAD_SAMPLING


def _args(**bad: object) -> dict[str, object]:
    return {"max_new_tokens": 4, "temperature": 0.7, **bad}


def test_sound_arguments_are_normalised() -> None:
    got = check_sampling(max_new_tokens=4, temperature=1, top_k=5, top_p=0.9, seed=0)
    assert got == Sampling(4, 1.0, 5, 0.9, 0)
    assert isinstance(got.temperature, float)
    assert check_sampling(max_new_tokens=1, temperature=0.0) == Sampling(1, 0.0)
    assert check_sampling(**_args(top_p=1, seed=2**63 - 1)).top_p == 1.0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens=0 must be a positive int"),
        ({"max_new_tokens": True}, "max_new_tokens=True must be a positive int"),
        ({"max_new_tokens": 2.0}, "max_new_tokens=2.0 must be a positive int"),
        ({"temperature": -1.0}, "temperature=-1.0 must be a finite number >= 0 (0 is greedy)"),
        ({"temperature": math.nan}, "temperature=nan must be a finite number >= 0 (0 is greedy)"),
        ({"temperature": math.inf}, "temperature=inf must be a finite number >= 0 (0 is greedy)"),
        ({"temperature": "1"}, "temperature='1' must be a finite number >= 0 (0 is greedy)"),
        ({"top_k": 0}, "top_k=0 must be a positive int, or None to keep every token"),
        ({"top_k": -1}, "top_k=-1 must be a positive int, or None to keep every token"),
        ({"top_p": 0.0}, "top_p=0.0 must be a number in (0, 1], or None to keep every token"),
        ({"top_p": 1.5}, "top_p=1.5 must be a number in (0, 1], or None to keep every token"),
        ({"top_p": math.nan}, "top_p=nan must be a number in (0, 1], or None to keep every token"),
        ({"seed": -1}, "seed=-1 must be an int in [0, 2**63), or None for fresh randomness"),
        (
            {"seed": 2**63},
            f"seed={2**63} must be an int in [0, 2**63), or None for fresh randomness",
        ),
        ({"seed": "7"}, "seed='7' must be an int in [0, 2**63), or None for fresh randomness"),
    ],
)
def test_each_bad_argument_has_one_class_and_one_message(bad: dict, message: str) -> None:
    with pytest.raises(InvalidArgument) as excinfo:
        check_sampling(**_args(**bad))
    assert str(excinfo.value) == message


def test_the_same_bad_input_gets_the_same_refusal_every_time() -> None:
    # What every backend relies on: the refusal is a function of the bad value alone, whatever
    # the other (sound) arguments are.
    for bad in BAD_SAMPLING:
        refusals = set()
        for others in (_args(), {"max_new_tokens": 64, "temperature": 0.0, "top_k": 3}):
            with pytest.raises(InvalidArgument) as excinfo:
                check_sampling(**{**others, **bad})
            refusals.add((type(excinfo.value), str(excinfo.value)))
        assert len(refusals) == 1, bad


@pytest.mark.parametrize("top_k", [0, -3, True, 1.0, None])
def test_the_lens_top_k_is_a_positive_int(top_k: object) -> None:
    with pytest.raises(InvalidArgument, match=r"must be a positive int$"):
        check_lens_top_k(top_k)
    assert check_lens_top_k(3) == 3


def test_the_lens_layers_are_a_non_empty_list_of_distinct_layer_ints() -> None:
    from interp_core.sampling import check_lens_layers

    assert check_lens_layers(None, 3) == [0, 1, 2]
    assert check_lens_layers((2, 0), 3) == [2, 0]
    assert check_lens_layers([5], 3) == [5]  # a layer the model lacks is the backend's refusal
    for bad, fix in (
        ([], r"pass None for every layer"),
        ("01", r"pass a list such as \[0, 3\]"),
        (3, r"pass a list such as"),
        ([True], r"not a layer number"),
        ([1.0], r"not a layer number"),
        ([-1], r"not a layer number.*n_layers=3"),
        ([0, 1, 0], r"repeats \[0\]"),
    ):
        with pytest.raises(InvalidArgument, match=fix):
            check_lens_layers(bad, 3)


def test_the_lens_point_is_a_residual_stream_point() -> None:
    from interp_core.errors import UnknownPoint
    from interp_core.sampling import LENS_POINTS, check_lens_point

    for name in LENS_POINTS:
        assert check_lens_point(name) == name
    for other in ("attn_probs", "z", "mlp_out", "embeddings"):
        with pytest.raises(InvalidArgument, match=rf"cannot decode {other}.*use one of resid_pre"):
            check_lens_point(other)
    with pytest.raises(UnknownPoint, match="resid_post"):
        check_lens_point("resid_psot")
    with pytest.raises(InvalidArgument, match="not a point name"):
        check_lens_point(None)
