"""Is every point the eager backend serves the tensor its registry definition names?

For each tiny family, one `run_with_cache` call captures every served point at every layer, and
one plain HF forward with hooks on hand-named modules (`interp_validator.references.hf_hooks`,
the validator's "hf" engine) produces the same points independently. They must agree bit for bit
(torch.equal): the reference repeats each operation in the model's own order, so no point
comparison needs a tolerance. The file's three
tolerances belong to identities that hold only up to rounding (a parallel block's sum taken in
another order than the model's, attention rows summing to one) or up to a documented epsilon
(Sinkhorn's), and each states its bound where it is used. On top of that, the
captured tensors must satisfy the architecture's own identities: the residual stream adds up,
attention probabilities mix the values into z, the down projection of the neurons is the MLP
output, the softmax of the scores is the probabilities, and capturing leaves the logits
bit-identical to a plain forward.

The prompt is the 13-token test prompt (BOS + 12), batched with a second row holding the same
tokens reversed, so sliding windows of 4-6 tokens mask something and batch-major reshapes are
tested on two different rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import eager_helpers
import pytest
import torch

from interp_core import Address, load_model, run_with_cache
from interp_core.points import stream_coordinate_names
from interp_testmodels.families import FAMILY_NAMES
from interp_testmodels.tokenizer import TEST_PROMPT
from interp_validator.references.hf_hooks import (
    LAYOUTS,
    Reference,
    attention_chunk,
    reference_points,
    sliding_window,
)

# transformers' GPT-BigCode module calls torch.jit.script at import, which torch now deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)

# Families whose attention appends a learned sink logit to each row before the softmax.
SINK_FAMILIES = ("gpt_oss", "deepseek_v4")


@dataclass
class Run:
    family: str
    model: Any
    ids: torch.Tensor
    addresses: list[Address]
    captured: dict[Address, torch.Tensor]
    capture_logits: torch.Tensor
    plain_logits: torch.Tensor
    ref: Reference

    @property
    def hf(self) -> Any:
        return self.model.hf_model

    def get(self, name: str, layer: int | None = None, stream: int | None = None) -> torch.Tensor:
        return self.captured[Address(name, layer, stream) if layer is not None else Address(name)]

    def has(self, name: str, layer: int) -> bool:
        return Address(name, layer) in self.captured

    def ref_mlp(self, layer: int) -> Any:
        block = self.hf.get_submodule(LAYOUTS[self.family].blocks)[layer]
        mlp = LAYOUTS[self.family].mlp
        return block.get_submodule(mlp) if mlp else block


def served_addresses(model: Any) -> list[Address]:
    """Every address the model says it serves, with stream coordinates on multi-stream trunks."""
    facts = model.facts
    streamed = set(stream_coordinate_names())
    addresses: list[Address] = []
    for spec in model.points():
        layers: list[int | None] = [None] if spec.is_trunk else list(range(facts.n_layers))
        for layer in layers:
            address = Address(spec.name) if layer is None else Address(spec.name, layer)
            if model.supports(address):
                addresses.append(address)
            elif spec.name in streamed and facts.n_streams > 1:
                for k in range(facts.n_streams):
                    with_stream = Address(spec.name, layer, k)
                    if model.supports(with_stream):
                        addresses.append(with_stream)
    return addresses


def _prompt(model: Any) -> torch.Tensor:
    row = model.to_tokens(TEST_PROMPT)[0]
    reversed_row = torch.cat([row[:1], row[1:].flip(0)])
    return torch.stack([row, reversed_row])


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    """Each family is loaded, captured and referenced once per module, on first use."""
    return {}


def _run(runs: dict[str, Run], family: str) -> Run:
    if family not in runs:
        model = eager_helpers.model(family)  # shared with the other eager tests
        ids = _prompt(model)
        assert 12 <= ids.shape[1] <= 16
        addresses = served_addresses(model)
        cache = run_with_cache(model, ids, addresses)
        captured = {address: cache[address] for address in addresses}
        with torch.no_grad():
            plain = model.hf_model(ids).logits
        ref = reference_points(model.hf_model, family, ids)
        runs[family] = Run(family, model, ids, addresses, captured, cache.output.logits, plain, ref)
    return runs[family]


def _is_masked(scores: torch.Tensor) -> torch.Tensor:
    return scores <= torch.finfo(scores.dtype).min / 2


def _visible(seq: int, window: int | None, chunk: int | None = None) -> torch.Tensor:
    query = torch.arange(seq)[:, None]
    key = torch.arange(seq)[None, :]
    visible = key <= query
    if window is not None:
        visible &= query - key < window
    if chunk is not None:
        # Chunked attention (Llama-4): a query sees only the keys of its own chunk.
        visible &= query // chunk == key // chunk
    return visible


def _mismatch(ours: torch.Tensor, theirs: torch.Tensor) -> str | None:
    """None when bit-identical, else what differs."""
    if ours.shape != theirs.shape:
        return f"shape {tuple(ours.shape)} != reference {tuple(theirs.shape)}"
    if ours.dtype != theirs.dtype:
        return f"dtype {ours.dtype} != reference {theirs.dtype}"
    if torch.equal(ours, theirs):
        return None
    diff = (ours.double() - theirs.double()).abs().max().item()
    return f"not bit-identical (max |diff| {diff:.3g})"


def _scores_mismatch(ours: torch.Tensor, theirs: torch.Tensor) -> str | None:
    # Masked entries hold the fill value; where they sit must agree, and every other entry.
    if ours.shape != theirs.shape:
        return f"shape {tuple(ours.shape)} != reference {tuple(theirs.shape)}"
    masked = _is_masked(theirs)
    if not torch.equal(_is_masked(ours), masked):
        return "masked entries differ from the reference mask"
    return _mismatch(ours[~masked], theirs[~masked])


# --- 1. every served point equals the independent reference ----------------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_served_point_matches_reference(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    problems = []
    for address in run.addresses:
        if address not in run.ref.points:
            problems.append(f"{address}: served, but the reference cannot name it")
            continue
        ours, theirs = run.captured[address], run.ref.points[address]
        if address.name == "attn_scores":
            problem = _scores_mismatch(ours, theirs)
        else:
            problem = _mismatch(ours, theirs)
        if problem:
            problems.append(f"{address}: {problem}")
    assert not problems, f"{family}: " + "\n".join(problems)


@pytest.mark.parametrize("family", SINK_FAMILIES)
def test_sink_family_scores_match_reference(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    for layer in sorted(run.ref.attention_layers):
        address = Address("attn_scores", layer)
        problem = _scores_mismatch(run.captured[address], run.ref.points[address])
        assert problem is None, f"{family} {address}: {problem}"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_reference_covers_what_the_backend_serves(runs: dict[str, Run], family: str) -> None:
    """Every point the reference can name at a layer is served there (nothing refused wrongly)."""
    run = _run(runs, family)
    unserved = sorted(str(a) for a in run.ref.points if a not in set(run.addresses))
    assert not unserved, f"{family} refuses points its modules plainly have: {unserved}"


# --- 2. capture leaves the forward pass untouched -------------------------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_capture_leaves_logits_bit_identical(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    assert torch.equal(run.capture_logits, run.plain_logits)
    assert run.ref.logits is not None
    assert torch.equal(run.capture_logits, run.ref.logits)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_logits_are_the_family_post_processing_of_lm_head(
    runs: dict[str, Run], family: str
) -> None:
    """lm_head is the raw unembedding; the model's logits apply its own multiplier or softcap."""
    run = _run(runs, family)
    config = run.hf.config
    raw = run.get("lm_head")
    expected = raw
    if getattr(config, "logit_scale", None) is not None:  # Cohere
        expected = raw * config.logit_scale
    if getattr(config, "logits_scaling", None) is not None:  # Granite
        expected = raw / config.logits_scaling
    if getattr(config, "lm_head_multiplier", None) is not None:  # Falcon-H1
        expected = raw * config.lm_head_multiplier
    cap = getattr(config, "final_logit_softcapping", None)
    if cap is not None:  # Gemma-2
        expected = torch.tanh(raw / cap) * cap
    assert torch.equal(run.capture_logits, expected)
    if expected is not raw:
        assert not torch.equal(raw, expected), "the post-processing should change something"


