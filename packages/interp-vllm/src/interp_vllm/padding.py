"""How does a padded batch (tokens plus an attention mask) run on vLLM, and what comes back?

vLLM has no padding: every request is a plain list of ids whose positions count 0, 1, 2... So a
batch with an `attention_mask` is split into rows before anything is sent: row `b` is the ids of
`tokens[b]` where the mask is 1, in order, run as its own request. That is what the eager backend
computes for the same batch (it numbers positions from the mask and masks padded keys), so real
positions agree whichever side the padding is on, or even with holes in the mask.

The rows' captures are put back where their tokens stood in the padded `[batch, seq, ...]`
tensor; a padded position holds zeros (attention patterns `[batch, heads, seq, seq]`: zero
wherever the query or the key is padding). Zeros rather than what a padded forward would compute:
no forward ran there, and a reader who masks as they would for eager loses nothing.

The mask is checked as eager checks it (shape equal to the tokens', 0 and 1 only, no empty row)
and refused with `InvalidArgument` otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interp_core.address import Address
from interp_core.errors import InvalidArgument

__all__ = ["RowBatch", "split_rows"]

# Points whose captured tensor is [1, heads, q, k]: both trailing token axes are repadded.
_PAIRWISE = ("attn_scores", "attn_probs")


@dataclass(frozen=True, slots=True)
class RowBatch:
    """The requests a capture sends, and where each row's tokens sit in the caller's batch.

    `columns[b]` is None for an unpadded batch (row b fills every column), else the padded
    column of each of row b's tokens."""

    rows: tuple[tuple[int, ...], ...]
    width: int
    columns: tuple[tuple[int, ...], ...] | None

    @property
    def padded(self) -> bool:
        return self.columns is not None

    def stack(self, addresses: Sequence[Address], per_row: Sequence[dict[Address, Any]]) -> Any:
        """One `[batch, width, ...]` tensor per address from the rows' `[1, length, ...]` ones."""
        import torch

        if self.columns is None:
            return {a: torch.cat([row[a] for row in per_row]) for a in addresses}
        out = {}
        for address in addresses:
            first = per_row[0][address]
            pairwise = address.name in _PAIRWISE
            tail = (self.width, self.width) if pairwise else (self.width, *first.shape[2:])
            lead = first.shape[1:-2] if pairwise else ()
            full = first.new_zeros((len(self.rows), *lead, *tail))
            for b, (row, where) in enumerate(zip(per_row, self.columns, strict=True)):
                index = torch.tensor(where, dtype=torch.long, device=first.device)
                value = row[address][0]
                if pairwise:  # keys to their columns first, then queries to their rows
                    keys = value.new_zeros((*value.shape[:-1], self.width))
                    keys.index_copy_(-1, index, value)
                    full[b].index_copy_(-2, index, keys)
                else:
                    full[b].index_copy_(0, index, value)
            out[address] = full
        return out


def split_rows(prompts: Sequence[Sequence[int]], mask: Any) -> RowBatch:
    """The rows to run for `prompts` (checked, equally long) under `mask` (None: no padding)."""
    width = len(prompts[0])
    if mask is None:
        return RowBatch(tuple(tuple(p) for p in prompts), width, None)
    values = _mask_rows(mask, len(prompts), width)
    if all(v == 1 for row in values for v in row):
        return RowBatch(tuple(tuple(p) for p in prompts), width, None)
    columns = tuple(tuple(i for i, v in enumerate(row) if v == 1) for row in values)
    rows = tuple(
        tuple(prompt[i] for i in where) for prompt, where in zip(prompts, columns, strict=True)
    )
    return RowBatch(rows, width, columns)


def _mask_rows(mask: Any, batch: int, width: int) -> list[list[int]]:
    values = mask.tolist() if hasattr(mask, "tolist") else mask
    if isinstance(values, (list, tuple)) and values and not isinstance(values[0], (list, tuple)):
        values = [values]
    shape_ok = (
        isinstance(values, (list, tuple))
        and len(values) == batch
        and all(isinstance(r, (list, tuple)) and len(r) == width for r in values)
    )
    if not shape_ok:
        msg = f"the attention_mask is not a [{batch}, {width}] array like the tokens"
        raise InvalidArgument.build(
            msg,
            "the mask says, for every token of the batch, whether it is real (1) or padding (0)",
            "pass one mask row per prompt row, each as long as the padded tokens",
        )
    odd = sorted({v for r in values for v in r if v not in (0, 1)}, key=repr)
    if odd:
        msg = f"the attention_mask holds {odd[:5]}"
        raise InvalidArgument.build(
            msg,
            "a mask is 1 for a real token and 0 for padding; any other value would be read as "
            "one of them silently",
            "pass 0 and 1 only",
        )
    empty = [b for b, r in enumerate(values) if not any(v == 1 for v in r)]
    if empty:
        msg = f"rows {empty} of the attention_mask are all zeros"
        raise InvalidArgument.build(
            msg,
            "such a row has no token to run",
            "drop those rows from the batch",
        )
    return [[int(v) for v in r] for r in values]
