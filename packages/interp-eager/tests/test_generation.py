"""Does generation agree with HF `generate`, with itself, and with a plain forward?

Every family: greedy `generate` equals `hf_model.generate(do_sample=False)` token for token;
`generate_stream` yields the same tokens and texts that join to `generate`'s text, the last step
marked finished; a seed makes sampling reproducible and different seeds differ; steering changes
what is generated, a steered greedy generation equals the argmax of a steered full forward over
the same tokens (so the KV-cached loop steers the positions it should), and the `steer()`
context steers `generate` and `generate_stream` like `steering=`; `capture_generation` covers
prompt + generated - 1 positions and equals a plain capture over those tokens.
"""

from __future__ import annotations

import pytest
import torch
from eager_helpers import model, prompt_ids, resid_address

from interp_core import sync
from interp_core.steering import SteeringSpec
from interp_eager.model import EagerModel
from interp_testmodels.families import FAMILY_NAMES

_NEW = 8


def _push(m: EagerModel, positions: tuple[int, ...] | None = None) -> SteeringSpec:
    # Several times the residual's own norm, so the next-token argmax cannot survive it.
    generator = torch.Generator().manual_seed(0)
    direction = torch.randn(m.d_model, generator=generator)
    address = resid_address(m, m.n_layers // 2)
    return SteeringSpec(address, direction, scale=6.0, positions=positions)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_greedy_generate_equals_hf_generate(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    ours = m.generate_sync(ids, max_new_tokens=_NEW, temperature=0.0)
    with torch.no_grad():
        theirs = m.hf_model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=_NEW,
            pad_token_id=m.tokenizer.pad_token_id,
        )
    assert list(ours.token_ids) == theirs[0, ids.shape[1] :].tolist()
    assert list(ours.prompt_token_ids) == ids[0].tolist()
    assert ours.text == m.tokenizer.decode(list(ours.token_ids), skip_special_tokens=True)
    expected = "stop" if ours.token_ids[-1] in m._eos_ids() else "length"
    assert ours.finish_reason == expected


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_stream_joins_to_the_generated_text(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    for options in ({"temperature": 0.0}, {"temperature": 1.5, "seed": 3}):
        whole = sync.generate(m, ids, max_new_tokens=12, **options)
        steps = list(sync.generate_stream(m, ids, max_new_tokens=12, **options))
        assert tuple(step.token_id for step in steps) == whole.token_ids
        assert "".join(step.text for step in steps) == whole.text
        assert [step.index for step in steps] == list(range(len(steps)))
        assert [step.finished for step in steps] == [False] * (len(steps) - 1) + [True]
        assert steps[-1].finish_reason == whole.finish_reason
        assert all(step.logprob is not None and step.logprob <= 0 for step in steps)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_sampling_is_reproducible_with_a_seed_and_differs_across_seeds(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)

    def sample(seed: int) -> tuple[int, ...]:
        return m.generate_sync(ids, max_new_tokens=10, temperature=2.0, seed=seed).token_ids

    assert sample(1) == sample(1)
    assert len({sample(seed) for seed in (1, 2, 3)}) > 1
    # top_k=1 keeps only the argmax, so any seed samples the greedy continuation.
    greedy = m.generate_sync(ids, max_new_tokens=6, temperature=0.0).token_ids
    assert m.generate_sync(ids, max_new_tokens=6, top_k=1, seed=5).token_ids == greedy


def _argmax_continuation(
    m: EagerModel, prompt: list[int], generated: tuple[int, ...], steering: object
) -> list[int]:
    """The greedy token after each prefix, read off one full forward over prompt + generated."""
    full = [*prompt, *generated[:-1]]
    logits = m.run_with_cache([full], [], steering=steering).output.logits[0]
    return logits[len(prompt) - 1 :].argmax(-1).tolist()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_steered_generation_differs_and_matches_a_steered_forward(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    plain = m.generate_sync(ids, max_new_tokens=_NEW, temperature=0.0)
    prompt = list(plain.prompt_token_ids)
    assert _argmax_continuation(m, prompt, plain.token_ids, None) == list(plain.token_ids)
    # Everywhere, and only at two generated positions: the loop must track absolute positions.
    seq = ids.shape[1]
    for spec in (_push(m), _push(m, positions=(seq + 1, seq + 3))):
        steered = m.generate_sync(ids, max_new_tokens=_NEW, temperature=0.0, steering=spec)
        assert steered.token_ids != plain.token_ids, spec
        expected = _argmax_continuation(m, prompt, steered.token_ids, spec)
        assert list(steered.token_ids) == expected, spec
    # The steer() context steers generation, streaming included, exactly like steering=.
    spec = _push(m)
    explicit = m.generate_sync(ids, max_new_tokens=_NEW, temperature=0.0, steering=spec)
    with sync.steer(m, spec):
        inside = sync.generate(m, ids, max_new_tokens=_NEW, temperature=0.0)
        streamed = list(sync.generate_stream(m, ids, max_new_tokens=_NEW, temperature=0.0))
    assert inside.token_ids == explicit.token_ids
    assert tuple(step.token_id for step in streamed) == explicit.token_ids
    # Limited to later positions, the first two generated tokens cannot change.
    late = m.generate_sync(
        ids, max_new_tokens=_NEW, temperature=0.0, steering=_push(m, positions=(seq + 1,))
    )
    assert late.token_ids[:2] == plain.token_ids[:2]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_capture_generation_covers_prompt_and_generated_tokens(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    points = [resid_address(m, 0), resid_address(m, m.n_layers - 1)]
    for steering in (None, _push(m)):
        generation, cache = sync.capture_generation(
            m, ids, points, max_new_tokens=6, steering=steering
        )
        assert (
            generation.token_ids
            == sync.generate(m, ids, max_new_tokens=6, temperature=0.0, steering=steering).token_ids
        )
        full = [*generation.prompt_token_ids, *generation.token_ids[:-1]]
        assert len(full) == ids.shape[1] + len(generation.token_ids) - 1
        plain = m.run_with_cache([full], points, steering=steering)
        for address in points:
            assert cache[address].shape[:2] == (1, len(full))
            assert torch.equal(cache[address], plain[address])


def test_a_temperature_too_small_to_divide_by_samples_the_greedy_token() -> None:
    # logits / 1e-300 overflows to inf and the softmax to NaN (a raw RuntimeError from
    # multinomial before the fix; found by the hostile-input harness). The limit is greedy.
    m = model("llama")
    ids = prompt_ids(m)
    greedy = m.generate_sync(ids, max_new_tokens=3, temperature=0)
    tiny = m.generate_sync(ids, max_new_tokens=3, temperature=1e-300, seed=1)
    assert tiny.token_ids == greedy.token_ids