# --- 3. the residual stream adds up ----------------------------------------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_residual_stream_adds_up(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    layout = LAYOUTS[family]
    # A layout with its own residual arithmetic is checked by its rule (the first that applies).
    own_rules = (
        (layout.streams, _check_stream_residual),
        (layout.altup, _check_altup_block),
        (layout.normed_skip, _check_normed_skip),
        (layout.single_block, _check_single_sublayer),
    )
    own = next((check for applies, check in own_rules if applies), None)
    for layer in range(run.model.n_layers):
        if own is not None:
            own(run, layer)
            continue
        pre = run.get("resid_pre", layer)
        mlp = run.get("mlp_out_post", layer)
        post = run.get("resid_post", layer)
        if layer > 0:
            assert torch.equal(pre, run.get("resid_post", layer - 1))
        if layout.ssm_beside is not None:
            _check_ssm_beside_attention(run, layer)
            assert torch.equal(run.get("resid_mid", layer) + mlp, post), f"{family} {layer}"
            continue
        if run.model.facts.per_layer_input_width:
            assert torch.equal(pre + run.get("attn_out_post", layer), run.get("resid_mid", layer))
            _check_per_layer_input(run, layer)
            continue
        attn = run.get("attn_out_post", layer)
        if layout.parallel is None:
            # Sequential: each sublayer's write is added to the residual on its own.
            mid = run.get("resid_mid", layer)
            assert torch.equal(pre + attn, mid), f"{family} layer {layer}: pre + attn != mid"
            assert torch.equal(mid + mlp, post), f"{family} layer {layer}: mid + mlp != post"
            continue
        terms = {"resid": pre, "attn": attn, "mlp": mlp}
        first, second, third = (terms[t] for t in layout.parallel)
        # In the block's own summation order the sum is bit-exact...
        assert torch.equal(first + second + third, post), f"{family} layer {layer}"
        # ...and in the canonical order (resid + attn + mlp) only by the rounding of the
        # re-association: each order rounds twice, each time by at most 2^-24 of a partial sum
        # below 3·max|term|, so the two differ by at most 12·2^-24·max|term| < 1e-6·max|term|
        # (measured: at most 9.5e-7 with terms up to 7.9).
        bound = 1e-6 * max(t.abs().max().item() for t in terms.values())
        diff = (pre + attn + mlp - post).abs().max().item()
        assert diff <= bound, f"{family} layer {layer}: {diff:.3g} > {bound:.3g}"


