"""Does every vLLM site read and write exactly what the eager backend does, family by family?

For each family the tiny random model runs in the eager backend first (every point the registry
gives it, and the last resid_post under add-steering at each writable point), then once in an
in-process vLLM engine (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, a few seconds). Plain forward hooks
built from `resolve_sites` read every served (point, layer) of one prompt's prefill; each is
compared with the eager capture of the same tokens in float32, per position. attn_scores and
attn_probs are rebuilt by `attention.py` from the `_q_rot` / `_k_rot` (/ `_sinks`) reads. Each
writable site is then add-steered with the same vector and the last layer's resid_post compared.
Coverage: every (point, layer) the registry gives the family is a site or refused, and every
refusal is a sentence. One engine per family (module-scoped parameter), ~4.5 minutes for the 40
families on two busy cores. Skipped as a whole without vLLM.

The eager side runs first because vLLM's Transformers modeling backend rewrites HF's model
classes process-wide when it loads a family through them (see `_hf_classes_restored`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from vllm_helpers import FLOAT32_FAMILIES

from interp_core.backends import load_model, model_config
from interp_core.facts import ModelFacts
from interp_core.points import POINTS, absence_reason, point_names
from interp_core.protocol import InterpModel
from interp_core.steering import SteeringSpec
from interp_testmodels.families import FAMILIES as TEST_FAMILIES
from interp_testmodels.families import build_family
from interp_vllm.support import RECOMPUTED, family_support

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("needs_vllm")]

PROMPT = "The quick brown fox jumps over the lazy dog"
# float32 on both sides; vLLM's kernels (fused add-norm, rotary, CPU attention, fused MoE) round
# in another order than HF's. Rounding error is relative, so the 1e-5 bound is scaled by the
# tensor's largest entry where that exceeds 1: OLMo-2's post-norm-only MLP reaches 25 at layer 1,
# where a 5-ulp difference is 1.7e-5 absolute.
ATOL = 1e-5

FAMILIES = FLOAT32_FAMILIES


def limit(reference: torch.Tensor, family: str = "") -> float:
    """The allowed max abs difference from `reference`: ATOL, relative above magnitude 1, or the
    family's known difference from eager where the support table records one."""
    finite = reference[torch.isfinite(reference) & (reference > torch.finfo(reference.dtype).min)]
    top = finite.abs().max().item() if finite.numel() else 1.0
    known = family_support(TEST_FAMILIES[family].model_type).tolerance if family else None
    return (known or ATOL) * max(1.0, top)


def _label(name: str, layer: int | None) -> str:
    return name if layer is None else f"{name}.{layer}"


@dataclass
class Reference:
    """What the eager backend says, computed before vLLM loads (see `open_harness`)."""

    reads: dict[tuple[str, int | None], torch.Tensor]  # [seq, ...] or [1, heads, q, k]
    vectors: dict[tuple[str, int | None], torch.Tensor]
    steered: dict[tuple[str, int | None], torch.Tensor]  # last resid_post, steered at the key


