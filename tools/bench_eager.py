"""What does capturing cost on the eager backend, relative to a plain HF forward?

Builds a 24M-parameter Llama (d_model 512, 8 layers, random weights) and times, interleaved in
one process so machine noise hits every variant alike: a plain HF forward, a capture of
resid_post at every layer, and a capture of every point the family serves at every layer — all
with the same attention implementation, 128 tokens, float32 on the CPU. Reports medians of the
repeats after warm-up and the ratios to the plain forward, as JSON and a Markdown table.

    python tools/bench_eager.py [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def _build(folder: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch

    from interp_core import Address, load_model, run_with_cache

    torch.set_num_threads(max(1, torch.get_num_threads()))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _build(folder)
        model = load_model(str(folder), backend="eager", attn_implementation="eager")
        hf = model.hf_model
        params = sum(p.numel() for p in hf.parameters())
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(0, 1000, (1, args.tokens), generator=generator)
        resid = [Address("resid_post", layer) for layer in range(model.n_layers)]
        every = []
        for spec in model.points():
            if spec.scope.name == "TRUNK":
                every.append(Address(spec.name))
            else:
                every += [Address(spec.name, layer) for layer in range(model.n_layers)]

        def plain() -> None:
            with torch.no_grad():
                hf(input_ids=ids, use_cache=False)

        variants = {
            "plain HF forward": plain,
            "resid_post, every layer": lambda: run_with_cache(model, ids, resid),
            f"every point ({len(every)} addresses)": lambda: run_with_cache(model, ids, every),
        }
        for _ in range(args.warmup):
            for run in variants.values():
                run()
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, run in variants.items():  # interleaved: noise lands on every variant
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)

    base = statistics.median(times["plain HF forward"])
    rows = [
        {
            "variant": name,
            "median_ms": 1000 * statistics.median(samples),
            "ratio": statistics.median(samples) / base,
        }
        for name, samples in times.items()
    ]
    result = {
        "model": f"Llama, d_model 512, 8 layers, {params / 1e6:.1f}M parameters, float32, CPU",
        "tokens": args.tokens,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "rows": rows,
    }
    print(f"{result['model']}, {args.tokens} tokens, median of {args.repeats}")
    print("| variant | median ms | × plain forward |")
    print("|---|---:|---:|")
    for row in rows:
        print(f"| {row['variant']} | {row['median_ms']:.1f} | {row['ratio']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
