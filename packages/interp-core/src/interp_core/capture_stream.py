"""What does a capture streamed during a generation hand out, and what may `rows=` name?

`capture_generation_stream(tokens, points, ...)` is an async iterator of `CaptureChunk`s: each
holds the rows captured since the previous chunk (positions `[start, stop)` of prompt +
generated tokens), the generated tokens that arrived with them, and, on the last chunk, the
finished `Generation`. The chunks' tensors, concatenated along positions (`join_chunks`), are the
cache `capture_generation` returns for the same call: the last sampled token is never fed back,
so they cover `len(prompt) + len(generated) - 1` positions.

Points whose tensors have a key axis (`attn_scores`, `attn_probs`: `[batch, heads, q, k]`) grow
along two axes as a generation runs, so no chunk of them is a slice of the final tensor; a
stream refuses them (`check_streamable`) and names `capture_generation` instead.

`check_rows` reads the `rows=` of `capture(..., rows=[...])`: the token positions a caller wants
back, in the order given (negative counts from the end, as in Python), each once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from interp_core.address import Address, to_addresses
from interp_core.cache import ActivationCache
from interp_core.errors import CapabilityUnsupported, InvalidArgument

__all__ = [
    "KEY_AXIS_POINTS",
    "CaptureChunk",
    "check_rows",
    "check_streamable",
    "join_chunks",
    "position_axis",
    "refuse_rows_without_tokens",
    "select_rows",
]

# Points laid out [batch, heads, query, key]: their positions are the query axis (2).
KEY_AXIS_POINTS = frozenset({"attn_scores", "attn_probs"})


def position_axis(address: Address) -> int:
    """The axis of `address`'s tensors that runs over token positions."""
    return 2 if address.name in KEY_AXIS_POINTS else 1


@dataclass(frozen=True)
class CaptureChunk:
    """Rows captured during a generation, as they arrive.

    `tensors[address]` is `[1, stop - start, ...]`: the rows of positions `[start, stop)` of
    prompt + generated tokens. `steps` are the generated tokens that arrived with these rows
    (`GenerationStep`s, texts concatenating to the generation's text). `generation` is set on the
    last chunk only (`finished`), with the settings used in `generation.sampling`.
    """

    start: int
    stop: int
    tensors: Mapping[Address, Any]
    steps: tuple[Any, ...] = ()
    generation: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tensors", MappingProxyType(dict(self.tensors)))
        object.__setattr__(self, "steps", tuple(self.steps))
        if self.stop < self.start:
            message = f"a CaptureChunk's stop ({self.stop}) is before its start ({self.start})"
            raise ValueError(message)

    @property
    def finished(self) -> bool:
        return self.generation is not None

    @property
    def token_ids(self) -> tuple[int, ...]:
        """The generated tokens that arrived with this chunk."""
        return tuple(int(step.token_id) for step in self.steps)

    def __getitem__(self, key: Any) -> Any:
        (address,) = to_addresses([key])
        return self.tensors[address]


def join_chunks(chunks: Sequence[CaptureChunk], cat: Any) -> ActivationCache:
    """Every chunk's tensors concatenated along positions with `cat` (`torch.cat` for the
    first-party backends' tensors): the cache `capture_generation` returns for the same call.
    The core takes the function rather than importing a tensor library."""
    if not chunks:
        return ActivationCache({})
    expected = 0
    for chunk in chunks:
        if chunk.start != expected:
            message = (
                f"chunks do not tile the positions: one starts at {chunk.start}, not {expected}"
            )
            raise InvalidArgument(message)
        expected = chunk.stop
    joined: dict[Address, Any] = {}
    for address in chunks[0].tensors:
        pieces = [chunk.tensors[address] for chunk in chunks if chunk.stop > chunk.start]
        joined[address] = cat(pieces, position_axis(address))
    return ActivationCache(joined)


def select_rows(tensors: Mapping[Address, Any], rows: Sequence[int]) -> dict[Address, Any]:
    """Each tensor indexed at `rows` along its position axis (a list index: torch and numpy
    both gather with it, so the core needs neither)."""
    chosen = list(rows)
    picked: dict[Address, Any] = {}
    for address, tensor in tensors.items():
        index = (slice(None),) * position_axis(address) + (chosen,)
        picked[address] = tensor[index]
    return picked


def check_streamable(addresses: Sequence[Address], knobs: Mapping[str, Any] | None = None) -> None:
    """Refuse points a stream cannot cut into position chunks (see the module docstring), and
    `prompt_logprobs`, which a captured stream has no chunk to carry."""
    if knobs and knobs.get("prompt_logprobs") is not None:
        msg = "prompt_logprobs with capture_generation_stream"
        raise CapabilityUnsupported.build(
            msg,
            "a chunk carries the rows and generated tokens of its positions, not the prompt's "
            "log-probabilities",
            "ask generate(..., prompt_logprobs=N) for them",
        )
    bad = [str(a) for a in addresses if a.name in KEY_AXIS_POINTS]
    if bad:
        what = f"capture_generation_stream of {', '.join(bad)}"
        raise CapabilityUnsupported.build(
            what,
            "attention patterns have a key axis that grows with every generated token, so no "
            "chunk of rows is a slice of the final tensor",
            "use capture_generation for attention patterns, or stream q/k/z and rebuild them",
        )


def check_rows(rows: Any, length: int) -> tuple[int, ...] | None:
    """`rows=` as non-negative positions in `[0, length)`, in the order given; None: all.

    Negative positions count from the end; a position named twice, a non-integer or one outside
    the prompt is refused (a silent clip would hand back rows nobody asked for).
    """
    if rows is None:
        return None
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence | range):
        tolist = getattr(rows, "tolist", None)
        if tolist is None:
            message = f"rows={rows!r} must be a list of token positions (ints)"
            raise InvalidArgument(message)
        rows = tolist()
    chosen: list[int] = []
    for row in rows:
        if isinstance(row, bool) or not isinstance(row, int):
            message = f"rows= holds {row!r}; every entry must be an int token position"
            raise InvalidArgument(message)
        position = row + length if row < 0 else row
        if not 0 <= position < length:
            message = (
                f"rows= names position {row}, outside this {length}-token input "
                f"(valid: {-length}..{length - 1})"
            )
            raise InvalidArgument(message)
        if position in chosen:
            message = f"rows= names position {position} twice; name each position once"
            raise InvalidArgument(message)
        chosen.append(position)
    if not chosen:
        message = "rows= is empty; pass at least one position, or rows=None for all of them"
        raise InvalidArgument(message)
    return tuple(chosen)


def refuse_rows_without_tokens() -> None:
    """`rows=` with a prompt given only as embeddings (tokens=None): refused on every backend."""
    what = "capture(rows=...) with tokens=None (a prompt given whole as prompt_embeds)"
    msg = f"{what} is not served"
    raise InvalidArgument.build(
        msg,
        "rows are positions checked against the tokens' length, and there are no tokens",
        "capture the whole prompt and index its rows (cache[point][:, rows])",
    )
