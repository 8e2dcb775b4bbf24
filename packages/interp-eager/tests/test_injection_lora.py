"""Prompt embeddings and LoRA adapters on the eager backend, against HF transformers by hand.

A whole-embeddings prompt equals HF's `inputs_embeds` forward (and, when the rows are the
tokens' own embeddings, the tokens' run); an injected row equals HF on the spliced embeddings,
in capture and in greedy generation (HF `generate(inputs_embeds=...)`); a LoRA adapter written
by the test gives the logits of HF with the adapter merged into its weights by hand, and one
PEFT itself makes gives the logits of PEFT's own forward on HF; an injected vector equals a
patch of its embedding slot. Malformed embeddings and unsupported adapters are refused before
any work.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from eager_helpers import hook_ids, model, prompt_ids

from interp_core import sync
from interp_core.adapters import read_lora_config
from interp_core.errors import CapabilityUnsupported, InterpError, InvalidArgument
from interp_core.patching import Patch
from interp_core.steering import SteeringSpec
from interp_testmodels.lora import merged_into, peft_logits, write_lora_adapter, write_peft_adapter

_FAMILIES = ("llama", "gemma")  # gemma: its embedding module scales its own output


def _embedded(m, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return m.hf_model.get_input_embeddings()(ids)


def _vector(m, seed: int = 0) -> torch.Tensor:
    return torch.randn(m.d_model, generator=torch.Generator().manual_seed(seed)) * 3.0


@pytest.mark.parametrize("family", _FAMILIES)
def test_whole_embeds_prompt_equals_hf_inputs_embeds_and_the_tokens(family: str) -> None:
    m = model(family)
    # The model is shared by the process: transformers may have hooked it already.
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    rows = _embedded(m, ids)[0]
    ours = m.run_with_cache(None, ["embeddings", "resid_post.1"], prompt_embeds=rows)
    tokens = m.run_with_cache(ids, ["embeddings", "resid_post.1"])
    with torch.no_grad():
        theirs = m.hf_model(inputs_embeds=rows[None]).logits
    assert torch.equal(ours.output.logits, theirs)
    assert torch.equal(ours.output.logits, tokens.output.logits)
    assert torch.equal(ours["resid_post.1"], tokens["resid_post.1"])
    # Random rows (no token has them): still HF's inputs_embeds forward.
    noise = torch.randn(5, m.d_model, generator=torch.Generator().manual_seed(1))
    ours = m.run_with_cache(None, [], prompt_embeds=noise)
    with torch.no_grad():
        theirs = m.hf_model(inputs_embeds=noise[None]).logits
    assert torch.equal(ours.output.logits, theirs)
    assert hook_ids(m) == hooks


@pytest.mark.parametrize("family", _FAMILIES)
def test_an_injected_row_equals_hf_on_the_spliced_embeddings(family: str) -> None:
    m = model(family)
    # The model is shared by the process: transformers may have hooked it already.
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    vector = _vector(m)
    spliced = _embedded(m, ids).clone()
    spliced[0, 2] = vector
    ours = m.run_with_cache(ids, ["embeddings"], prompt_embeds={2: vector})
    with torch.no_grad():
        theirs = m.hf_model(inputs_embeds=spliced).logits
    assert torch.equal(ours.output.logits, theirs)
    # The `embeddings` point reads the injected row, times a multiplier the trunk applies
    # outside the embedding module (Gemma's module scales itself: the rows are past it).
    inside = hasattr(m.hf_model.get_input_embeddings(), "embed_scale")
    scale = 1.0 if inside else (m.facts.embedding_multiplier or 1.0)
    assert torch.allclose(ours["embeddings"][0, 2], vector * scale, atol=1e-6)
    generation = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, prompt_embeds={2: vector})
    with torch.no_grad():
        expected = m.hf_model.generate(
            inputs_embeds=spliced,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=6,
            pad_token_id=m.tokenizer.pad_token_id,
        )
    assert list(generation.token_ids) == expected[0].tolist()[: len(generation.token_ids)]
    assert list(generation.prompt_token_ids) == ids[0].tolist()
    assert hook_ids(m) == hooks


@pytest.mark.parametrize("family", _FAMILIES)
def test_an_injected_vector_equals_a_patch_of_its_embedding_slot(family: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    vector = _vector(m, seed=3)
    injected = m.run_with_cache(ids, ["embeddings", "resid_post.1"], prompt_embeds={2: vector})
    # The `embeddings` point is past any multiplier the trunk applies outside the module.
    inside = hasattr(m.hf_model.get_input_embeddings(), "embed_scale")
    scale = 1.0 if inside else (m.facts.embedding_multiplier or 1.0)
    patch = Patch("embeddings", vector * scale, positions=[2])
    patched = m.run_with_cache(ids, ["embeddings", "resid_post.1"], steering=patch)
    # A set writes h + (v - h): v up to one float32 rounding of the row's values.
    assert torch.allclose(injected["embeddings"], patched["embeddings"], atol=1e-6, rtol=1e-6)
    assert (injected.output.logits - patched.output.logits).abs().max() < 1e-5
    assert (injected["resid_post.1"] - patched["resid_post.1"]).abs().max() < 1e-5
    plain = m.forward_logits(ids)
    assert (plain - patched.output.logits).abs().max() > 1e-2  # the slot matters
    generation = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, prompt_embeds={2: vector})
    steered = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, steering=patch)
    assert generation.token_ids == steered.token_ids


def test_generation_from_embeds_equals_generation_from_the_tokens() -> None:
    m = model("llama")
    ids = prompt_ids(m)
    from_tokens = m.generate_sync(ids, max_new_tokens=8, temperature=0.0)
    from_rows = m.generate_sync(
        None, max_new_tokens=8, temperature=0.0, prompt_embeds=_embedded(m, ids)[0]
    )
    assert from_rows.token_ids == from_tokens.token_ids
    assert list(from_rows.prompt_token_ids) == []
    sampled = [
        m.generate_sync(
            None, max_new_tokens=6, temperature=1.0, seed=5, prompt_embeds=_embedded(m, ids)[0]
        ).token_ids
        for _ in range(2)
    ]
    assert (
        sampled[0]
        == sampled[1]
        == m.generate_sync(ids, max_new_tokens=6, temperature=1.0, seed=5).token_ids
    )
    # Steering and a captured generation read the embeddings prompt as they read the tokens.
    spec = SteeringSpec("resid_post.0", _vector(m), scale=4.0)
    rows = _embedded(m, ids)[0]
    steered = m.run_with_cache(None, ["resid_post.1"], steering=spec, prompt_embeds=rows)
    plain = m.run_with_cache(ids, ["resid_post.1"], steering=spec)
    assert torch.equal(steered["resid_post.1"], plain["resid_post.1"])
    gen_rows, cache_rows = sync.capture_generation(
        m, None, ["resid_post.1"], max_new_tokens=4, prompt_embeds=rows
    )
    gen_ids, cache_ids = sync.capture_generation(m, ids, ["resid_post.1"], max_new_tokens=4)
    assert gen_rows.token_ids == gen_ids.token_ids
    assert torch.equal(cache_rows["resid_post.1"], cache_ids["resid_post.1"])


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_lora_adapter(model("llama").hf_model, tmp_path_factory.mktemp("lora") / "tiny")


def test_lora_logits_equal_hf_with_the_adapter_merged(adapter: Path) -> None:
    m = model("llama")
    # The model is shared by the process: transformers may have hooked it already.
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    plain = m.forward_logits(ids)
    ours = m.run_with_cache(ids, ["resid_post.0"], lora=str(adapter))
    with torch.no_grad():
        merged = merged_into(m.hf_model, adapter)(ids).logits
    # Merged (W + s·BA) and unmerged (Wx + s·B(Ax)) differ by float32 rounding only.
    assert (ours.output.logits - merged).abs().max() < 1e-4
    assert (plain - merged).abs().max() > 1e-2  # the adapter changes the output
    # Nothing stays on the model: the next plain call is the base model again.
    assert torch.equal(m.forward_logits(ids), plain)
    # Generation with the adapter follows the merged model greedily.
    generation = m.generate_sync(ids, max_new_tokens=6, temperature=0.0, lora=str(adapter))
    with torch.no_grad():
        expected = merged_into(m.hf_model, adapter).generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=6,
            pad_token_id=m.tokenizer.pad_token_id,
        )
    assert list(generation.token_ids) == expected[0, ids.shape[1] :].tolist()
    assert hook_ids(m) == hooks


def test_a_peft_made_adapter_equals_peft_on_hf(tmp_path: Path) -> None:
    pytest.importorskip("peft")  # the root test group installs it
    m = model("llama")
    hooks = hook_ids(m)
    folder = write_peft_adapter(m.hf_model, tmp_path / "peft")
    other = prompt_ids(m, "the dog ran in the park today and then")
    ids = torch.cat([prompt_ids(m)[:, :8], other[:, :8]])  # a batch of two different prompts
    theirs = peft_logits(m.hf_model, folder, ids)
    ours = m.run_with_cache(ids, [], lora=str(folder)).output.logits
    assert (ours - theirs).abs().max() < 1e-5
    assert (m.forward_logits(ids) - theirs).abs().max() > 1e-2  # the adapter changes the output
    assert hook_ids(m) == hooks


def test_lora_and_embeds_together_and_config(adapter: Path) -> None:
    m = model("llama")
    ids = prompt_ids(m)
    config = read_lora_config(adapter)
    assert (config.rank, config.scaling, config.name) == (4, 2.0, "tiny")
    rows = _embedded(m, ids)[0]
    both = m.run_with_cache(None, [], prompt_embeds=rows, lora=config)
    assert torch.equal(both.output.logits, m.run_with_cache(ids, [], lora=config).output.logits)


def test_malformed_embeds_and_adapters_are_refused(adapter: Path, tmp_path: Path) -> None:
    m = model("llama")
    # The model is shared by the process: transformers may have hooked it already.
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    cases = [
        (ids, torch.zeros(3, m.d_model + 1)),  # tokens and a whole prompt together
        (None, torch.zeros(3, m.d_model + 1)),  # wrong width
        (None, torch.zeros(2, 3, m.d_model)),  # a batch
        (ids, {ids.shape[1]: torch.zeros(m.d_model)}),  # position past the prompt
        (None, {0: torch.zeros(m.d_model)}),  # slots without tokens
        (None, torch.full((2, m.d_model), float("nan"))),
    ]
    for tokens, rows in cases:
        with pytest.raises(InterpError):
            m.run_with_cache(tokens, [], prompt_embeds=rows)
    with pytest.raises(CapabilityUnsupported, match="repetition_penalty"):
        m.generate_sync(
            None, max_new_tokens=2, prompt_embeds=torch.zeros(2, m.d_model), repetition_penalty=1.3
        )
    dora = tmp_path / "dora"
    dora.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        (dora / name).write_bytes((adapter / name).read_bytes())
    config = json.loads((dora / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(CapabilityUnsupported, match="DoRA"):
        m.run_with_cache(ids, [], lora=str(dora))
    with pytest.raises(InvalidArgument, match=r"adapter_config\.json"):
        m.run_with_cache(ids, [], lora=str(tmp_path / "missing"))
    assert hook_ids(m) == hooks


def test_a_stream_with_embeds_and_an_adapter_equals_generate(adapter: Path) -> None:
    m = model("llama")
    # The model is shared by the process: transformers may have hooked it already.
    hooks = hook_ids(m)
    ids = prompt_ids(m)
    rows = _embedded(m, ids)[0]
    for tokens, options in [(None, {"prompt_embeds": rows}), (ids, {"lora": str(adapter)})]:
        whole = sync.generate(m, tokens, max_new_tokens=6, temperature=0.0, **options)
        steps = list(sync.generate_stream(m, tokens, max_new_tokens=6, temperature=0.0, **options))
        assert [s.token_id for s in steps] == list(whole.token_ids)
        # Between and after the steps nothing of the call stays on the model.
        assert hook_ids(m) == hooks
