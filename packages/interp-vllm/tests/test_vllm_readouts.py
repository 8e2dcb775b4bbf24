"""Weight rows, residual decoding, probes and fitted lenses on vLLM, against eager by hand.

Each backend (hooked `vllm`, compiled `vllm-static`) runs the conformance kit's read-out checks
(`ReadoutConformance`: each call against its formula rebuilt from the model's own captures), and
then the same calls against the float32 eager model's weights and captures, computed by hand in
torch here: `W_U[ids]`, `W_E[ids]`, `softcap(norm(h) @ W_U.T)`, `act(h @ V.T + b)` per row of a
batch, and the fitted lens `decode(J_bar @ h)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from vllm_helpers import family_engines

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_core.readouts import DirectionSet, LensSpec
from interp_core.steering import SteeringSpec
from interp_core.testing import ReadoutConformance

pytest_plugins = ["interp_core.testing.plugin"]
pytestmark = pytest.mark.slow


def _prompt(model: Any) -> torch.Tensor:
    return model.to_tokens("The quick brown fox jumps over the lazy dog")


class _ByHand:
    """The same calls against the eager model's weights and captures, computed here."""

    def test_weight_rows_are_eagers_weights(self, interp_model: Any, eager: Any) -> None:
        ids = [5, 0, 999, 5, 17]
        head = eager.hf_model.get_output_embeddings().weight.detach()
        embed = eager.hf_model.get_input_embeddings().weight.detach()
        assert torch.equal(sync.unembed_rows(interp_model, ids), head[ids])
        assert torch.equal(sync.embed_rows(interp_model, ids), embed[ids])
        with pytest.raises(InvalidArgument, match="1000"):
            sync.unembed_rows(interp_model, [1000])

    def test_decode_residuals_of_a_batch(self, interp_model: Any, eager: Any) -> None:
        torch.manual_seed(0)
        residuals = torch.randn(2, 3, eager.d_model)
        want = sync.decode_residuals(eager, residuals)
        got = sync.decode_residuals(interp_model, residuals)
        assert got.shape == (2, 3, 1000)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        top = sync.decode_residuals(interp_model, residuals, top_k=4)
        probs = torch.softmax(want.float(), dim=-1)
        assert torch.equal(top.ids, probs.topk(4).indices)
        torch.testing.assert_close(top.probs, probs.topk(4).values, atol=1e-5, rtol=0)

    def test_project_of_a_batch_by_hand(self, interp_model: Any, eager: Any) -> None:
        tokens = _prompt(eager).repeat(2, 1)
        tokens[1, 3] = 42  # two different rows, one request each
        point = Address("resid_post", 1)
        torch.manual_seed(1)
        vectors, bias = torch.randn(5, eager.d_model), torch.randn(5)
        sets = [DirectionSet(point, vectors), DirectionSet("resid_post.0", vectors, bias, "relu")]
        plain, probe = sync.project(interp_model, tokens, sets)
        cache = eager.run_with_cache(tokens, [point, Address("resid_post", 0)])
        torch.testing.assert_close(plain, cache[point] @ vectors.T, atol=1e-4, rtol=1e-4)
        want = (cache[Address("resid_post", 0)] @ vectors.T + bias).clamp_min(0)
        torch.testing.assert_close(probe, want, atol=1e-4, rtol=1e-4)
        assert plain.shape == (2, tokens.shape[1], 5)
        with pytest.raises(InvalidArgument, match="wide"):
            sync.project(interp_model, tokens, [DirectionSet(point, vectors[:, :7])])

    def test_fitted_lens_is_decode_of_j_bar_h(self, interp_model: Any, eager: Any) -> None:
        torch.manual_seed(2)
        d = eager.d_model
        lens = {0: torch.randn(d, d) / d**0.5, 1: torch.eye(d) + 0.1 * torch.randn(d, d)}
        # Refused before any step: a lens for a wider model, and one for a deeper one.
        with pytest.raises(InvalidArgument, match=f"needs \\[{d}, {d}\\]"):
            sync.set_lens_jacobians(interp_model, {0: torch.randn(d + 1, d + 1)}, name="bad")
        with pytest.raises(InvalidArgument, match="layer 7"):
            sync.set_lens_jacobians(interp_model, {7: torch.randn(d, d)}, name="bad")
        held = sync.set_lens_jacobians(interp_model, lens, name="fit")
        assert held == 2 * d * d * 4
        tokens = _prompt(eager)
        result = sync.logit_lens(
            interp_model, tokens, LensSpec([0, 1], jacobian=True, jacobian_set="fit"), top_k=5
        )
        cache = eager.run_with_cache(tokens, [Address("resid_post", 0), Address("resid_post", 1)])
        for layer in (0, 1):
            h = cache[Address("resid_post", layer)][0]
            logits = sync.decode_residuals(eager, h @ lens[layer].T)
            probs = torch.softmax(logits, dim=-1).topk(5)
            for position, row in enumerate(result.predictions[layer]):
                assert [p.token_id for p in row] == probs.indices[position].tolist()
                got = torch.tensor([p.prob for p in row])
                torch.testing.assert_close(got, probs.values[position], atol=1e-5, rtol=0)
        sync.set_lens_jacobians(interp_model, None, name="fit")
        with pytest.raises(InvalidArgument, match="no lens set 'fit'"):
            sync.logit_lens(interp_model, tokens, LensSpec([0], jacobian=True, jacobian_set="fit"))

    def test_lens_over_a_generation_is_eagers(self, interp_model: Any, eager: Any) -> None:
        """Streamed from the workers, step for step what eager's KV loop reads: a plain and a
        fitted lens in one call, under steering, with a word mask."""
        tokens = _prompt(eager)
        torch.manual_seed(3)
        lens = {
            layer: torch.eye(eager.d_model) + 0.2 * torch.randn(eager.d_model, eager.d_model)
            for layer in (0, 1)
        }
        spec = SteeringSpec("resid_post.0", torch.randn(eager.d_model), scale=2.0)
        mask = torch.arange(eager.facts.vocab_size) % 3 != 0
        lenses = [LensSpec(None), "gen-fit"]
        options = {"top_n": 5, "max_new_tokens": 6, "temperature": 0.0, "steering": spec}
        for model in (interp_model, eager):
            sync.set_lens_jacobians(model, lens, name="gen-fit")
        try:
            got = list(
                sync.generate_with_lens(interp_model, tokens, lenses, word_mask=mask, **options)
            )
            want = list(sync.generate_with_lens(eager, tokens, lenses, word_mask=mask, **options))
        finally:
            for model in (interp_model, eager):
                sync.set_lens_jacobians(model, None, name="gen-fit")
        assert [s.token_id for s in got] == [s.token_id for s in want]
        assert [s.next_token_id for s in got] == [s.next_token_id for s in want]
        assert got[-1].finish_reason == want[-1].finish_reason == "length"
        assert sum(s.is_generated for s in got) == 5
        for a, b in zip(got, want, strict=True):
            for index in range(len(lenses)):
                assert torch.equal(a.top_ids[index], b.top_ids[index]), (a.position, index)
                assert not bool((a.top_ids[index] % 3 == 0).any())
                torch.testing.assert_close(
                    a.top_probs[index], b.top_probs[index], atol=1e-5, rtol=0
                )

    def test_the_lens_streams_before_the_request_ends(self, interp_model: Any) -> None:
        """The first step is yielded while the workers still hold the request (it is collected
        only once its last output is handled), and nothing is held after the stream ends."""
        tokens = _prompt(interp_model)

        async def first_then_rest() -> tuple[Any, list[str], list[Any], list[str]]:
            stream = interp_model.generate_with_lens(
                tokens, [LensSpec([0])], max_new_tokens=12, temperature=0.0
            )
            first = await anext(stream)
            held = await interp_model.pending_requests()
            rest = [step async for step in stream]
            return first, held, rest, await interp_model.pending_requests()

        first, held, rest, after = sync.run(interp_model, first_then_rest)
        assert first.position == 0 and len(held) == 1
        assert len(rest) == tokens.shape[1] + 10 and rest[-1].finish_reason == "length"
        assert after == []


class TestHookedReadouts(ReadoutConformance, _ByHand):
    interp_families = ("llama",)

    @pytest.fixture(scope="class")
    def interp_model_factory(self) -> Callable[[str], Any]:
        return family_engines("vllm")


class TestStaticReadouts(ReadoutConformance, _ByHand):
    interp_families = ("llama",)

    @pytest.fixture(scope="class")
    def interp_model_factory(self) -> Callable[[str], Any]:
        return family_engines("vllm-static", static_points="auto")
