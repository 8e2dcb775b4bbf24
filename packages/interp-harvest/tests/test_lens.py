"""Fitting a Jacobian lens: `J_bar[l]` equals the mean over the corpus's tokens of the Jacobian
of the last layer's output with respect to layer l's output at the same position, computed by
hand with autograd on the HF model itself (no steering, no capture: a forward hook puts a leaf
in place of one position's residual); the written file loads through our lens loader and its
read-out equals decode(J_bar @ h) computed by hand with the model's final norm and head."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from interp_harvest import Corpus, PackingPolicy, fit_lens, pack, tokenizer_encoder, write_lens

from interp_core import load_model, sync
from interp_core.errors import GradientsUnsupported
from interp_core.readouts import LensSpec

CONTEXT, CONTEXTS = 8, 3


@pytest.fixture(scope="module")
def grad_model(model_path: str) -> Any:
    return load_model(model_path, backend="eager", requires_grad=True)


def _output(value: Any) -> torch.Tensor:
    return value[0] if isinstance(value, tuple) else value


def _jacobian_by_hand(model: Any, ids: list[int], layer: int, position: int) -> torch.Tensor:
    """d(last layer's output at `position`) / d(layer `layer`'s output at `position`)."""
    layers = model.hf_model.model.layers
    tokens = torch.tensor([ids])
    kept: dict[str, torch.Tensor] = {}

    def record(_module: Any, _args: Any, output: Any) -> None:
        kept["h"] = _output(output).detach()[0, position].clone()

    handle = layers[layer].register_forward_hook(record)
    with torch.no_grad():
        model.hf_model(tokens)
    handle.remove()

    def final_given(x: torch.Tensor) -> torch.Tensor:
        def replace(_module: Any, _args: Any, output: Any) -> Any:
            hidden = _output(output)
            mask = torch.zeros_like(hidden)
            mask[0, position] = 1
            hidden = hidden * (1 - mask) + mask * x
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

        def read(_module: Any, _args: Any, output: Any) -> None:
            kept["final"] = _output(output)[0, position]

        handles = [layers[layer].register_forward_hook(replace)]
        handles.append(layers[-1].register_forward_hook(read))
        try:
            model.hf_model(tokens)
        finally:
            for h in handles:
                h.remove()
        return kept["final"]

    return torch.autograd.functional.jacobian(final_given, kept["h"])


@pytest.mark.slow
def test_the_fitted_lens_is_the_mean_per_token_jacobian_and_reads_out_as_decode_of_j_h(
    grad_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    fitted = fit_lens(
        grad_model, corpus_file, tokens=CONTEXTS * CONTEXT + 3, context_size=CONTEXT, batch_size=2
    )
    assert fitted.count == CONTEXTS * CONTEXT and sorted(fitted.sums) == [0, 1]
    policy = PackingPolicy(CONTEXT, "context", grad_model.tokenizer.bos_token_id)
    encode = tokenizer_encoder(grad_model.tokenizer)
    contexts = [c.tokens for c in pack(Corpus(corpus_file), encode, policy, max_contexts=CONTEXTS)]
    d = grad_model.d_model
    for layer in (0, 1):
        by_hand = torch.zeros(d, d, dtype=torch.float64)
        for ids in contexts:
            for position in range(CONTEXT):
                by_hand += _jacobian_by_hand(grad_model, list(ids), layer, position).double()
        by_hand /= CONTEXTS * CONTEXT
        got = fitted.jacobians[layer]
        assert float((got.double() - by_hand).abs().max()) <= 1e-5
        if layer == 1:  # the last layer's own output: the identity
            assert torch.equal(got, torch.eye(d))
        else:
            assert float((by_hand - torch.eye(d, dtype=torch.float64)).abs().max()) > 0.1

    path = write_lens(fitted, tmp_path / "lens.pt")
    stored = torch.load(path, weights_only=True)
    assert set(stored) == {"J"} and sorted(stored["J"]) == [0, 1]
    assert stored["J"][0].dtype == torch.float32
    sync.set_lens_jacobians(grad_model, str(path), name="fitted")
    try:
        ids = torch.tensor([contexts[0]])
        lens = sync.logit_lens(
            grad_model, ids, LensSpec([0], jacobian=True, jacobian_set="fitted"), top_k=3
        )
        with torch.no_grad():
            h = sync.capture(grad_model, ids, ["resid_post.0"])["resid_post.0"][0]
            moved = h @ stored["J"][0].T
            hf = grad_model.hf_model
            probs = torch.softmax(hf.lm_head(hf.model.norm(moved)).float(), dim=-1)
        top = probs.topk(3, dim=-1)
        for position, row in enumerate(lens.predictions[0]):
            assert [p.token_id for p in row] == top.indices[position].tolist()
            want = top.values[position].tolist()
            assert [p.prob for p in row] == pytest.approx(want, abs=1e-5)
    finally:
        sync.set_lens_jacobians(grad_model, None, name="fitted")


def test_bos_positions_can_be_left_out_and_backends_without_graphs_are_refused(
    grad_model: Any, eager_model: Any, corpus_file: Path
) -> None:
    fitted = fit_lens(
        grad_model, corpus_file, tokens=CONTEXT, context_size=CONTEXT, layers=[0], exclude_bos=True
    )
    policy = PackingPolicy(CONTEXT, "context", grad_model.tokenizer.bos_token_id)
    encode = tokenizer_encoder(grad_model.tokenizer)
    first = next(pack(Corpus(corpus_file), encode, policy)).tokens
    kept = [p for p, t in enumerate(first) if t != grad_model.tokenizer.bos_token_id]
    assert 0 < len(kept) < CONTEXT and fitted.count == len(kept)
    by_hand = sum(_jacobian_by_hand(grad_model, list(first), 0, p).double() for p in kept)
    assert float((fitted.jacobians[0].double() - by_hand / len(kept)).abs().max()) <= 1e-5
    with pytest.raises(GradientsUnsupported, match="requires_grad=True"):
        fit_lens(eager_model, corpus_file, tokens=CONTEXT, context_size=CONTEXT)


def test_the_cli_writes_the_lens_the_api_fits(
    model_path: str,
    grad_model: Any,
    corpus_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from interp_core.cli import main

    out = tmp_path / "lens.pt"
    args = ["harvest", "lens", model_path, "--data", str(corpus_file), "--tokens", "8"]
    args += ["--context-size", "8", "--layers", "0", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    assert f"J_bar for layers 0 over 8 tokens written to {out}" in capsys.readouterr().out
    stored = torch.load(out, weights_only=True)["J"]
    fitted = fit_lens(grad_model, corpus_file, tokens=8, context_size=8, layers=[0])
    assert sorted(stored) == [0]
    assert float((stored[0] - fitted.jacobians[0]).abs().max()) <= 1e-6
