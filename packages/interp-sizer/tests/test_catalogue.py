"""Every constant and every GPU row carries its source: a number without one is a guess."""

from __future__ import annotations

import pytest
from sizer_helpers import ISSUE_GPUS

from interp_sizer import CALIBRATIONS, GPUS, UnknownGpu, get_gpu, gpu_names


def test_every_calibration_says_what_it_is_why_and_where_it_comes_from() -> None:
    assert len(CALIBRATIONS) >= 20
    names = [c.name for c in CALIBRATIONS]
    assert len(names) == len(set(names))
    for c in CALIBRATIONS:
        assert c.value > 0, c.name
        assert c.unit and len(c.why) > 20 and len(c.source) > 10, c.name


def test_the_catalogue_holds_the_issue_gpus_with_sourced_figures() -> None:
    assert set(ISSUE_GPUS) == set(gpu_names())
    for gpu in GPUS:
        assert 0 < gpu.memory_gib <= gpu.board_memory_gb, gpu.name  # usable never exceeds the box
        assert gpu.bandwidth_tb_s > 0 and gpu.bf16_tflops > 0 and len(gpu.source) > 20
    assert get_gpu("A40").memory_gib == 44.4  # ECC on takes 6.25% of the board
    assert not get_gpu("T4").has_bf16


@pytest.mark.parametrize("alias", ["h100", "H100-SXM", "h100-80gb", "H10080GB"])
def test_gpu_aliases(alias: str) -> None:
    assert get_gpu(alias).name == "H100-80GB"


def test_unknown_gpu_lists_the_catalogue() -> None:
    with pytest.raises(UnknownGpu, match="Known GPUs: T4, L4"):
        get_gpu("V100")
