"""Helpers shared by the chat tests: decoded runs of labelled tokens, and a steered drive.

`span_groups` and `label_groups` turn per-token labels into (label, decoded text) runs, so a
test can state what each part of a prompt or a reply is in readable text; `driven` makes a
random tiny model write a chosen reply, markers included.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from interp_core import generate
from interp_core.steering import SteeringSpec

__all__ = ["driven", "label_groups", "span_groups"]


def label_groups(tokenizer: Any, ids: Sequence[int], labels: Sequence[Any]) -> list[tuple]:
    """Consecutive tokens sharing a label, each run as (label, its decoded text)."""
    return [
        (key, tokenizer.decode([i for i, _ in group]))
        for key, group in itertools.groupby(zip(ids, labels, strict=True), key=lambda p: p[1])
    ]


def span_groups(tokenizer: Any, chat: Any) -> list[tuple]:
    """Consecutive tokens sharing (message, role, section, channel), with their decoded text."""
    keys = [(s.message, s.role, s.section, s.channel) for s in chat.spans]
    return label_groups(tokenizer, chat.token_ids, keys)


def driven(m: Any, prompt: list[int], target: list[int]) -> tuple[int, ...]:
    """Greedy generation steered to emit `target`: at each step the last layer's residual is
    pushed along the unembedding row of the next wanted token (positions count the prompt,
    then generated tokens), so a random tiny model writes the markers a real one would."""
    weight = m.hf_model.get_output_embeddings().weight.detach()
    last = f"resid_post.{m.n_layers - 1}"
    specs = [
        SteeringSpec(last, weight[t] / weight[t].norm(), "add", scale=200.0, positions=(p,))
        for p, t in enumerate(target, start=len(prompt) - 1)
    ]
    out = generate(m, [prompt], max_new_tokens=len(target), temperature=0.0, steering=specs)
    assert list(out.token_ids) == target  # the drive took
    return out.token_ids
