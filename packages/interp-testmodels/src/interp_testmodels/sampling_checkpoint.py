"""Which tiny checkpoint recommends its own sampling settings, for the generation tests?

`recommending_checkpoint(folder, settings)` lays out a family's tiny model (files linked, not
copied) under `folder` with a `generation_config.json` that states `settings` beside the token ids
the family already writes, so a test can load a checkpoint whose authors "recommend" a
temperature, a top_k or a repetition penalty.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from interp_testmodels.families import build_family

__all__ = [
    "RECOMMENDED",
    "check_follows_recommendation",
    "check_logprobs",
    "check_recommended",
    "recommending_checkpoint",
]

# What the tests' checkpoint recommends: none of these is a library default, so a knob that
# followed the file is told apart from one that did not.
RECOMMENDED: dict[str, Any] = {
    "do_sample": True,
    "temperature": 0.7,
    "top_k": 5,
    "repetition_penalty": 1.3,
}


def recommending_checkpoint(
    folder: str | os.PathLike[str],
    settings: dict[str, Any] | None = None,
    *,
    family: str = "llama",
) -> Path:
    """`folder` holding family `family`'s checkpoint with `settings` (default `RECOMMENDED`)
    written into its generation_config.json; returns the folder."""
    source = build_family(family)
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name != "generation_config.json" and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    config: dict[str, Any] = {}
    stated = source / "generation_config.json"
    if stated.is_file():
        config = json.loads(stated.read_text())
    config.update(RECOMMENDED if settings is None else settings)
    (target / "generation_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return target


def check_logprobs(model: Any, hf_model: Any, tokens: Any, *, atol: float = 1e-5) -> Any:
    """Assert that `model`'s logprobs (sampled, prompt and streamed) are the log-softmax of
    `hf_model`'s raw logits over the same tokens; returns the generation for further checks.

    Every backend reports the same numbers (top-5 per step, top-3 per prompt position), so the
    eager and vLLM suites hold them to one definition written once here.
    """
    import torch

    from interp_core import sync

    got = sync.generate(
        model, tokens, max_new_tokens=6, temperature=0.0, n_logprobs=5, prompt_logprobs=3
    )
    full = torch.tensor([[*tokens[0].tolist(), *got.token_ids[:-1]]])
    with torch.no_grad():
        logprobs = torch.log_softmax(hf_model(full).logits[0].float(), dim=-1)
    prompt = tokens.shape[1]
    assert got.logprobs is not None and len(got.logprobs) == len(got.token_ids)
    for step, entry in enumerate(got.logprobs):
        row = logprobs[prompt - 1 + step]
        values, indices = row.topk(5)
        assert [t for t, _ in entry.top] == indices.tolist()
        assert max(abs(v - w) for (_, v), w in zip(entry.top, values.tolist(), strict=True)) <= atol
        assert abs(entry.logprob - float(row[entry.token_id])) <= atol
    assert got.top_logprobs == tuple(entry.top for entry in got.logprobs)
    assert got.prompt_logprobs is not None and got.prompt_logprobs[0] is None
    assert len(got.prompt_logprobs) == prompt
    for position in range(1, prompt):
        entry = got.prompt_logprobs[position]
        row = logprobs[position - 1]
        assert entry.token_id == tokens[0, position]
        assert [t for t, _ in entry.top] == row.topk(3).indices.tolist()
        assert abs(entry.logprob - float(row[entry.token_id])) <= atol
    streamed = list(
        sync.generate_stream(model, tokens, max_new_tokens=6, temperature=0.0, n_logprobs=5)
    )
    assert [s.top_logprobs for s in streamed] == list(got.top_logprobs)
    return streamed


def check_recommended(sampling: Any) -> None:
    """Assert that a generation's `sampling` ran with the checkpoint's recommended knobs, each
    read from its generation_config.json."""
    knobs = ("temperature", "top_k", "repetition_penalty")
    assert {k: getattr(sampling, k) for k in knobs} == {k: RECOMMENDED[k] for k in knobs}
    assert all(sampling.sources[k] == "generation_config" for k in knobs), sampling.sources


def check_follows_recommendation(model: Any, tokens: Any) -> None:
    """Assert that `model`, serving a checkpoint that recommends RECOMMENDED's knobs, samples
    with them: the same seed with those knobs passed gives the same tokens and the library
    defaults give others; a caller's knob wins, and `use_generation_config=False` runs (and
    reports) the library defaults."""
    from interp_core import sync

    followed = sync.generate(model, tokens, max_new_tokens=8, seed=2)
    explicit = sync.generate(
        model,
        tokens,
        max_new_tokens=8,
        seed=2,
        temperature=0.7,
        top_k=5,
        repetition_penalty=1.3,
        use_generation_config=False,
    )
    defaults = sync.generate(model, tokens, max_new_tokens=8, seed=2, use_generation_config=False)
    assert followed.token_ids == explicit.token_ids != defaults.token_ids
    set_ = sync.generate(model, tokens, max_new_tokens=3, temperature=0.0, top_k=50).sampling
    assert (set_.temperature, set_.top_k) == (0.0, 50) and set_.sources["top_k"] == "caller"
    plain = sync.generate(model, tokens, max_new_tokens=3, use_generation_config=False).sampling
    assert (plain.temperature, plain.top_k, plain.repetition_penalty) == (1.0, None, 1.0)
    assert set(plain.sources.values()) == {"default"}
