"""A padded batch split into rows and put back together (no engine needed)."""

from __future__ import annotations

import pytest
import torch

from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_vllm.padding import split_rows

_IDS = [[1, 1, 7, 8], [4, 5, 6, 1], [9, 1, 3, 1]]
_MASK = [[0, 0, 1, 1], [1, 1, 1, 0], [1, 0, 1, 0]]  # left, right, and a hole


def test_rows_are_the_real_tokens_in_order() -> None:
    batch = split_rows(_IDS, torch.tensor(_MASK))
    assert batch.padded
    assert batch.rows == ((7, 8), (4, 5, 6), (9, 3))
    assert batch.columns == ((2, 3), (0, 1, 2), (0, 2))


def test_no_mask_or_an_all_ones_mask_is_the_batch_itself() -> None:
    for mask in (None, [[1] * 4] * 3):
        batch = split_rows(_IDS, mask)
        assert not batch.padded
        assert batch.rows == tuple(tuple(r) for r in _IDS)


def test_rows_go_back_to_their_columns_and_padding_is_zero() -> None:
    batch = split_rows(_IDS, _MASK)
    resid, probs = Address("resid_post", 0), Address("attn_probs", 0)
    per_row = []
    for n, row in enumerate(batch.rows):
        length = len(row)
        per_row.append(
            {
                resid: torch.arange(length * 2, dtype=torch.float32).view(1, length, 2) + 10 * n,
                probs: torch.arange(3 * length * length, dtype=torch.float32).view(
                    1, 3, length, length
                )
                + 1,
            }
        )
    out = batch.stack([resid, probs], per_row)
    assert out[resid].shape == (3, 4, 2)
    assert out[probs].shape == (3, 3, 4, 4)
    mask = torch.tensor(_MASK).bool()
    for b in range(3):
        real = mask[b]
        assert torch.equal(out[resid][b][real], per_row[b][resid][0])
        assert not out[resid][b][~real].any()
        keep = real[:, None] & real[None, :]
        assert torch.equal(out[probs][b][..., keep], per_row[b][probs][0].flatten(1))
        assert not out[probs][b][..., ~keep].any()


@pytest.mark.parametrize(
    ("mask", "match"),
    [
        ([[1, 1, 1]] * 3, r"not a \[3, 4\] array"),
        ([[1, 1, 2, 1]] * 3, r"holds \[2\]"),
        ([[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0]], r"rows \[1\] .* all zeros"),
    ],
)
def test_a_bad_mask_is_refused(mask: list, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        split_rows(_IDS, mask)
