"""H and D — the harvest's jobs against vanilla vLLM, SAELens and sae-dashboard, side by side.

Both run SmolLM2-135M-Instruct (float32, the embedded real model) over contexts of 128 tokens
that `pack` makes from one generated text corpus, at resid_post of the middle layer; the
reference engines get exactly those token ids.

* H — activations at one layer: `harvest_activations` on the compiled `vllm-static` tier (the
  point declared as a static read; shards written to disk) against vanilla vLLM, compiled,
  prefilling the same contexts (the prompt token ids, one new token each, all at once), and
  against SAELens's `CacheActivationsRunner` in its pinned `sae-lens` environment (the contexts as
  a pre-tokenized dataset, its cached-activations folder written in one buffer;
  `bench_runner_saelens.py`). Values are context tokens per second; goals: ≥ 0.85× vanilla
  (1.0× is the limit: vanilla does the same forwards and keeps nothing), ≥ 3× SAELens.
* D — dashboards of every feature of one SAE (d_sae 8192, random weights, SAELens's layout) over
  the same contexts: `harvest_dashboards` + `write_neuronpedia_batches` (Neuronpedia's batch
  JSON, 128 features a file) against sae-dashboard's `NeuronpediaRunner` in its pinned
  `sae-dashboard` environment (`bench_runner_dashboard.py`), which writes the same files. Values
  are features per second; goal ≥ 10×. Ours runs on the compiled `vllm-static` tier, whose
  workers encode and reduce the features next to the capture (`DASHBOARDS_BACKEND`).

Rounds are interleaved (the order alternating each round) with the engines kept loaded; each
ratio is the median of the rounds' paired ratios, with their spread. A reference engine's
rounds are timed inside its own process (its model loaded once, outside the rounds); ours
around the call, corpus packing and disk writes included.

`interp-bench` (interp-validator) finds these workloads through the `interp.bench` entry point
group, as it finds F: this module never imports the validator; its tools (the row, the runner of
a pinned environment's script, paired ratios) arrive as the `kit` keyword. Installing
`interpoint-harvest[bench]` brings what they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["bench_activations", "bench_dashboards", "write_bench_corpus"]

CONTEXT = 128
H_CONTEXTS = 32  # 4,096 tokens a round
D_CONTEXTS = 16  # 2,048 tokens: sae-dashboard took 102-109 s a round on 2 cores (two runs)
VANILLA_GOAL = 0.85
SAELENS_GOAL = 3.0
DASHBOARD_GOAL = 10.0
BATCH = 16  # contexts a forward in D, on both sides
DASHBOARD_ROUNDS = 2  # each of sae-dashboard's rounds takes minutes
# Measured on 2 cores (2,048 tokens, d_sae 8192): a round took 94 s on eager, 78 s on
# vllm-static, whose workers encode and reduce the features next to the capture.
DASHBOARDS_BACKEND = "vllm-static"
# A vLLM worker spins for about a second after its last step (see the validator's P3): each
# timed run starts once the previous one's engine is idle.
SETTLE_S = 1.2
_WORDS = (
    "the a river town old new light rain market road winter summer people said that when "
    "after before under over bright quiet stone bridge children watched boats evening morning "
    "lamps window garden bread songs train station letter friend slowly carried across north "
    "south field harvest farmer kitchen table story long short first last city"
).split()


def write_bench_corpus(path: Path, documents: int = 600) -> Path:
    """A deterministic jsonl corpus of `documents` documents of 12 to 160 words."""
    lines = []
    for index in range(documents):
        length = 12 + (index * 37) % 149
        words = [_WORDS[(index * 11 + k * k * 7 + k) % len(_WORDS)] for k in range(length)]
        lines.append(json.dumps({"id": index, "text": " ".join(words) + "."}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _packed(tokenizer: Any, corpus: Path, contexts: int) -> list[list[int]]:
    """The contexts the jobs themselves pack from `corpus` (the reference engines get these)."""
    from interp_harvest import Corpus, PackingPolicy, pack, tokenizer_encoder

    policy = PackingPolicy(CONTEXT, "context", getattr(tokenizer, "bos_token_id", None))
    packed = [list(c.tokens) for c in pack(Corpus(corpus), tokenizer_encoder(tokenizer), policy)]
    if len(packed) < contexts:
        message = f"the bench corpus packs into {len(packed)} contexts, not {contexts}"
        raise RuntimeError(message)
    return packed[:contexts]


def _rounds(
    variants: dict[str, Callable[[], tuple[float, float]]], rounds: int
) -> dict[str, list[float]]:
    """Each variant's rate per round (`run()` returns (units, seconds)), the order alternating
    every round, each run started `SETTLE_S` after the previous one."""
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        order = list(variants) if index % 2 == 0 else list(reversed(variants))
        for name in order:
            time.sleep(SETTLE_S)
            units, seconds = variants[name]()
            rates[name].append(units / seconds)
    return rates


# The runner script of each reference environment (executed there, never imported here).
RUNNERS = {"sae-lens": "bench_runner_saelens.py", "sae-dashboard": "bench_runner_dashboard.py"}


@contextlib.contextmanager
def _reference(
    kit: Any,
    env: str,
    folder: Path,
    work: Path,
    layer: int,
    contexts: list[list[int]],
    units: str,
    job: dict[str, Any],
) -> Iterator[Callable[[], tuple[float, float]]]:
    """The reference engine of `env`, its runner kept loaded on `folder`'s model and the
    contexts; yields one timed round of it, `(answer[units], seconds)`, timed in its process."""
    job = {
        "model_dir": str(folder),
        "references": str(kit.references),
        "hook": f"blocks.{layer}.hook_resid_post",
        "contexts": contexts,
        "work": str(work),
        **job,
    }
    script = Path(__file__).with_name(RUNNERS[env])
    with kit.env_runner(env, script, job, work, name=env) as runner:

        def one_round() -> tuple[float, float]:
            done = runner.ask("run")
            return float(done[units]), float(done["seconds"])

        yield one_round


def _timed(run: Callable[[], float]) -> Callable[[], tuple[float, float]]:
    def timed() -> tuple[float, float]:
        start = time.perf_counter()
        units = run()
        return units, time.perf_counter() - start

    return timed


def bench_activations(folder: Path, **context: Any) -> list[Any]:
    """H's rows; `folder` is SmolLM2-135M-Instruct's; `context` is interp-bench's (`repeats`,
    `work` a scratch folder, `say`, `errors`, `kit`)."""
    return _measured("H", folder, context, _activations)


def bench_dashboards(folder: Path, **context: Any) -> list[Any]:
    """D's rows, as `bench_activations`'s (sae-dashboard's rounds take minutes:
    `DASHBOARD_ROUNDS` of them, whatever `repeats` says)."""
    return _measured("D", folder, context, _dashboards)


def _measured(key: str, folder: Path, context: dict[str, Any], measure: Any) -> list[Any]:
    try:
        return list(
            measure(
                folder, context["repeats"], context["work"] / key, context["say"], context["kit"]
            )
        )
    except Exception as exc:  # reported in the table, like the other workloads' failures
        context["errors"][key] = f"{type(exc).__name__}: {exc}"
        return []


def _activations(folder: Path, repeats: int, work: Path, say: Callable[[str], None], kit: Any):
    from interp_core import load_model, sync
    from interp_harvest import harvest_activations

    common = {
        "dtype": "float32",
        "max_model_len": CONTEXT + 8,
        "extra_vllm_kwargs": {"enable_prefix_caching": False},  # every round forwards anew
    }
    corpus = write_bench_corpus(work / "corpus.jsonl")
    engines: dict[str, Any] = {}
    try:
        say("H: starting vanilla vLLM (compiled) and vllm-static (compiled), SmolLM2-135M")
        engines["vanilla"] = load_model(str(folder), backend="vllm-generate", **common)
        layer = engines["vanilla"].n_layers // 2
        point = f"resid_post.{layer}"
        engines["static"] = load_model(
            str(folder), backend="vllm-static", static_points=[point], **common
        )
        for model in engines.values():
            sync.warmup(model)
        static, vanilla = engines["static"], engines["vanilla"]
        contexts = _packed(static.tokenizer, corpus, H_CONTEXTS)
        tokens = len(contexts) * CONTEXT

        def ours() -> float:
            out = work / "harvest"
            manifest = harvest_activations(
                static,
                corpus,
                out,
                points=[point],
                tokens=tokens,
                context_size=CONTEXT,
                batch_size=len(contexts),
                contexts_per_shard=len(contexts),
            )
            shutil.rmtree(out)
            return float(manifest["tokens"])

        def prefill() -> float:
            async def all_at_once() -> list[Any]:
                return await asyncio.gather(
                    *(vanilla.generate([c], max_new_tokens=1, temperature=0.0) for c in contexts)
                )

            sync.run(vanilla, all_at_once)
            return float(tokens)

        say("H: loading SAELens's CacheActivationsRunner in the sae-lens environment")
        job = {"d_in": int(static.d_model), "batch": len(contexts)}  # one forward, as ours
        reference = _reference(kit, "sae-lens", folder, work, layer, contexts, "tokens", job)
        with reference as theirs:
            variants = {"vanilla": _timed(prefill), "ours": _timed(ours), "saelens": theirs}
            for run in variants.values():  # warm-up (vanilla's and ours' engines are warm)
                run()
            say(f"H: {repeats} rounds, interleaved")
            rates = _rounds(variants, repeats)
    finally:
        for model in engines.values():
            sync.shutdown(model)
    return _activation_rows(kit, rates, layer, len(contexts))


def _activation_rows(kit: Any, rates: dict[str, list[float]], layer: int, contexts: int):
    Row = kit.row
    shape = f"SmolLM2-135M, {contexts} contexts × {CONTEXT} tokens, resid_post.{layer}"
    vanilla = "vanilla vLLM (compiled) prefilling the contexts"
    saelens = "SAELens CacheActivationsRunner (sae-lens 6.54.12)"
    median = {name: statistics.median(values) for name, values in rates.items()}
    ours = f"harvest_activations on vllm-static (compiled), {shape}"

    def against(base: str, name: str, goal: float) -> Any:
        paired = kit.spread_note(kit.paired_ratios(rates["ours"], rates[base]))
        return Row("H", "vllm (ours)", ours, median["ours"], "tok/s", name, goal=goal, **paired)

    theirs = f"{saelens}, pre-tokenized contexts, TransformerLens, {shape}"
    return [
        Row("H", "vllm (vanilla)", f"{vanilla}, {shape}", median["vanilla"], "tok/s", vanilla, 1.0),
        against("vanilla", vanilla, VANILLA_GOAL),
        Row("H", "sae-lens", theirs, median["saelens"], "tok/s", saelens, 1.0),
        against("saelens", saelens, SAELENS_GOAL),
    ]


def write_dashboard_sae(folder: Path, *, d_in: int, layer: int) -> Path:
    """interp-sae's bench SAE (d_sae 8192, SAELens's layout) with what sae-dashboard's loader
    also reads from the config: whether the model was run with a BOS, the context size."""
    from interp_sae.bench import write_bench_sae

    write_bench_sae(folder, d_in=d_in, layer=layer)
    cfg = json.loads((folder / "cfg.json").read_text())
    cfg["metadata"].update(prepend_bos=True, context_size=CONTEXT, model_name="smollm2-135m")
    (folder / "cfg.json").write_text(json.dumps(cfg))
    return folder


def _middle_layer(folder: Path) -> int:
    return int(json.loads((folder / "config.json").read_text())["num_hidden_layers"]) // 2


def _dashboards(
    folder: Path, repeats: int, work: Path, say: Callable[[str], None], kit: Any
) -> list[Any]:
    del repeats  # DASHBOARD_ROUNDS
    from interp_core import load_model, sync
    from interp_harvest import harvest_dashboards
    from interp_harvest.neuronpedia_batch import write_neuronpedia_batches

    corpus = write_bench_corpus(work / "corpus.jsonl")
    say(f"D: loading SmolLM2-135M on the {DASHBOARDS_BACKEND} backend")
    layer = _middle_layer(folder)
    options: dict[str, Any] = {}
    if DASHBOARDS_BACKEND.startswith("vllm"):
        options = {"dtype": "float32", "max_model_len": CONTEXT + 8}
    if DASHBOARDS_BACKEND == "vllm-static":
        options["static_points"] = [f"resid_post.{layer}"]
    model = load_model(str(folder), backend=DASHBOARDS_BACKEND, **options)
    try:
        sae = write_dashboard_sae(work / "sae", d_in=int(model.d_model), layer=layer)
        contexts = _packed(model.tokenizer, corpus, D_CONTEXTS)
        tokens = len(contexts) * CONTEXT

        def ours() -> float:
            out = work / "dashboards"
            (dash,) = harvest_dashboards(
                model, corpus, [sae], tokens=tokens, context_size=CONTEXT, batch_size=BATCH
            )
            written = write_neuronpedia_batches(dash, out, model.tokenizer, model_id="smollm2")
            shutil.rmtree(out)
            return float(dash.d_sae if written else 0)

        say("D: loading sae-dashboard's NeuronpediaRunner in the sae-dashboard environment")
        job = {"model_id": "smollm2", "layer": layer, "sae": str(sae), "batch": BATCH}
        dashboard = _reference(kit, "sae-dashboard", folder, work, layer, contexts, "features", job)
        with dashboard as reference:
            _timed(ours)()  # warm-up (theirs is a long run either way)
            say(f"D: {DASHBOARD_ROUNDS} rounds, interleaved (sae-dashboard's take minutes)")
            rates = _rounds({"ours": _timed(ours), "sae-dashboard": reference}, DASHBOARD_ROUNDS)
    finally:
        sync.shutdown(model)
    Row = kit.row
    shape = (
        f"SmolLM2-135M, SAE d_sae 8192 at resid_post.{layer}, "
        f"{len(contexts)} contexts × {CONTEXT} tokens"
    )
    base = "sae-dashboard NeuronpediaRunner (sae-dashboard 0.8.0)"
    median = {name: statistics.median(values) for name, values in rates.items()}
    paired = kit.spread_note(kit.paired_ratios(rates["ours"], rates["sae-dashboard"]))
    return [
        Row(
            "D",
            "sae-dashboard",
            f"{base}, {shape}",
            median["sae-dashboard"],
            "features/s",
            base,
            1.0,
        ),
        Row(
            "D",
            f"{DASHBOARDS_BACKEND} (ours)",
            f"harvest_dashboards + write_neuronpedia_batches, {shape}",
            median["ours"],
            "features/s",
            base,
            goal=DASHBOARD_GOAL,
            **paired,
        ),
    ]