def _check_single_sublayer(run: Run, layer: int) -> None:
    """Nemotron-H: resid_pre + the layer's one write = resid_post, and the other sublayer's
    points (and resid_mid) are refused."""
    pre, post = run.get("resid_pre", layer), run.get("resid_post", layer)
    if layer > 0:
        assert torch.equal(pre, run.get("resid_post", layer - 1))
    mixer = run.model.facts.has_mixer(layer)
    own, other = ("attn", "mlp") if mixer else ("mlp", "attn")
    block = run.hf.get_submodule(LAYOUTS[run.family].blocks)[layer]
    with torch.no_grad():
        assert torch.equal(block.norm(pre), run.get(f"{own}_in", layer)), f"layer {layer}: norm"
    assert torch.equal(pre + run.get(f"{own}_out_post", layer), post), f"layer {layer}: write"
    assert torch.equal(run.get(f"{own}_out", layer), run.get(f"{own}_out_post", layer))
    for name in (f"{other}_in", f"{other}_out", f"{other}_out_post", "resid_mid"):
        assert not run.has(name, layer), f"{name} served on single-sublayer layer {layer}"


def _check_altup_block(run: Run, layer: int) -> None:
    """Gemma-3n: the captured points chain through the block's own AltUp/LAuReL steps.

    attn_in is the input norm of the active stream's prediction from resid_pre; mlp_in is the
    pre-MLP norm of (prediction + normed attn_out + LAuReL(attn_in)) / sqrt(2); the corrected
    active stream (which gets no per-layer input) is resid_post there.
    """
    facts = run.model.facts
    n, active = facts.n_streams, facts.altup_active_stream
    block = run.hf.model.layers[layer]
    pre = torch.stack([run.get("resid_pre", layer, k) for k in range(n)])
    post = torch.stack([run.get("resid_post", layer, k) for k in range(n)])
    assert torch.equal(post.permute(1, 2, 0, 3), run.get("resid_streams", layer))
    if layer > 0:
        assert torch.equal(
            pre, torch.stack([run.get("resid_post", layer - 1, k) for k in range(n)])
        )
    with torch.no_grad():
        predictions = block.altup.predict(pre)
        attn_in = block.input_layernorm(predictions[active])
        assert torch.equal(attn_in, run.get("attn_in", layer)), f"gemma3n {layer}: attn_in"
        attn = block.post_attention_layernorm(run.get("attn_out", layer))
        mid = (predictions[active] + attn + block.laurel(attn_in)) / (2.0**0.5)
        mlp_in = block.pre_feedforward_layernorm(mid)
        assert torch.equal(mlp_in, run.get("mlp_in", layer)), f"gemma3n {layer}: mlp_in"
        activated = mid + block.post_feedforward_layernorm(run.get("mlp_out", layer))
        corrected = block.altup.correct(predictions, activated)
    assert torch.equal(corrected[active], post[active]), f"gemma3n {layer}: corrected stream"
    # The other streams add the gated per-layer input on top: they must differ.
    assert not torch.equal(corrected[active - 1], post[active - 1])


