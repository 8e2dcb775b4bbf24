"""Is the logit lens `lm_head(final_norm(x))`, with the model's own logit scaling, at every layer?

The reference is computed here from the HF modules and the config keys directly: the final norm
found on the trunk by name, the output embedding, then whatever the family's logits apply
(Granite divides by `logits_scaling`, Cohere multiplies by `logit_scale`, Gemma-2 soft-caps with
`final_logit_softcapping`). DeepSeek-V4 keeps four residual streams, which its hyper head
collapses before the final norm; the lens reads the stream stack and applies that head too.
Gemma-3n's four AltUp streams are averaged after unembed projections, rescaled to stream 0's
RMS; the reference below writes that step out from the modelling code's description.

At the last layer the lens is the model's own read-out, so it equals the logits of a plain
forward and its top-1 is the model's next-token argmax at every position.
"""

from __future__ import annotations

import pytest
import torch
from eager_helpers import final_norm, lm_head, model, prompt_ids, trunk

from interp_core.address import Address
from interp_eager.model import EagerModel
from interp_testmodels.families import FAMILY_NAMES

# The reference runs the same modules on the same tensor in the same order; only the scaling
# step may be written differently (x / 2 against x * 0.5 is exact; a softcap is not reordered).
_ATOL = 1e-6


def _by_hand(m: EagerModel, residual: torch.Tensor) -> torch.Tensor:
    hf = m.hf_model
    config = hf.config.to_dict()
    with torch.no_grad():
        if residual.dim() == 4 and m.facts.altup_active_stream is not None:
            residual = _altup_by_hand(trunk(hf), residual)
        elif residual.dim() == 4:  # a stream stack [batch, seq, streams, d_model]
            residual = trunk(hf).hc_head(residual)
        logits = lm_head(hf)(final_norm(hf)(residual))
        if config.get("logits_scaling") is not None:
            logits = logits / config["logits_scaling"]
        if config.get("logit_scale") is not None:
            logits = logits * config["logit_scale"]
        if config.get("lm_head_multiplier") is not None:  # Falcon-H1
            logits = logits * config["lm_head_multiplier"]
        if config.get("final_logit_softcapping") is not None:
            cap = config["final_logit_softcapping"]
            logits = torch.tanh(logits / cap) * cap
    return logits


def _altup_by_hand(trunk: torch.nn.Module, stack: torch.Tensor) -> torch.Tensor:
    first = stack[:, :, 0]
    rms = first.pow(2).mean(-1, keepdim=True).sqrt()
    terms = [first]
    for k, projection in enumerate(trunk.altup_unembed_projections, start=1):
        projected = projection(stack[:, :, k])
        terms.append(
            projected * rms / projected.pow(2).mean(-1, keepdim=True).clamp_min(1e-5).sqrt()
        )
    return sum(terms) / len(terms)


def _residual(m: EagerModel, layer: int) -> Address:
    return Address("resid_streams" if m.facts.n_streams > 1 else "resid_post", layer)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_lens_is_the_final_norm_and_head_by_hand(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    lens = m.logit_lens_sync(ids, top_k=3)
    assert lens.layers == tuple(range(m.n_layers))
    residuals = [_residual(m, layer) for layer in range(m.n_layers)]
    cache = m.run_with_cache(ids, residuals)
    for layer, address in enumerate(residuals):
        expected = _by_hand(m, cache[address])[0]
        torch.testing.assert_close(lens.logits[layer], expected, atol=_ATOL, rtol=0)
        # The top-k read-out is the lens's own logits ranked.
        top = expected.argmax(dim=-1).tolist()
        assert [row[0].token_id for row in lens.predictions[layer]] == top
        assert all(len(row) == 3 for row in lens.predictions[layer])


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_the_last_layer_of_the_lens_is_the_models_own_prediction(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    last = m.n_layers - 1
    lens = m.logit_lens_sync(ids, [last], top_k=5)
    logits = m.forward_logits(ids)[0]
    torch.testing.assert_close(lens.logits[0], logits, atol=_ATOL, rtol=0)
    assert [row[0].token_id for row in lens.predictions[last]] == logits.argmax(-1).tolist()
    best = lens.top(last)
    assert best[0].token_id == int(logits[-1].argmax())
    assert best[0].token == m.tokenizer.decode([best[0].token_id])
    probs = [p.prob for p in best]
    assert probs == sorted(probs, reverse=True)
    expected = torch.softmax(logits[-1].float(), -1).topk(5).values.tolist()
    assert probs == pytest.approx(expected, abs=1e-6)


def test_the_lens_refuses_a_layer_that_does_not_exist() -> None:
    from interp_core.errors import PointUnsupported

    m = model("llama")
    with pytest.raises(PointUnsupported, match=r"resid_post\.2.*0\.\.1"):
        m.logit_lens_sync(prompt_ids(m), [m.n_layers])
    with pytest.raises(KeyError, match="layers=\\[0\\]"):
        m.logit_lens_sync(prompt_ids(m), [1]).top(0)
