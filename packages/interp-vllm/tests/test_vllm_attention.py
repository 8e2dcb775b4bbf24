"""Does the client-side attention rebuild (`scores_from_qk`, `probs_from_scores`) compute what it
says, without any engine?

Random q and k in the kernel's flat layout go through the rebuild and through a reference written
here from the definitions, entry by entry in float64: the family's scaling (multiplied or
divided, GPT-2's per-layer divisor), Gemma-2's softcap, the causal mask and the sliding window,
grouped-query heads (query head h reads key head h // group), BLOOM's ALiBi bias, and sinks in the
softmax denominator. The module must import without vLLM: a subprocess blocks every `vllm` import
and imports it.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import torch

from interp_vllm.attention import (
    alibi_slopes,
    probs_from_scores,
    scores_from_qk,
    unsupported_reason,
)

MASKED = torch.finfo(torch.float32).min
TOKENS = 7

_BASE = {"num_hidden_layers": 3, "intermediate_size": 64, "vocab_size": 100}
CONFIGS: dict[str, dict[str, Any]] = {
    # GQA: 4 query heads over 2 key heads, head_dim 32 / 4 = 8, scaled by 8**-0.5.
    "llama": {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
              "num_key_value_heads": 2, **_BASE},
    # Multi-query over a sliding window of 3 on every layer.
    "mistral": {"model_type": "mistral", "hidden_size": 32, "num_attention_heads": 4,
                "num_key_value_heads": 1, "sliding_window": 3, **_BASE},
    # query_pre_attn_scalar 24 (not head_dim 16), softcap 50, sliding layer 0, full layer 1.
    "gemma2": {"model_type": "gemma2", "hidden_size": 32, "num_attention_heads": 4,
               "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 24,
               "attn_logit_softcapping": 50.0, "sliding_window": 3,
               "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
               **_BASE},
    # Divides by sqrt(head_dim) and, here, by layer + 1.
    "gpt2": {"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 3, "vocab_size": 100,
             "scale_attn_by_inverse_layer_idx": True},
    "granite": {"model_type": "granite", "hidden_size": 32, "num_attention_heads": 4,
                "num_key_value_heads": 4, "attention_multiplier": 0.3, **_BASE},
    # Six heads: ALiBi slopes for a head count that is not a power of two.
    "bloom": {"model_type": "bloom", "hidden_size": 48, "n_head": 6, "n_layer": 3,
              "vocab_size": 100},
}  # fmt: skip

# (query heads, key heads, head_dim, how q·k is scaled, softcap, window per layer 0/1/2)
SHAPES: dict[str, tuple[int, int, int, Any, float | None, tuple[int | None, ...]]] = {
    "llama": (4, 2, 8, lambda s, layer: s * 8**-0.5, None, (None, None, None)),
    "mistral": (4, 1, 8, lambda s, layer: s * 8**-0.5, None, (3, 3, 3)),
    "gemma2": (4, 2, 16, lambda s, layer: s * 24**-0.5, 50.0, (3, None, 3)),
    "gpt2": (4, 4, 8, lambda s, layer: s / (math.sqrt(8) * (layer + 1)), None, (None,) * 3),
    "granite": (4, 4, 8, lambda s, layer: s * 0.3, None, (None, None, None)),
    "bloom": (6, 6, 8, lambda s, layer: s / math.sqrt(8), None, (None, None, None)),
}


def _bloom_slope(head: int, heads: int) -> float:
    """ALiBi's slopes: 2**(-8(h+1)/n) for n a power of two; past the largest power of two p <= n,
    the odd powers of 2**(-8/(2p)) (so six heads: 1/4, 1/16, 1/64, 1/256, then 1/2, 1/8)."""
    p = 2 ** int(math.log2(heads))
    if head < p:
        return 2.0 ** (-8.0 * (head + 1) / p)
    return 2.0 ** (-8.0 * (2 * (head - p) + 1) / (2 * p))


def _qk(family: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    heads, kv_heads, dim, *_ = SHAPES[family]
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(TOKENS, heads * dim, generator=generator) * 4.0
    k = torch.randn(TOKENS, kv_heads * dim, generator=generator) * 4.0
    return q, k


def _reference_scores(family: str, q: torch.Tensor, k: torch.Tensor, layer: int) -> torch.Tensor:
    """`[heads, T, T]` in float64, entry by entry; None-masked entries hold -inf."""
    heads, kv_heads, dim, scale, cap, windows = SHAPES[family]
    group = heads // kv_heads
    window = windows[layer]
    q64, k64 = q.double().reshape(TOKENS, heads, dim), k.double().reshape(TOKENS, kv_heads, dim)
    out = torch.full((heads, TOKENS, TOKENS), -math.inf, dtype=torch.float64)
    for h in range(heads):
        for i in range(TOKENS):
            for j in range(TOKENS):
                if j > i or (window is not None and j <= i - window):
                    continue
                s = scale(float(q64[i, h] @ k64[j, h // group]), layer)
                if family == "bloom":
                    s += _bloom_slope(h, heads) * j
                if cap is not None:
                    s = math.tanh(s / cap) * cap
                out[h, i, j] = s
    return out


def _check_scores(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.shape == (1, *want.shape)
    assert got.dtype == torch.float32
    masked = torch.isinf(want)
    assert torch.equal(got[0][masked], torch.full_like(got[0][masked], MASKED))
    torch.testing.assert_close(got[0][~masked].double(), want[~masked], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", sorted(CONFIGS))
@pytest.mark.parametrize("layer", [0, 1, 2])
def test_scores_equal_the_definition(family: str, layer: int) -> None:
    q, k = _qk(family, seed=layer)
    got = scores_from_qk(q, k, CONFIGS[family], layer)
    want = _reference_scores(family, q, k, layer)
    _check_scores(got, want)
    cap = SHAPES[family][4]
    if cap is not None:  # the inputs are large enough for the cap to bend some scores
        kept = want[~torch.isinf(want)]
        assert (cap * torch.atanh(kept / cap) - kept).abs().max() > 0.1


def test_the_window_and_the_causal_mask_hide_exactly_the_right_keys() -> None:
    q, k = _qk("gemma2", seed=5)
    sliding = scores_from_qk(q, k, CONFIGS["gemma2"], 0)[0, 0] > MASKED
    full = scores_from_qk(q, k, CONFIGS["gemma2"], 1)[0, 0] > MASKED
    for i in range(TOKENS):
        assert full[i].tolist() == [j <= i for j in range(TOKENS)]
        assert sliding[i].tolist() == [i - 3 < j <= i for j in range(TOKENS)]


def test_bloom_slopes_follow_alibi() -> None:
    for heads in (6, 8, 12):
        want = torch.tensor([_bloom_slope(h, heads) for h in range(heads)], dtype=torch.float32)
        # float32 powers (HF's arithmetic) against float64 ones: within float32's last bit.
        torch.testing.assert_close(alibi_slopes(heads), want, rtol=2e-7, atol=0, msg=str(heads))
    assert alibi_slopes(6).tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]


def _reference_probs(scores: torch.Tensor, sinks: list[float] | None) -> torch.Tensor:
    """Softmax over the unmasked keys in float64; a sink adds exp(sink) to the denominator."""
    out = torch.zeros_like(scores, dtype=torch.float64)
    _, heads, rows, cols = scores.shape
    for h in range(heads):
        for i in range(rows):
            kept = [float(s) for s in scores[0, h, i] if s > MASKED]
            top = max(kept + ([sinks[h]] if sinks else []))
            total = math.fsum(math.exp(s - top) for s in kept)
            if sinks:
                total += math.exp(sinks[h] - top)
            for j in range(cols):
                s = float(scores[0, h, i, j])
                out[0, h, i, j] = math.exp(s - top) / total if s > MASKED else 0.0
    return out


@pytest.mark.parametrize("family", ["llama", "gemma2", "bloom"])
def test_probs_are_the_softmax_of_the_scores(family: str) -> None:
    q, k = _qk(family, seed=9)
    scores = scores_from_qk(q, k, CONFIGS[family], 0)
    got = probs_from_scores(scores)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _reference_probs(scores, None), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(got.sum(-1), torch.ones(got.shape[:-1]))


def test_sinks_join_the_denominator_and_are_dropped() -> None:
    q, k = _qk("llama", seed=11)
    scores = scores_from_qk(q, k, CONFIGS["llama"], 0)
    sinks = [0.5, -1.0, 2.0, 4.0]
    got = probs_from_scores(scores, torch.tensor(sinks))
    assert got.shape == scores.shape
    want = _reference_probs(scores, sinks)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-7)
    # Each row keeps 1 - (the sink's share): below one, by a visible amount somewhere.
    assert (got.sum(-1) <= 1.0).all()
    assert (1.0 - got.sum(-1)).max() > 0.1


@pytest.mark.parametrize(
    ("config", "word"),
    [
        ({"model_type": "mpt", "d_model": 32, "n_heads": 4, "n_layers": 2,
          "num_hidden_layers": 2, "num_attention_heads": 4,
          "hidden_size": 32, "vocab_size": 100}, "ALiBi"),
        ({"model_type": "falcon", "hidden_size": 32, "num_attention_heads": 4,
          "num_hidden_layers": 2, "alibi": True, "vocab_size": 100}, "ALiBi"),
        ({"model_type": "deepseek_v3", "hidden_size": 32, "num_attention_heads": 4,
          "num_hidden_layers": 2, "kv_lora_rank": 16, "q_lora_rank": 24,
          "qk_rope_head_dim": 4, "qk_nope_head_dim": 8, "v_head_dim": 8, "vocab_size": 100,
          "intermediate_size": 64}, "latent"),
    ],
)  # fmt: skip
def test_attention_it_cannot_rebuild_is_refused(config: dict[str, Any], word: str) -> None:
    reason = unsupported_reason(config)
    assert reason is not None and word in reason
    q, k = _qk("llama", seed=0)
    with pytest.raises(ValueError, match=word):
        scores_from_qk(q, k, config, 0)


def test_the_module_imports_without_vllm() -> None:
    script = textwrap.dedent(
        """
        import sys

        class NoVllm:
            def find_spec(self, name, path=None, target=None):
                if name == "vllm" or name.startswith("vllm."):
                    raise ImportError("vllm is blocked in this test")
                return None

        sys.meta_path.insert(0, NoVllm())
        import interp_vllm.attention
        assert not any(m == "vllm" or m.startswith("vllm.") for m in sys.modules)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