def _check_normed_skip(run: Run, layer: int) -> None:
    """MiniMax: each sublayer leaves alpha * (its normed input) + beta * (its output)."""
    config = run.hf.config
    kind = "linear" if config.layer_types[layer] == "linear_attention" else "full"
    attn_alpha = getattr(config, f"{kind}_attn_alpha_factor")
    attn_beta = getattr(config, f"{kind}_attn_beta_factor")
    block = run.hf.get_submodule(LAYOUTS[run.family].blocks)[layer]
    attn_in, attn_out = run.get("attn_in", layer), run.get("attn_out", layer)
    mlp_in, mlp_out = run.get("mlp_in", layer), run.get("mlp_out", layer)
    if layer > 0:
        assert torch.equal(run.get("resid_pre", layer), run.get("resid_post", layer - 1))
    with torch.no_grad():
        assert torch.equal(block.input_layernorm(run.get("resid_pre", layer)), attn_in)
        mid = attn_in * attn_alpha + attn_out * attn_beta
        assert torch.equal(block.post_attention_layernorm(mid), mlp_in), f"layer {layer}: mid"
    post = mlp_in * config.mlp_alpha_factor + mlp_out * config.mlp_beta_factor
    assert torch.equal(post, run.get("resid_post", layer)), f"layer {layer}: post"
    # Distinct factors, so the check above would fail with the plain residual sum.
    assert not torch.equal(mlp_in + mlp_out, run.get("resid_post", layer))


def _check_per_layer_input(run: Run, layer: int) -> None:
    """Gemma-4: resid_post = (resid_mid + mlp_out_post + per-layer-input write) × layer_scalar.

    The per-layer input's write (the block's post_per_layer_input_norm output) is no point, so
    it is read raw (path.); the block's learned scalar then scales the whole residual, which is
    why resid_mid + mlp_out_post alone is not resid_post.
    """
    path = Address.parse(f"path.model.layers.{layer}.post_per_layer_input_norm")
    write = run_with_cache(run.model, run.ids, [path])[path]
    scalar = run.hf.model.layers[layer].layer_scalar
    mid, mlp = run.get("resid_mid", layer), run.get("mlp_out_post", layer)
    post = run.get("resid_post", layer)
    assert torch.equal(((mid + mlp) + write) * scalar, post), f"layer {layer}"
    assert not torch.equal(mid + mlp, post), "the per-layer input and scalar change the sum"


def _check_ssm_beside_attention(run: Run, layer: int) -> None:
    """Falcon-H1: resid_mid = resid_pre + (mamba × ssm_out + attn_out × attention_out), in the
    block's order, with the Mamba-2 output read raw (path.) since no point holds it."""
    config = run.hf.config
    path = Address.parse(f"path.model.layers.{layer}.mamba")
    mamba = run_with_cache(run.model, run.ids, [path])[path]
    write = mamba * config.ssm_out_multiplier + (
        run.get("attn_out", layer) * config.attention_out_multiplier
    )
    assert torch.equal(run.get("resid_pre", layer) + write, run.get("resid_mid", layer))
    assert not run.has("attn_out_post", layer)
    # The attention reads the normed resid_pre times attention_in_multiplier.
    norm = run.hf.model.layers[layer].input_layernorm
    with torch.no_grad():
        expected_in = norm(run.get("resid_pre", layer)) * config.attention_in_multiplier
    assert torch.equal(run.get("attn_in", layer), expected_in)


