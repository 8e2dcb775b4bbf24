"""The pipeline split rule the vLLM backend and the sizer share: what it refuses, in which words."""

from __future__ import annotations

import pytest

from interp_core.errors import InvalidArgument
from interp_core.parallel import check_pipeline_split


@pytest.mark.parametrize(("num_gpus", "stages", "layers"), [(1, 1, 1), (8, 2, 80), (6, 3, 3)])
def test_a_split_into_equal_stages_of_at_least_one_layer_is_returned(
    num_gpus: int, stages: int, layers: int
) -> None:
    assert check_pipeline_split(num_gpus, stages, layers) == stages


@pytest.mark.parametrize(
    ("num_gpus", "stages", "layers", "words"),
    [
        (6, 4, 80, "choose pipeline_parallel from [1, 2, 3, 6], or change num_gpus"),
        (4, 4, 3, "pipeline_parallel=4 stages need at least one layer each and the model has 3"),
        (2, 0, 80, "pipeline_parallel=0 must be a positive int (pipeline stages)"),
        (2, True, 80, "pipeline_parallel=True must be a positive int"),
        (2, "2", 80, "pipeline_parallel='2' must be a positive int"),
    ],
)
def test_an_impossible_split_is_refused_naming_the_valid_choices(
    num_gpus: int, stages: object, layers: int, words: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_pipeline_split(num_gpus, stages, layers)
    assert words in str(caught.value)
