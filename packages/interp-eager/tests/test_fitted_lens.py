"""Fitted lenses, weight rows, residual decoding and probes on eager, by hand.

A fitted lens's read-out is `decode(J_bar @ h)`: the layer's residual through its matrix, then the
model's own final norm, unembedding, multiplier and softcap. The three file layouts load to the
same set; a lens for another model, a file that would run code and a layer the set lacks are
refused before any forward pass runs.
"""

from __future__ import annotations

import pickle

import pytest
import torch
from eager_helpers import model, prompt_ids

from interp_core import sync
from interp_core.address import Address
from interp_core.errors import InvalidArgument
from interp_core.readouts import DirectionSet, LensSpec, TopTokens
from interp_torch.lens import read_lens, save_lens


def _lens(d: int, layers: tuple[int, ...], seed: int = 0) -> dict[int, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {layer: torch.eye(d) + 0.3 * torch.randn(d, d, generator=generator) for layer in layers}


def _forwards(m: object) -> tuple[list[int], object]:
    count = [0]
    hook = m.hf_model.register_forward_pre_hook(lambda *_: count.__setitem__(0, count[0] + 1))  # type: ignore[attr-defined]
    return count, hook


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
def test_the_fitted_lens_is_decode_of_j_bar_h(family: str) -> None:
    m = model(family)
    lens = _lens(m.d_model, (0, m.n_layers - 1))
    assert sync.set_lens_jacobians(m, lens, name="hand") == 2 * m.d_model**2 * 4
    ids = prompt_ids(m)
    layers = [0, m.n_layers - 1]
    result = sync.logit_lens(m, ids, LensSpec(layers, jacobian=True, jacobian_set="hand"), top_k=4)
    plain = sync.logit_lens(m, ids, layers, top_k=4)
    cache = m.run_with_cache(ids, [Address("resid_post", layer) for layer in layers])
    tree = m.tree
    for index, layer in enumerate(layers):
        h = cache[Address("resid_post", layer)][0]
        with torch.no_grad():
            logits = tree.lm_head(tree.final_norm(h @ lens[layer].T))
        if m.facts.final_logit_softcap:
            cap = m.facts.final_logit_softcap
            logits = torch.tanh(logits / cap) * cap
        torch.testing.assert_close(result.logits[index], logits, atol=1e-5, rtol=1e-5)
        probs = torch.softmax(logits, dim=-1).topk(4)
        for position, row in enumerate(result.predictions[layer]):
            assert [p.token_id for p in row] == probs.indices[position].tolist()
            got = torch.tensor([p.prob for p in row])
            torch.testing.assert_close(got, probs.values[position], atol=1e-6, rtol=0)
        assert result.logits[index].sub(plain.logits[index]).abs().max() > 1e-2  # J_bar was used
    sync.set_lens_jacobians(m, None, name="hand")


def test_the_three_file_layouts_load_to_the_same_set(tmp_path) -> None:
    m = model("llama")
    lens = _lens(m.d_model, (0, 1), seed=3)
    torch.save({"J": lens, "meta": {"fitter": "jlens"}}, tmp_path / "j.pt")
    torch.save(
        {"parameters": {"jacobians": {str(k): v for k, v in lens.items()}}}, tmp_path / "jpp.pt"
    )
    save_lens(tmp_path / "ours.safetensors", lens, m.facts, model="tiny-llama")
    ids = prompt_ids(m)
    spec = LensSpec([0, 1], jacobian=True, jacobian_set="file")
    readouts = []
    for name in ("j.pt", "jpp.pt", "ours.safetensors"):
        assert sync.set_lens_jacobians(m, str(tmp_path / name), name="file") == 2 * m.d_model**2 * 4
        assert m.lens_sets()["file"] == [0, 1]
        readouts.append(sync.logit_lens(m, ids, spec, top_k=3).logits)
    sync.set_lens_jacobians(m, lens, name="file")
    readouts.append(sync.logit_lens(m, ids, spec, top_k=3).logits)
    for other in readouts[1:]:
        assert torch.equal(readouts[0], other)
    sync.set_lens_jacobians(m, None, name="file")


def test_a_lens_for_another_model_is_refused_before_a_step(tmp_path) -> None:
    m = model("llama")
    count, hook = _forwards(m)
    d, n = m.d_model, m.n_layers
    with pytest.raises(InvalidArgument, match=rf"\[{d + 8}, {d + 8}\].*{n} layers, d_model {d}"):
        sync.set_lens_jacobians(m, {0: torch.eye(d + 8)})
    with pytest.raises(InvalidArgument, match=f"layer {n}"):
        sync.set_lens_jacobians(m, {n: torch.eye(d)})
    wider = type("Facts", (), {"n_layers": n, "d_model": d + 8, "architecture": "wider"})()
    save_lens(tmp_path / "wider.safetensors", {0: torch.eye(d + 8)}, wider)
    with pytest.raises(InvalidArgument, match=f"d_model {d + 8}, not for this"):
        sync.set_lens_jacobians(m, str(tmp_path / "wider.safetensors"))
    sync.set_lens_jacobians(m, {0: torch.eye(d)}, name="one")
    with pytest.raises(InvalidArgument, match=r"no J_bar for layers \[1\]"):
        sync.logit_lens(m, prompt_ids(m), LensSpec([0, 1], jacobian=True, jacobian_set="one"))
    with pytest.raises(InvalidArgument, match="no lens set 'two'"):
        sync.logit_lens(m, prompt_ids(m), LensSpec([0], jacobian=True, jacobian_set="two"))
    hook.remove()  # type: ignore[attr-defined]
    assert count[0] == 0
    assert "x" not in m.lens_sets() and m.lens_sets()["one"] == [0]
    sync.set_lens_jacobians(m, None, name="one")


class _Payload:
    def __reduce__(self) -> tuple:
        return (print, ("a lens file ran code",))


def test_a_lens_file_that_would_run_code_is_refused(tmp_path) -> None:
    m = model("llama")
    with open(tmp_path / "evil.pt", "wb") as handle:
        pickle.dump({"J": {0: _Payload()}}, handle)
    with pytest.raises(InvalidArgument, match="no pickled code"):
        read_lens(str(tmp_path / "evil.pt"), m.facts)
    with pytest.raises(InvalidArgument, match="layout"):
        read_lens({"weights": {0: torch.eye(m.d_model)}}, m.facts)


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_weight_rows_decode_and_project_by_hand(family: str) -> None:
    m = model(family)
    ids = [3, 0, m.facts.vocab_size - 1, 3]
    head, embed = m.hf_model.get_output_embeddings(), m.hf_model.get_input_embeddings()
    assert torch.equal(sync.unembed_rows(m, ids), head.weight[ids])
    assert torch.equal(sync.embed_rows(m, ids), embed.weight[ids])
    with pytest.raises(InvalidArgument, match="not a token id"):
        sync.embed_rows(m, [m.facts.vocab_size])
    torch.manual_seed(5)
    residuals = torch.randn(2, 3, m.d_model)
    logits = sync.decode_residuals(m, residuals)
    with torch.no_grad():
        want = m.tree.lm_head(m.tree.final_norm(residuals))
    if m.facts.final_logit_softcap:
        want = torch.tanh(want / m.facts.final_logit_softcap) * m.facts.final_logit_softcap
    torch.testing.assert_close(logits, want)
    top = sync.decode_residuals(m, residuals, top_k=5)
    assert isinstance(top, TopTokens) and top.ids.shape == (2, 3, 5)
    best = torch.softmax(want, dim=-1).topk(5)
    assert torch.equal(top.ids, best.indices)
    torch.testing.assert_close(top.probs, best.values)
    tokens = prompt_ids(m).repeat(2, 1)
    tokens[1, 2] = 7
    vectors, bias = torch.randn(6, m.d_model), torch.randn(6)
    point = Address("resid_post", 0)
    plain, probe = sync.project(
        m, tokens, [DirectionSet(point, vectors), DirectionSet(point, vectors, bias, "relu")]
    )
    rows = m.run_with_cache(tokens, [point])[point]
    torch.testing.assert_close(plain, rows @ vectors.T)
    torch.testing.assert_close(probe, (rows @ vectors.T + bias).clamp_min(0))
    assert not torch.equal(plain[0], plain[1])  # the batch's rows are its own


def test_direction_sets_are_checked() -> None:
    m = model("llama")
    with pytest.raises(InvalidArgument, match="nonlinearity"):
        DirectionSet("resid_post.0", torch.randn(2, m.d_model), nonlinearity="gelu")
    with pytest.raises(InvalidArgument, match=r"bias must be \[2\]"):
        DirectionSet("resid_post.0", torch.randn(2, m.d_model), torch.randn(3))
    with pytest.raises(InvalidArgument, match="wide"):
        sync.project(m, prompt_ids(m), [DirectionSet("resid_post.0", torch.randn(2, 5))])
