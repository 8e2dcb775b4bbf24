"""Does `ModelBase` serve its conveniences over `capture` and `generate`, and refuse alike?

Run on the core's fake backend, which derives it: each test names the bug it catches.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from fake_backend import FakeModel, FakeTensor

from interp_core import sync
from interp_core.errors import CapabilityUnsupported, GradientsUnsupported, InvalidArgument
from interp_core.model_base import ModelBase, one_prompt


def test_identity_is_read_from_the_facts() -> None:
    model = FakeModel("wide")
    assert isinstance(model, ModelBase)
    assert (model.model_id, model.n_layers, model.d_model) == ("wide", 2, 10)
    assert model.facts is model._facts


def test_generate_text_is_the_text_of_generate_for_a_string_and_for_tokens() -> None:
    model = FakeModel()
    tokens = model.to_tokens("alpha beta")
    want = sync.generate(model, tokens, max_new_tokens=4, temperature=0.0).text
    assert sync.generate_text(model, "alpha beta", max_tokens=4, temperature=0.0) == want
    assert sync.generate_text(model, tokens, max_tokens=4, temperature=0.0) == want
    # A sampled generation: seed, top_k and top_p reach generate (a dropped seed would differ).
    seeded = {"max_tokens": 6, "temperature": 1.0, "seed": 7}
    once = sync.generate_text(model, tokens, **seeded)
    twin = sync.generate(model, tokens, max_new_tokens=6, temperature=1.0, seed=7).text
    assert once == twin


def test_a_batch_of_two_prompts_is_refused_by_every_one_prompt_convenience() -> None:
    model = FakeModel()
    batch = model.to_tokens(["alpha beta", "gamma delta"])
    with pytest.raises(InvalidArgument, match="generate_text reads one prompt; got a batch of 2"):
        sync.generate_text(model, batch, max_tokens=2)
    with pytest.raises(InvalidArgument, match="capture_residuals reads one prompt"):
        sync.capture_residuals(model, batch)
    with pytest.raises(InvalidArgument, match="batch of 2"):
        one_prompt(model, [[1, 2], [3, 4]], "x")


def test_capture_residuals_are_the_captured_rows_without_the_batch_axis() -> None:
    model = FakeModel()
    tokens = model.to_tokens("alpha beta gamma")
    residuals = sync.capture_residuals(model, tokens)
    cache = sync.capture(model, tokens, [f"resid_post.{n}" for n in range(model.n_layers)])
    assert list(residuals) == list(range(model.n_layers))  # None: every layer
    for layer, rows in residuals.items():
        assert rows.tolist() == cache[f"resid_post.{layer}"].tolist()[0]
    with pytest.raises(InvalidArgument, match="layers"):
        sync.capture_residuals(model, tokens, [])


def test_detach_false_is_refused_where_the_backend_keeps_no_graph() -> None:
    model = FakeModel()
    with pytest.raises(GradientsUnsupported, match=r"backend='fake'.*no graph to keep"):
        sync.capture_residuals(model, model.to_tokens("alpha"), detach=False)


def test_a_multi_stream_trunk_is_refused_rather_than_handed_a_stack() -> None:
    model = FakeModel()
    model._facts = dataclasses.replace(model._facts, n_streams=4)
    with pytest.raises(CapabilityUnsupported, match="4 residual streams"):
        sync.capture_residuals(model, model.to_tokens("alpha"))


def test_capture_attention_is_refused_naming_the_backend() -> None:
    model = FakeModel()
    with pytest.raises(CapabilityUnsupported, match="backend='fake'"):
        sync.capture_attention(model, model.to_tokens("alpha"), [0])


def test_the_work_methods_read_their_keywords_once_for_the_backend() -> None:
    # ModelBase takes the protocol's keywords and hands the backend a CaptureCall: a keyword
    # dropped on the way (capture_generation's seed, say) would change the sampled tokens.
    model = FakeModel()
    tokens = model.to_tokens("alpha beta")
    sampled = {"max_new_tokens": 5, "temperature": 1.0, "seed": 3}
    generation, cache = sync.capture_generation(model, tokens, ["resid_post.0"], **sampled)
    assert generation.token_ids == sync.generate(model, tokens, **sampled).token_ids
    fed = len(generation.prompt_token_ids) + 5 - 1
    assert cache["resid_post.0"].shape == (1, fed, model.d_model)
    with pytest.raises(InvalidArgument, match="tokens=None"):
        asyncio.run(model.capture(None, ["resid_post.0"], rows=[0]))
    with pytest.raises(InvalidArgument, match="points takes a list"):
        asyncio.run(model.capture(tokens, "resid_post.0"))


def test_one_prompt_lifts_a_flat_row_to_a_batch_of_one() -> None:
    class Flat:
        shape = (3,)

        def __getitem__(self, index: object) -> str:
            assert index is None
            return "lifted"

    assert one_prompt(FakeModel(), Flat(), "x") == "lifted"
    assert one_prompt(FakeModel(), [1, 2, 3], "x") == [1, 2, 3]
    assert isinstance(one_prompt(FakeModel(), "alpha", "x"), FakeTensor)