def _check_stream_residual(run: Run, layer: int) -> None:
    """mHC: each site writes `write ⊗ out` and recombines the streams with `mixᵀ`."""
    pre = run.get("resid_streams", layer - 1) if layer > 0 else None
    n = run.model.facts.n_streams
    streams_pre = torch.stack([run.get("resid_pre", layer, k) for k in range(n)], dim=2)
    streams_mid = torch.stack([run.get("resid_mid", layer, k) for k in range(n)], dim=2)
    streams_post = torch.stack([run.get("resid_post", layer, k) for k in range(n)], dim=2)
    if pre is not None:
        assert torch.equal(streams_pre, pre)
    assert torch.equal(streams_post, run.get("resid_streams", layer))
    dtype = streams_pre.dtype
    for site, before, after in (
        ("attn", streams_pre, streams_mid),
        ("mlp", streams_mid, streams_post),
    ):
        write = run.get(f"{site}_stream_write", layer)
        mix = run.get(f"{site}_stream_mix", layer)
        out = run.get(f"{site}_out", layer)
        expected = write.to(dtype).unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(
            mix.to(dtype).transpose(-1, -2), before
        )
        assert torch.equal(expected, after), f"layer {layer}: the {site} site does not add up"


# --- 4. attention --------------------------------------------------------------------------------
# Families with no fixed attention heads (JetMoE's routed attention experts): no attn_scores,
# attn_probs or z to check.
_ROUTED_HEADS = {"jetmoe"}


