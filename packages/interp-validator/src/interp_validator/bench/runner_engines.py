"""Standalone timing runner for the reference engines, executed with a pinned env's python.

Imports only torch, transformers, the engines and the validator's reference runner scripts (the
env has no interp packages). Reads a JSON request from argv[1] ({"model_dir", "tokens",
"repeats", "warmup", "engines": [...]}) and writes {"engine": {"variant": [seconds, ...]},
"versions": {...}, "errors": {...}} to argv[2].

Every engine is timed interleaved with a plain HF forward of the same model in the same process
(eager attention, float32, no grad), so each ratio is measured side by side: machine noise lands
on both. Variants: P1 = resid_post at every layer, P2 = every point the engine can read.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

import torch

torch.set_num_threads(1)


def _hf(model_dir: str) -> Any:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval()


def _tl_bridge(model_dir: str, hf: Any, ids: torch.Tensor) -> dict[str, Callable[[], Any]]:
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(model_dir, device="cpu", dtype=torch.float32)
    resid = lambda name: name.endswith("hook_resid_post")  # noqa: E731
    return {
        "P1": lambda: bridge.run_with_cache(ids, names_filter=resid),
        "P2": lambda: bridge.run_with_cache(ids),
    }


def _tl_hooked(model_dir: str, hf: Any, ids: torch.Tensor) -> dict[str, Callable[[], Any]]:
    # Built as the validator's TransformerLens runner builds it (a sibling script there, like
    # this one: it needs no interp package).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "references"))
    import runner_tl

    model = runner_tl.unprocessed(model_dir, hf)
    model.eval()
    resid = lambda name: name.endswith("hook_resid_post")  # noqa: E731
    return {
        "P1": lambda: model.run_with_cache(ids, names_filter=resid),
        "P2": lambda: model.run_with_cache(ids),
    }


def _nnsight(model_dir: str, hf: Any, ids: torch.Tensor) -> dict[str, Callable[[], Any]]:
    from nnsight import LanguageModel

    lm = LanguageModel(
        model_dir, device_map="cpu", dispatch=True, attn_implementation="eager", dtype=torch.float32
    )
    layers = lm.model.layers

    def p1() -> Any:
        saved = []
        with torch.no_grad(), lm.trace(ids):
            for layer in layers:
                saved.append(layer.output.save())
        return saved

    def p2() -> Any:
        saved = []
        with torch.no_grad(), lm.trace(ids):
            for layer in layers:
                saved.append(layer.input.save())
                saved.append(layer.self_attn.output[0].save())
                saved.append(layer.mlp.output.save())
                saved.append(layer.output.save())
        return saved

    return {"P1": p1, "P2": p2}


def _nnterp(model_dir: str, hf: Any, ids: torch.Tensor) -> dict[str, Callable[[], Any]]:
    from nnterp import StandardizedTransformer

    st = StandardizedTransformer(
        model_dir, device_map="cpu", dtype=torch.float32, enable_attention_probs=True
    )

    def p1() -> Any:
        saved = []
        with torch.no_grad(), st.trace(ids):
            for i in range(st.num_layers):
                saved.append(st.layers_output[i].save())
        return saved

    def p2() -> Any:
        saved = []
        with torch.no_grad(), st.trace(ids):
            for i in range(st.num_layers):
                saved.append(st.layers_input[i].save())
                saved.append(st.attention_probabilities[i].save())
                saved.append(st.attentions_output[i].save())
                saved.append(st.mlps_output[i].save())
                saved.append(st.layers_output[i].save())
        return saved

    return {"P1": p1, "P2": p2}


_ENGINES = {
    "tl_bridge": _tl_bridge,
    "tl_hooked": _tl_hooked,
    "nnsight": _nnsight,
    "nnterp": _nnterp,
}


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("torch", "transformers", "transformer-lens", "nnsight", "nnterp"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def main() -> int:
    request = json.loads(open(sys.argv[1]).read())
    ids = torch.tensor([request["tokens"]], dtype=torch.long)
    hf = _hf(request["model_dir"])

    def plain() -> None:
        with torch.no_grad():
            hf(input_ids=ids, use_cache=False)

    result: dict[str, Any] = {"times": {}, "errors": {}, "versions": _versions()}
    for engine in request["engines"]:
        try:
            variants = {"plain": plain, **_ENGINES[engine](request["model_dir"], hf, ids)}
            for _ in range(request["warmup"]):
                for run in variants.values():
                    run()
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(request["repeats"]):
                for name, run in variants.items():  # interleaved with the plain forward
                    start = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - start)
            result["times"][engine] = times
        except Exception as exc:  # one engine failing must not hide the others
            tail = traceback.format_exc()[-800:]
            result["errors"][engine] = f"{type(exc).__name__}: {exc}\n{tail}"
    with open(sys.argv[2], "w") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
