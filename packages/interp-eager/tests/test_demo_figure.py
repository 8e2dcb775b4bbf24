"""The demo's attention heatmap: tokens on both axes and a colour bar, so a reader can read it.

The figure is built from a known pattern (no model needed): each panel must name the query and
key tokens on its outer axes, show the pattern itself, and carry one colour bar scaled 0-1.
"""

from __future__ import annotations

import numpy as np


def test_the_heatmap_labels_tokens_and_has_a_colour_bar() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from interp_eager.demo import attention_figure

    tokens = ["<|im_start|>", "The", " capital", " of", " France", " is"]
    n = len(tokens)
    rng = np.random.default_rng(0)
    pattern = np.tril(rng.random((7, n, n)))
    pattern /= pattern.sum(-1, keepdims=True)
    fig = attention_figure(pattern, tokens, "attn_probs.15")
    try:
        heads = [ax for ax in fig.axes if ax.get_title().startswith("head ")]
        assert len(heads) == 7
        # Bottom panels (heads 5, 6 and, above the empty slots, heads 2-4) show key tokens;
        # the first column shows query tokens.
        shown = [t.get_text() for t in heads[5].get_xticklabels()]
        assert shown == ["<|im_start|>", "The", " capital", " of", " France", " is"]
        assert [t.get_text() for t in heads[0].get_yticklabels()] == shown
        assert heads[0].get_xticklabels()[0].get_text() == ""  # inner panels stay clean
        assert heads[3].get_xticklabels()[0].get_text() == "<|im_start|>"  # nothing below it
        np.testing.assert_allclose(heads[2].images[0].get_array(), pattern[2])
        bars = [ax for ax in fig.axes if ax.get_ylabel() == "attention probability"]
        assert len(bars) == 1
        assert heads[0].images[0].get_clim() == (0, 1)
    finally:
        plt.close(fig)