@dataclass
class Harness:
    """One family in an in-process vLLM engine, its resolved sites and the eager reference."""

    family: str
    llm: Any
    model: torch.nn.Module
    resolution: Any
    tokens: torch.Tensor
    facts: ModelFacts
    config: dict[str, Any]
    reference: Reference

    def run(
        self,
        reads: list[tuple[str, int | None]],
        writes: dict[tuple[str, int | None], torch.Tensor] | None = None,
    ) -> dict[tuple[str, int | None], torch.Tensor]:
        """One prefill in vLLM with the given sites read (copied at once) and steered."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        captured: dict[tuple[str, int | None], torch.Tensor] = {}
        handles = []
        # Writes first, reads after: hooks on one module run in registration order and each
        # sees the previous one's replacement, so a read at a steered site sees the steering.
        for key, delta in (writes or {}).items():
            site = self.resolution.sites[key]
            handles.append(_register(site, _writer(site, delta)))
        for key in reads:
            site = self.resolution.sites[key]
            handles.append(_register(site, _reader(site, key, captured)))
        try:
            prompt = TokensPrompt(prompt_token_ids=self.tokens[0].tolist())
            params = SamplingParams(max_tokens=1, temperature=0)
            self.llm.generate([prompt], params, use_tqdm=False)
        finally:
            for handle in handles:
                handle.remove()
        return captured


def _register(site: Any, hook: Any) -> Any:
    if site.phase == "pre":
        return site.module.register_forward_pre_hook(hook, with_kwargs=True)
    return site.module.register_forward_hook(hook, with_kwargs=True)


def _reader(site: Any, key: Any, captured: dict) -> Any:
    if site.phase == "pre":

        def pre(module: Any, args: Any, kwargs: Any) -> None:
            captured[key] = site.read(args, kwargs, None).detach().clone()

        return pre

    def post(module: Any, args: Any, kwargs: Any, out: Any) -> None:
        captured[key] = site.read(args, kwargs, out).detach().clone()

    return post


def _writer(site: Any, delta: torch.Tensor) -> Any:
    def rows(reference: torch.Tensor) -> torch.Tensor:
        return delta.to(reference.dtype).expand(reference.shape[0], *delta.shape)

    if site.phase == "pre":

        def pre(module: Any, args: Any, kwargs: Any) -> Any:
            return site.add(args, kwargs, None, rows(site.read(args, kwargs, None)))

        return pre

    def post(module: Any, args: Any, kwargs: Any, out: Any) -> Any:
        return site.add(args, kwargs, out, rows(site.read(args, kwargs, out)))

    return post


def _present(facts: ModelFacts) -> list[tuple[str, int | None]]:
    """Every (point, layer) the registry gives this single-stream model."""
    keys: list[tuple[str, int | None]] = []
    for name in point_names():
        spec = POINTS[name]
        if spec.is_trunk:
            if absence_reason(name, facts) is None:
                keys.append((name, None))
            continue
        for layer in range(facts.n_layers):
            if absence_reason(name, facts, layer) is None:
                keys.append((name, layer))
    return keys


def _eager_equivalent(key: tuple[str, int | None], facts: ModelFacts) -> tuple[str, int | None]:
    """The eager address whose add-steering means the same edit as `key` on vLLM.

    The eager backend writes resid_mid into the pre-MLP norm's input only, so the residual that
    skips the MLP keeps the unsteered value; on vLLM the fused add-norm forms the residual from
    the steered sum, so the whole stream moves. Adding at attn_out_post (the attention sublayer's
    residual write, which resid_mid sums in) is that whole-stream edit in the eager backend.
    Where the block sums its mixers itself (Falcon-H1) there is no attn_out_post; the eager
    resid_mid write lands in place in the tensor the block keeps as its residual, so it is the
    whole-stream edit there.
    """
    name, layer = key
    if name != "resid_mid" or absence_reason("attn_out_post", facts, layer) is not None:
        return key
    return ("attn_out_post", layer)


def _reference(eager: InterpModel, tokens: torch.Tensor, facts: ModelFacts) -> Reference:
    def capture(names: list[str], steering: Any = None) -> Any:
        return asyncio.run(eager.capture(tokens, names, steering=steering))

    keys = _present(facts)
    cache = capture([_label(*key) for key in keys])
    reads = {key: cache[_label(*key)][0] for key in keys if POINTS[key[0]].width.token_major}
    reads.update({key: cache[_label(*key)] for key in keys if key[0] in RECOMPUTED})
    last = _label("resid_post", facts.n_layers - 1)
    vectors, steered = {}, {}
    for seed, key in enumerate(keys):
        if not POINTS[key[0]].writable:
            continue
        rows = reads[key].float()
        generator = torch.Generator().manual_seed(seed)
        vector = torch.randn(rows.shape[1:], generator=generator)
        # A visible push that keeps the tiny model in range: a tenth of the mean row norm.
        vector = vector / vector.norm() * 0.1 * rows.norm(dim=-1).mean().clamp(min=1e-3)
        spec = SteeringSpec(_label(*_eager_equivalent(key, facts)), vector, op="add")
        vectors[key] = vector
        steered[key] = capture([last], steering=[spec])[last][0]
    return Reference(reads, vectors, steered)


@contextlib.contextmanager
def _hf_classes_restored(model_type: str) -> Iterator[None]:
    """Undo what vLLM's Transformers backend does to HF's model classes in this process.

    For families it runs through transformers, vLLM decorates the HF decoder class itself
    (`support_torch_compile`: new `__init__` and `__call__`, an extra base class), so after an
    in-process engine has loaded one, HF can no longer build that class ("Current vLLM config is
    not set") and instances built earlier fail in `__call__` (no `do_not_compile`). The eager
    reference is computed before the engine loads; this restores the classes afterwards so the
    rest of the test process sees transformers unchanged.
    """
    import importlib

    try:
        module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    except ImportError:
        yield
        return
    classes = [v for v in vars(module).values() if isinstance(v, type)]
    saved = {cls: (cls.__bases__, dict(vars(cls))) for cls in classes}
    try:
        yield
    finally:
        for cls, (bases, namespace) in saved.items():
            for name in [n for n in vars(cls) if n not in namespace]:
                delattr(cls, name)
            for name in ("__init__", "__call__"):
                if name in namespace and vars(cls).get(name) is not namespace[name]:
                    setattr(cls, name, namespace[name])
            if cls.__bases__ != bases:
                cls.__bases__ = bases


@contextlib.contextmanager
def open_harness(family: str, dtype: str = "float32") -> Iterator[Harness]:
    """`family` in an in-process vLLM engine, with the eager reference computed first."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch.set_num_threads(1)
    path = str(build_family(family, dtype=dtype))
    eager = load_model(path, backend="eager", dtype=dtype)
    config = model_config(path)
    facts = ModelFacts.from_config(config)
    tokens = eager.to_tokens(PROMPT)
    reference = _reference(eager, tokens, facts)
    del eager
    gc.collect()

    from vllm import LLM

    from interp_vllm.sites import resolve_sites
    from interp_vllm.worker import faithful_activations

    with _hf_classes_restored(facts.model_type):
        llm = LLM(
            model=path,
            dtype=dtype,
            enforce_eager=True,
            enable_prefix_caching=False,
            max_model_len=128,
            gpu_memory_utilization=0.3,  # the share of host memory that must be free at start
        )
        model = llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
        faithful_activations(model, config)  # as the worker's interp_install does first
        harness = Harness(
            family=family,
            llm=llm,
            model=model,
            resolution=resolve_sites(model, config),
            tokens=tokens,
            facts=facts,
            config=config,
            reference=reference,
        )
        del llm, model
        try:
            yield harness
        finally:
            # The engine must be gone before the next one starts: its finaliser tears down
            # vLLM's process-global parallel groups, which a newer engine would then lack
            # ("pipeline model parallel group is not initialized").
            harness.llm = harness.model = harness.resolution = None
            gc.collect()


@pytest.fixture(scope="module", params=FAMILIES)
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    with open_harness(request.param) as opened:
        yield opened


# --- reads ---------------------------------------------------------------------------------------
def _served_reads(h: Harness) -> list[tuple[str, int | None]]:
    return [key for key in h.resolution.sites if POINTS.get(key[0]) is not None]


Errors = dict[str, tuple[float, float]]  # label -> (max abs difference, allowed)


def read_errors(h: Harness, keys: list[tuple[str, int | None]]) -> Errors:
    """Max abs difference from the eager reference per served key (ints: 0 or inf)."""
    got = h.run(keys)
    errors = {}
    for key in keys:
        ours, theirs = got[key], h.reference.reads[key]
        assert ours.shape == theirs.shape, (h.family, key, ours.shape, theirs.shape)
        if not ours.is_floating_point():
            same = torch.equal(ours, theirs.to(ours.dtype))
            errors[_label(*key)] = (0.0 if same else math.inf, 0.0)
        else:
            errors[_label(*key)] = ((ours - theirs).abs().max().item(), limit(theirs, h.family))
    return errors


def attention_errors(h: Harness) -> Errors:
    from interp_vllm.attention import probs_from_scores, scores_from_qk

    layers = [layer for (name, layer) in h.resolution.sites if name == "_q_rot"]
    keys = [(role, layer) for layer in layers for role in ("_q_rot", "_k_rot", "_sinks")]
    got = h.run([key for key in keys if key in h.resolution.sites])
    errors = {}
    for layer in layers:
        scores = scores_from_qk(got[("_q_rot", layer)], got[("_k_rot", layer)], h.config, layer)
        sinks = got.get(("_sinks", layer))
        probs = probs_from_scores(scores, None if sinks is None else sinks[0])
        for name, ours in (("attn_scores", scores), ("attn_probs", probs)):
            theirs = h.reference.reads[(name, layer)]
            assert ours.shape == theirs.shape, (h.family, name, ours.shape, theirs.shape)
            errors[f"{name}.{layer}"] = (
                (ours - theirs).abs().max().item(),
                limit(theirs, h.family),
            )
    return errors


def steering_errors(h: Harness) -> Errors:
    target = ("resid_post", h.facts.n_layers - 1)
    errors = {}
    for key, site in h.resolution.sites.items():
        if site.add is None or POINTS.get(key[0]) is None:
            continue
        got = h.run([target], {key: h.reference.vectors[key]})[target]
        want = h.reference.steered[key]
        errors[_label(*key)] = ((got - want).abs().max().item(), limit(want, h.family))
    return errors


def test_reads_match_eager(harness: Harness) -> None:
    errors = read_errors(harness, _served_reads(harness))
    bad = {key: error for key, (error, allowed) in errors.items() if error > allowed}
    assert not bad, f"{harness.family}: {bad}"


def test_attention_rebuild_matches_eager(harness: Harness) -> None:
    if not any(name == "_q_rot" for name, _ in harness.resolution.sites):
        assert all(name in harness.resolution.refused for name in RECOMPUTED)
        return
    errors = attention_errors(harness)
    bad = {key: error for key, (error, allowed) in errors.items() if error > allowed}
    assert not bad, f"{harness.family}: {bad}"


# --- writes --------------------------------------------------------------------------------------
def test_steering_matches_eager(harness: Harness) -> None:
    errors = steering_errors(harness)
    assert errors, "no writable site"
    bad = {key: error for key, (error, allowed) in errors.items() if error > allowed}
    assert not bad, f"{harness.family}: {bad}"


# --- coverage ------------------------------------------------------------------------------------
def test_every_point_is_served_or_refused(harness: Harness) -> None:
    sites, refused = harness.resolution.sites, harness.resolution.refused
    for name, layer in _present(harness.facts):
        key = ("_q_rot", layer) if name in RECOMPUTED else (name, layer)
        assert key in sites or name in refused, (harness.family, name, layer)
    for name, why in refused.items():
        _assert_sentence(name, why)
    # The support table (what the docs matrix and supports() say without an engine) must name
    # exactly these gaps.
    declared = family_support(harness.facts.model_type).refused
    assert set(refused) == set(declared), (harness.family, sorted(refused), sorted(declared))
    for key, site in sites.items():
        if site.add is None:
            _assert_sentence(_label(*key), site.refusal)


def _assert_sentence(name: str, why: str | None) -> None:
    # One clause-like sentence, as the registry's absence reasons are: words, no trailing dot.
    assert why is not None and why.strip() == why and len(why.split()) >= 6, (name, why)
    assert why[0].isalnum() and not why.endswith("."), (name, why)
