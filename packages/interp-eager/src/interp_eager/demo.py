"""What does interp-engine show on a real model, end to end, in a few minutes on a laptop CPU?

`python -m interp_eager.demo [OUT_DIR]` (what `make demo` runs) loads the embedded
SmolLM2-135M-Instruct through `load_model(..., backend="eager")` and:

1. captures standard points for "The capital of France is";
2. prints a per-layer logit-lens table and the layer where " Paris" becomes the top-1 guess;
3. writes an attention-pattern heatmap and a per-layer plot (residual norm and the lens
   probability of " Paris") as PNG files;
4. steers the model towards " London" at a middle layer and prints both generations.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PROMPT = "The capital of France is"
TARGET = " Paris"
STEER_TOKEN = " London"


def _bar(value: float, width: int = 24) -> str:
    filled = round(value * width)
    return "#" * filled + "." * (width - filled)


def attention_figure(pattern: Any, str_tokens: Sequence[str], title: str) -> Figure:
    """One heatmap per head of `pattern` [heads, q, k], tokens on both axes, one colour bar.

    Rows are query positions (the token attending), columns key positions (the token attended
    to); the labels sit on the outer axes only, so every panel reads by the same grid.
    """
    import matplotlib.pyplot as plt

    heads, n_q, n_k = pattern.shape
    labels = [repr(t)[1:-1] or "␣" for t in str_tokens]  # escapes shown, quotes dropped
    cols = min(heads, 5)
    rows = (heads + cols - 1) // cols
    size = max(2.6, 0.32 * n_k + 1.2)
    fig, axes = plt.subplots(
        rows, cols, figsize=(size * cols + 1.2, size * rows + 0.6), squeeze=False
    )
    image = None
    for index in range(rows * cols):
        ax = axes[index // cols][index % cols]
        if index >= heads:
            ax.axis("off")
            continue
        image = ax.imshow(pattern[index], cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"head {index}", fontsize=9)
        ax.set_xticks(range(n_k))
        ax.set_yticks(range(n_q))
        last_row = index + cols >= heads
        ax.set_xticklabels(labels[:n_k] if last_row else [], rotation=90, fontsize=7)
        ax.set_yticklabels(labels[:n_q] if index % cols == 0 else [], fontsize=7)
        if last_row:
            ax.set_xlabel("key (attended to)", fontsize=8)
        if index % cols == 0:
            ax.set_ylabel("query", fontsize=8)
    fig.suptitle(f"{title}: attention probability per head", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.92, 1))
    bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.025, pad=0.02)
    bar.set_label("attention probability")
    return fig


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0] if argv else "demo-output").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    import matplotlib

    matplotlib.use("Agg")  # files only; no display on a server or in CI
    import matplotlib.pyplot as plt
    import torch

    from interp_core import Address, SteeringSpec, load_model, run_with_cache
    from interp_testmodels.smollm2 import smollm2_path

    started = time.perf_counter()
    path = smollm2_path()
    model = load_model(str(path), backend="eager")
    tokens = model.to_tokens(PROMPT)
    str_tokens = model.to_str_tokens(PROMPT)
    n_layers = model.n_layers
    print(
        f"model: SmolLM2-135M-Instruct ({model.facts.architecture}, {n_layers} layers, "
        f"d_model {model.d_model}) from {path}"
    )
    print(f"prompt: {PROMPT!r} -> tokens {str_tokens}")

    # 1. capture standard points at every layer in one forward pass
    mid = n_layers // 2
    points = [Address("resid_post", layer) for layer in range(n_layers)]
    points += [Address("attn_probs", mid), Address("mlp_act", mid), Address("z", mid)]
    cache = run_with_cache(model, tokens, points)
    print(f"\ncaptured {len(cache)} tensors in one forward pass, e.g.")
    for address in (
        Address("resid_post", mid),
        Address("attn_probs", mid),
        Address("mlp_act", mid),
    ):
        print(f"  {address!s:<16} {tuple(cache[address].shape)}")

    # 2. logit lens: what each layer would predict next
    target_id = model.tokenizer.encode(TARGET, add_special_tokens=False)[0]
    lens = model.logit_lens_sync(tokens, top_k=3)
    probs = torch.softmax(lens.logits[:, -1].float(), dim=-1)[:, target_id]
    first_top1 = None
    print(f"\nlogit lens at the last position (top-3 guesses, and P({TARGET!r})):")
    for layer in lens.layers:
        top = lens.top(layer)
        guesses = "  ".join(f"{p.token!r}:{p.prob:.2f}" for p in top)
        p_target = float(probs[layer])
        print(f"  layer {layer:>2}  {_bar(p_target)}  {p_target:5.3f}   {guesses}")
        if first_top1 is None and top[0].token_id == target_id:
            first_top1 = layer
    if first_top1 is None:
        print(f"{TARGET!r} never becomes the top-1 guess")
    else:
        print(f"{TARGET!r} first becomes the top-1 guess at layer {first_top1}")

    # 3. pictures
    heatmap = out_dir / f"attention_layer{mid:02d}.png"
    pattern = cache[Address("attn_probs", mid)][0].float()  # [heads, q, k]
    fig = attention_figure(pattern.numpy(), str_tokens, f"attn_probs.{mid}")
    fig.savefig(heatmap, dpi=110)
    plt.close(fig)

    per_layer = out_dir / "per_layer.png"
    norms = [float(cache[Address("resid_post", layer)][0, -1].norm()) for layer in range(n_layers)]
    fig, left = plt.subplots(figsize=(8, 4))
    left.plot(range(n_layers), norms, color="tab:blue", marker="o", ms=3)
    left.set_xlabel("layer")
    left.set_ylabel("‖resid_post‖ at the last token", color="tab:blue")
    right = left.twinx()
    right.plot(range(n_layers), probs.tolist(), color="tab:red", marker="s", ms=3)
    right.set_ylabel(f"lens P({TARGET!r})", color="tab:red")
    right.set_ylim(0, 1)
    fig.suptitle(f"{PROMPT!r}: residual norm and logit lens per layer")
    fig.tight_layout()
    fig.savefig(per_layer, dpi=110)
    plt.close(fig)

    # 4. steering: push the residual stream towards the unembedding of " London". The BOS
    # position is left alone: its residual carries the model's huge attention-sink activation,
    # and editing it derails everything after it.
    steer_id = model.tokenizer.encode(STEER_TOKEN, add_special_tokens=False)[0]
    direction = model.hf_model.lm_head.weight[steer_id].detach().float()
    direction = direction / direction.norm()
    layer = (3 * n_layers) // 4
    resid = run_with_cache(model, tokens, [Address("resid_post", layer)])
    typical = float(resid[Address("resid_post", layer)][0, 1:].norm(dim=-1).mean())
    new_tokens = 12
    # Every position a forward pass of the generation runs (the last token is never fed back).
    positions = list(range(1, tokens.shape[1] + new_tokens - 1))
    spec = SteeringSpec(
        Address("resid_post", layer), direction, scale=0.5 * typical, positions=positions
    )
    plain = model.generate_sync(tokens, max_new_tokens=new_tokens, temperature=0)
    steered = model.generate_sync(tokens, max_new_tokens=new_tokens, temperature=0, steering=spec)
    print(
        f"\nsteering: add 0.5 x (typical |resid_post.{layer}| = {typical:.0f}) along "
        f"W_U[{STEER_TOKEN!r}] at every position after BOS"
    )
    print(f"  plain:   {PROMPT}{plain.text!r}")
    print(f"  steered: {PROMPT}{steered.text!r}")

    print(f"\nwrote {heatmap}\nwrote {per_layer}")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
