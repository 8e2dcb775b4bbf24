"""What a request costs in memory, priced from the model's facts before anything runs.

Two prices, each refused with 413 and its numbers when over its cap:

- the capture: the bytes of the tensors asked for (`--max-capture-bytes`). A named point's shape
  is known from the facts; a raw module (`path.`) is priced at the widest activation the model
  has (its logits, its MLP, its q/k/v projections or one layer's attention scores), since its
  real width is known only once the module ran;
- the forward: the live tensors of one forward over `rows × length` tokens (`--max-forward-bytes`),
  with the terms the sizer prices an eager forward by: the logits at the model dtype and their
  float32 upcast, the hidden state, the MLP intermediate twice, and one layer's attention scores
  and probabilities. A body under the body cap can still ask for a forward that exhausts the host
  (a thousand rows of a hundred tokens on a tiny model is a gigabyte), so the forward is priced
  whether or not it captures anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from interp_core.address import to_address
from interp_core.dtypes import DTYPE_BYTES, canonical_dtype
from interp_core.errors import InterpError
from interp_core.facts import ModelFacts
from interp_core.shapes import point_shape
from interp_serve.errors import TooLarge
from interp_serve.store import check_request_bytes, show_bytes

__all__ = [
    "capture_bytes",
    "check_answer",
    "check_capture",
    "check_decode",
    "check_forward",
    "forward_terms",
    "value_bytes",
]


def value_bytes(dtype: object) -> int | None:
    """Bytes per activation value of a model computing in `dtype` (None when not a model dtype)."""
    name = canonical_dtype(dtype)
    return DTYPE_BYTES.get(name) if name is not None else None


def _mlp_width(facts: ModelFacts) -> int:
    width = facts.d_mlp
    if facts.moe is not None:
        width = max(width, facts.moe.experts_per_token * facts.moe.d_expert)
        width += facts.moe.d_shared_expert or 0
    return max(width, 4 * facts.d_model)


def forward_terms(facts: ModelFacts, itemsize: int, rows: int, length: int) -> dict[str, int]:
    """The live tensors of one forward over `rows × length` tokens, by term (bytes)."""
    tokens = rows * length
    return {
        "logits": tokens * facts.vocab_size * (itemsize + 4),
        "hidden": tokens * facts.d_model * itemsize,
        "mlp": 2 * tokens * _mlp_width(facts) * itemsize,
        "attention scores": 2 * rows * facts.n_heads * length * length * itemsize,
    }


def _widest(facts: ModelFacts, length: int) -> int:
    """Values per token of the widest activation a module of this model can output."""
    projections = facts.n_heads * facts.head_dim + 2 * facts.n_kv_heads * facts.head_dim
    return max(facts.vocab_size, _mlp_width(facts), projections, facts.n_heads * length)


def capture_bytes(
    points: Sequence[Any], facts: ModelFacts, itemsize: int, rows: int, length: int
) -> int:
    """Bytes of the tensors `points` capture over `rows × length` tokens.

    A point the facts refuse (an unknown name, a layer the model lacks) adds nothing: the
    backend refuses it in its own words before running anything.
    """
    total = 0
    for point in points:
        try:
            address = to_address(point)
            if address.is_path:
                total += rows * length * _widest(facts, length) * itemsize
            else:
                total += math.prod(point_shape(address, facts, rows, length)) * itemsize
        except InterpError:
            continue
    return total


def check_forward(
    facts: ModelFacts, itemsize: int, rows: int, length: int, cap: int, what: str
) -> None:
    """Refuse (TooLarge, 413) a forward over `rows × length` tokens priced over `cap` bytes."""
    _check_forward_budget(
        forward_terms(facts, itemsize, rows, length),
        cap,
        f"{what} runs a forward over {rows:,} rows × {length:,} tokens, which needs",
        "rows or shorter prompts",
        of=" of activations",
    )


def _check_forward_budget(
    terms: dict[str, int], cap: int, needs: str, fewer: str, of: str = ""
) -> None:
    """Refuse (TooLarge, 413) work whose `terms` (bytes by name) add up to over `cap`, the
    forward budget: "<needs> about <total><of> (<terms>), over ...; send fewer <fewer> ..."."""
    total = sum(terms.values())
    if total > cap:
        shown = ", ".join(f"{name} {show_bytes(n)}" for name, n in terms.items())
        message = (
            f"{needs} about {show_bytes(total)}{of} ({shown}), over this server's forward "
            f"budget of {show_bytes(cap)}; send fewer {fewer} per request, or ask the operator "
            f"to raise --max-forward-bytes"
        )
        raise TooLarge(message)


def check_capture(
    points: Sequence[Any], facts: ModelFacts, itemsize: int, rows: int, length: int, cap: int
) -> None:
    """Refuse (TooLarge) a capture whose tensors are priced over the per-request cap."""
    check_request_bytes(capture_bytes(points, facts, itemsize, rows, length), cap)


def check_answer(what: str, size: int, cap: int) -> None:
    """Refuse (TooLarge) a read-out whose answer tensors would be over the per-request cap."""
    if size > cap:
        message = (
            f"{what} would answer with {show_bytes(size)} of tensors, over this server's "
            f"per-request cap of {show_bytes(cap)}; ask for fewer rows, tokens or directions per "
            f"request, or ask the operator to raise --max-capture-bytes"
        )
        raise TooLarge(message)


def check_decode(
    facts: ModelFacts, itemsize: int, rows: int, top_k: int | None, forward_cap: int, cap: int
) -> None:
    """Refuse (TooLarge) decoding `rows` residuals whose logits are priced over the forward
    budget, or whose answer (float32 logits, or top-k int64 ids and float32 probabilities) is
    over the per-request cap. The upload itself is under the body cap; the logits are not."""
    terms = {
        "logits": rows * facts.vocab_size * (itemsize + 4),
        "hidden": rows * facts.d_model * itemsize,
    }
    _check_forward_budget(terms, forward_cap, f"decoding {rows:,} residual rows needs", "rows")
    answer = rows * (facts.vocab_size * 4 if top_k is None else top_k * 12)
    check_answer("decode_residuals", answer, cap)