@pytest.mark.parametrize("family", [f for f in FAMILY_NAMES if f not in _ROUTED_HEADS])
def test_softmax_of_scores_is_probs(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    seq = run.ids.shape[1]
    checked = 0
    for layer in sorted(run.ref.attention_layers):
        scores = run.get("attn_scores", layer)
        probs = run.get("attn_probs", layer)
        window = sliding_window(run.hf.config, layer)
        chunk = attention_chunk(run.hf.config, layer)
        visible = _visible(seq, window, chunk)
        top_k = run.model.facts.index_topk
        if top_k is not None:
            # DeepSeek-V3.2's indexer keeps, of each query's visible keys, its top_k best.
            kept = ~_is_masked(scores)
            assert not bool((kept & ~visible).any()), f"{family} layer {layer}: a future key"
            expected = visible.sum(-1).clamp(max=top_k).expand(kept.shape[:-1])
            assert torch.equal(kept.sum(-1), expected), f"{family} layer {layer}: not top-{top_k}"
            assert top_k < seq, "the test prompt must be longer than the indexer's top-k"
        else:
            assert torch.equal(~_is_masked(scores), visible.expand_as(scores)), (
                f"{family} layer {layer}: the masked entries are not the causal"
                + (f" window-{window}" if window else "")
                + (f" chunk-{chunk}" if chunk else "")
                + " mask"
            )
        sinks = run.ref.sinks.get(layer)
        if sinks is None:
            assert torch.equal(torch.softmax(scores, dim=-1), probs), f"{family} layer {layer}"
            # Rows sum to one up to float32 rounding of a sum of at most 16 terms (< 1e-6).
            rows = probs.sum(-1)
            torch.testing.assert_close(rows, torch.ones_like(rows), atol=1e-6, rtol=0)
        else:
            # The sink takes part in the softmax as one more column, then is dropped.
            sink_column = sinks.view(1, -1, 1, 1).expand(*scores.shape[:3], 1)
            with_sink = torch.softmax(torch.cat([scores, sink_column], dim=-1), dim=-1)
            problem = _mismatch(probs, with_sink[..., :-1])
            assert problem is None, f"{family} layer {layer}: {problem}"
            assert bool((probs.sum(-1) < 1).all()), "rows with a sink sum to less than one"
        checked += 1
    assert checked == len(run.ref.attention_layers) > 0


# Families where z is not the probability-weighted sum of per-head values: MLA decompresses
# values from a latent (no `value` point), DeepSeek-V4 reads one head as key and value and
# un-rotates the output, DBRX clamps the values after the fused projection (no value point).
_NO_VALUE_MIXING = {
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_v4",
    "kimi_linear",
    "dbrx",
    *_ROUTED_HEADS,
}


@pytest.mark.parametrize("family", sorted(set(FAMILY_NAMES) - _NO_VALUE_MIXING))
def test_probs_mix_values_into_z(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    facts = run.model.facts
    heads = facts.n_heads
    for layer in sorted(run.ref.attention_layers):
        kv_heads, dim = facts.kv_heads_at(layer), facts.head_dim_at(layer)
        probs = run.get("attn_probs", layer)
        # A KV-sharing layer (Gemma-3n, Gemma-4) mixes the values of the layer it takes them from.
        value = run.get("value", facts.kv_source(layer))
        batch, seq, _ = value.shape
        assert value.shape[-1] == kv_heads * dim, "value is n_kv_heads*head_dim, unrepeated"
        per_head = value.view(batch, seq, kv_heads, dim).transpose(1, 2)
        if kv_heads != heads:
            # Grouped-query: query head h reads K/V head h // (heads / kv_heads).
            per_head = per_head[:, :, None].expand(batch, kv_heads, heads // kv_heads, seq, dim)
            per_head = per_head.reshape(batch, heads, seq, dim)
        mixed = torch.matmul(probs, per_head).transpose(1, 2).reshape(batch, seq, heads * dim)
        if run.has("attn_gate", layer):
            mixed = mixed * torch.sigmoid(run.get("attn_gate", layer))
        problem = _mismatch(run.get("z", layer), mixed)
        assert problem is None, f"{family} layer {layer}: probs @ value vs z: {problem}"


def test_compressed_layers_mix_window_and_entries_into_z(runs: dict[str, Run]) -> None:
    """DeepSeek-V4's CSA and HCA layers: z keeps its meaning over a longer key axis.

    attn_scores and attn_probs are refused there (their keys are the window's tokens followed by
    compressed entries), but z is served: it must be the model's own probabilities over those
    keys times the keys themselves (K = V), un-rotated at the query position as the model does.
    """
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as v4

    run = _run(runs, "deepseek_v4")
    config = run.hf.config
    batch, seq = run.ids.shape
    kinds = {config.layer_types[layer] for layer in run.ref.compressed_layers}
    assert kinds == {"compressed_sparse_attention", "heavily_compressed_attention"}
    positions = torch.arange(seq)[None].expand(batch, -1)
    for layer, (probs, kv) in sorted(run.ref.compressed_layers.items()):
        assert not run.has("attn_probs", layer) and not run.has("attn_scores", layer)
        kind = config.layer_types[layer]
        rate = config.compress_rates[kind]
        entries = seq // rate
        assert probs.shape[-1] == kv.shape[-2] == seq + entries, f"layer {layer}: the key axis"
        # The token keys: the causal window; the entries: entry w once its window has closed.
        tokens, compressed = probs[..., :seq], probs[..., seq:]
        window = _visible(seq, config.sliding_window).expand_as(tokens)
        assert torch.equal(tokens != 0, window), f"layer {layer}: token keys outside the window"
        closed = torch.arange(entries)[None, :] < (torch.arange(seq)[:, None] + 1) // rate
        kept = (compressed != 0).sum(-1)
        assert not bool((compressed != 0)[..., ~closed].any()), f"layer {layer}: a future entry"
        if kind == "compressed_sparse_attention":
            # The lightning indexer keeps each query's top index_topk closed entries.
            expected = closed.sum(-1).clamp(max=config.index_topk).expand_as(kept)
            assert int(closed.sum(-1).max()) > config.index_topk, "the indexer must choose"
        else:
            expected = closed.sum(-1).expand_as(kept)
        assert torch.equal(kept, expected), f"layer {layer}: entries kept"
        mixer = run.hf.model.layers[layer].self_attn
        with torch.no_grad():
            cos, sin = run.hf.model.rotary_emb(kv, positions, layer_type=mixer.rope_layer_type)
            mixed = torch.matmul(probs, v4.repeat_kv(kv, mixer.num_key_value_groups))
            mixed = mixed.transpose(1, 2).contiguous()
            mixed = v4.apply_rotary_pos_emb(mixed.transpose(1, 2), cos, -sin).transpose(1, 2)
        problem = _mismatch(run.get("z", layer), mixed.reshape(batch, seq, -1))
        assert problem is None, f"layer {layer}: probs @ (tokens, entries) vs z: {problem}"


# --- 5. the MLP ----------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_mlp_neurons_project_to_mlp_out(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    dense = sorted(run.ref.mlp_modules)
    # Falcon-H1 scales the gate before the activation and the down projection's output.
    gate_scale, down_scale = getattr(run.hf.config, "mlp_multipliers", None) or (None, None)
    for layer in dense:
        act_fn, down = run.ref.mlp_modules[layer]
        # Gemma-4's dense MLP beside the experts has no mlp_out point: its own output instead.
        mlp_out = run.ref.dense_mlp_out.get(layer)
        if mlp_out is None:
            mlp_out = run.get("mlp_out", layer)
        act = run.get("mlp_act", layer)
        with torch.no_grad():
            if not run.has("mlp_pre", layer):
                # Gemma-3n's sparse layers: gaussian top-k between gate_proj and act_fn.
                mlp = run.ref_mlp(layer)
                pre = mlp._gaussian_topk(mlp.gate_proj(run.get("mlp_in", layer)))
                assert run.model.facts.sparsity_at(layer) > 0, f"{family} {layer}: no mlp_pre"
            else:
                pre = run.get("mlp_pre", layer)
            if gate_scale is not None:
                expected_act = run.get("mlp_pre_linear", layer) * act_fn(pre * gate_scale)
            elif run.has("mlp_pre_linear", layer):
                expected_act = act_fn(pre) * run.get("mlp_pre_linear", layer)
            else:
                expected_act = act_fn(pre)
            projected = down(act) if down_scale is None else down(act) * down_scale
        assert torch.equal(act, expected_act), f"{family} layer {layer}: act(pre)[*up] != act"
        assert torch.equal(projected, mlp_out), f"{family} layer {layer}"
    if LAYOUTS[family].block_router:
        return  # the dense MLP runs beside the experts: its neurons exist on sparse layers
    for layer in sorted(run.ref.sparse_layers):
        for name in ("mlp_pre", "mlp_pre_linear", "mlp_act"):
            assert not run.has(name, layer), f"{name} served on sparse layer {layer}"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_expert_choices_are_consistent(runs: dict[str, Run], family: str) -> None:
    run = _run(runs, family)
    k = run.model.facts.moe.experts_per_token if run.model.facts.moe else 0
    for layer in sorted(run.ref.sparse_layers):
        weights = run.get("expert_weights", layer)
        indices = run.get("expert_indices", layer)
        logits = run.get("router_logits", layer)
        assert weights.shape == indices.shape == (*run.ids.shape, k)
        assert not indices.is_floating_point() and not weights.requires_grad
        assert logits.shape == (*run.ids.shape, run.model.facts.moe.n_experts)
        # Each token's k chosen experts are distinct.
        assert bool((indices.sort(-1).values.diff(dim=-1) != 0).all())
        # Best first: in the order of the router's own selection score.
        layout = LAYOUTS[family]
        # Gemma-4 keeps its router on the block, beside the dense MLP.
        block = run.hf.get_submodule(layout.blocks)[layer]
        router = getattr(block if layout.block_router else run.ref_mlp(layer), layout.router)
        if hasattr(router, "tid2eid"):
            # DeepSeek-V4 hash routing: a fixed token -> experts table, no ranking to follow.
            assert torch.equal(indices, router.tid2eid[run.ids].to(indices.dtype))
            continue
        selection = logits
        bias = getattr(router, "e_score_correction_bias", None)
        if bias is not None:  # DeepSeek: a monotone score plus a selection-only bias
            score_fn = getattr(router, "score_fn", torch.sigmoid)
            with torch.no_grad():
                selection = score_fn(logits) + bias
        statics = getattr(router, "moe_statics", None)
        if statics is not None:  # ERNIE-4.5: softmax probabilities plus a selection-only bias
            with torch.no_grad():
                selection = statics(torch.softmax(logits.float(), dim=-1))
        ranked = selection.gather(-1, indices)
        assert bool((ranked.diff(dim=-1) <= 0).all()), f"{family} layer {layer}: not best first"


# --- 6. the hyper-connection trunk -------------------------------------------------------------
def test_hyper_connection_points(runs: dict[str, Run]) -> None:
    run = _run(runs, "deepseek_v4")
    facts = run.model.facts
    n = facts.n_streams
    assert n > 1
    # The coefficients themselves are compared with a recomputation from each site's weights
    # in test_every_served_point_matches_reference; here, how the blocks use them.
    for layer in range(facts.n_layers):
        block = run.hf.model.layers[layer]
        for site, module, norm in (
            ("attn", block.attn_hc, block.input_layernorm),
            ("mlp", block.ffn_hc, block.post_attention_layernorm),
        ):
            collapse = run.get(f"{site}_stream_collapse", layer)
            mix = run.get(f"{site}_stream_mix", layer)
            # The site reads the collapse through its pre-norm: attn_in / mlp_in.
            with torch.no_grad():
                assert torch.equal(norm(collapse), run.get(f"{site}_in", layer))
            # Sinkhorn normalises columns last, dividing by (sum + hc_eps): each column sums to
            # sum / (sum + hc_eps), i.e. one minus about hc_eps, plus float32 rounding of the
            # four-term sum (a few 6e-8 ulps).
            bound = module.hc_eps + 1e-6
            torch.testing.assert_close(
                mix.sum(dim=-2), torch.ones_like(mix.sum(dim=-2)), atol=bound, rtol=0
            )


# --- 7. head-major reads when the prompt length equals the head count ---------------------------
@pytest.mark.parametrize("family", ["qwen3", "gemma3", "cohere", "olmo2"])
def test_qk_norm_points_when_seq_equals_head_count(family: str) -> None:
    """[b, heads, seq, d] and [b, seq, heads, d] look alike when seq == heads; read them right."""
    model = eager_helpers.model(family)
    facts = model.facts
    for seq in sorted({facts.n_heads, facts.n_kv_heads} - {1}):
        ids = _prompt(model)[:, :seq]
        names = ("q_norm_in", "q_norm_out", "k_norm_in", "k_norm_out")
        addresses = [Address(name, layer) for name in names for layer in range(facts.n_layers)]
        cache = run_with_cache(model, ids, addresses)
        ref = reference_points(model.hf_model, family, ids)
        for address in addresses:
            problem = _mismatch(cache[address], ref.points[address])
            assert problem is None, f"{family} seq={seq} {address}: {problem}"


# --- 8. fused-qkv layouts the factory's families do not exercise -------------------------------
# The factory builds GPT-BigCode multi-query and Falcon-40B (grouped K/V). Their siblings pack
# c_attn / query_key_value differently, and the backend must tell them apart from the config.
_GPT_VARIANT = {
    "vocab_size": 1000,
    "n_embd": 128,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 128,
    "initializer_range": 0.1,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
}
_FALCON_VARIANT = {
    "vocab_size": 1000,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "bias": True,
    "alibi": False,
    "max_position_embeddings": 128,
    "initializer_range": 0.1,
}
_FALCON_LAYOUT = LAYOUTS["falcon"]
VARIANTS: dict[str, tuple[str, dict[str, Any], Any]] = {
    # StarCoder-1 style without MQA: c_attn interleaved per head, [head, (q, k, v), d].
    "gpt_bigcode_mha": (
        "gpt_bigcode",
        {**_GPT_VARIANT, "multi_query": False},
        replace(LAYOUTS["gpt_bigcode"], qkv_layout="per_head"),
    ),
    # Falcon-7B: one K/V head after all query heads, parallel block with a single LayerNorm.
    "falcon_7b": (
        "falcon",
        {
            **_FALCON_VARIANT,
            "new_decoder_architecture": False,
            "multi_query": True,
            "parallel_attn": True,
        },
        replace(
            _FALCON_LAYOUT,
            qkv_layout="thirds",
            pre_attn_norm="input_layernorm",
            pre_mlp_norm=None,
        ),
    ),
    # Falcon-RW with rotary: per-head q|k|v, sequential block.
    "falcon_rw": (
        "falcon",
        {
            **_FALCON_VARIANT,
            "new_decoder_architecture": False,
            "multi_query": False,
            "parallel_attn": False,
        },
        replace(
            _FALCON_LAYOUT,
            qkv_layout="per_head",
            pre_attn_norm="input_layernorm",
            pre_mlp_norm="post_attention_layernorm",
            parallel=None,
        ),
    ),
}


def _build_variant(folder: Path, model_type: str, config: dict[str, Any]) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(
            AutoConfig.for_model(model_type, **config), attn_implementation="eager"
        )
        with torch.no_grad():
            # Norm gains and biases off their constant init, so a skipped one shows.
            for name, param in model.named_parameters():
                if name.endswith("bias") or "ln" in name or "norm" in name:
                    param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_fused_qkv_variants(tmp_path: Path, variant: str) -> None:
    model_type, config, layout = VARIANTS[variant]
    _build_variant(tmp_path, model_type, config)
    model = load_model(str(tmp_path), backend="eager")
    ids = torch.tensor([[0, *range(5, 17)], [0, *range(40, 28, -1)]])
    addresses = served_addresses(model)
    cache = run_with_cache(model, ids, addresses)
    ref = reference_points(model.hf_model, model_type, ids, layout)
    problems = []
    for address in addresses:
        if address not in ref.points:
            problems.append(f"{address}: served, but the reference cannot name it")
            continue
        if address.name == "attn_scores":
            problem = _scores_mismatch(cache[address], ref.points[address])
        else:
            problem = _mismatch(cache[address], ref.points[address])
        if problem:
            problems.append(f"{address}: {problem}")
    unserved = [str(a) for a in ref.points if a not in set(addresses)]
    assert not unserved, f"{variant} refuses {unserved}"
    assert not problems, f"{variant}: " + "\n".join(problems)
