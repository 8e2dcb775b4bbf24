"""The feature dashboards job: per SAE feature, what Neuronpedia shows, streamed over a corpus.

For every feature of every SAE: the top-k activating tokens (each with its context's tokens and
the feature's activations on them), samples from equal activation intervals, firing density,
an activation histogram, max and mean activation, and the tokens whose logits the feature's
decoder row raises and lowers most (`W_dec[f] · W_U`, with their histogram over the vocabulary).
`write_neuronpedia_batches` writes them as the batch JSON Neuronpedia imports.

Two passes over the corpus, each a forward per batch followed by `SAE.encode` and the
reductions of `interp_sae.dashboard_reduce.FeaturePasses`. The first finds each feature's
totals and top tokens; the second bins activations and samples intervals, whose ranges are
defined by the first pass's minimum and maximum (the histogram spans [smallest firing value,
max], the intervals split (0, max] — sae-dashboard's definitions; a streaming job cannot know
them before it has seen the corpus once). Memory is bounded by the SAEs' width, never by the
corpus: no latent cache is kept. The model comes from `interp_core.load_model`. On a backend
with `worker_reductions` (vLLM's, both tiers) the passes run inside its workers, next to the
capture: the activations never leave them, only each pass's reductions do, once. Elsewhere the
activations are captured, encoded and reduced in this process, by the same `FeaturePasses`.

Where it differs from sae-dashboard's NeuronpediaRunner (so a comparison knows what to expect;
`tests/test_sae_dashboard_agreement.py` asserts each rule against it): it folds each decoder
row's norm into the encoder, so its activations are ours × ||W_dec[f]|| and its logit values ours
÷ it; its top examples are the top k of all tokens, padded with non-firing ones where fewer fire
(ours: firing tokens only); its intervals are closed, so the lowest holds every non-firing
token, and its shares and density divide by all tokens (ours: the tokens considered, ignored
ones left out); its samples are `random.sample` draws (ours: the k smallest keyed draws); its
runner loads the model with TransformerLens's weight processing, so its logit table ranks
`W_dec · (g ⊙ W_U)` centred over the vocabulary (ours: `W_dec · W_U`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp_core import sync
from interp_core.errors import CapabilityUnsupported, InvalidArgument, PointUnsupported
from interp_core.protocol import InterpModel
from interp_harvest.batches import context_batches, whole_contexts
from interp_harvest.corpus import Corpus
from interp_harvest.dashboards_plan import LOGIT_FEATURES
from interp_harvest.packing import PackingPolicy
from interp_harvest.plan import check_batch_size
from interp_harvest.progress import Progress

__all__ = [
    "DashboardSettings",
    "FeatureDashboards",
    "check_logit_tables",
    "harvest_dashboards",
    "ignored_token_ids",
    "load_saes",
]

# Rows of W_U fetched from the backend per call: bounded transfers for a large vocabulary.
_VOCAB_CHUNK = 8192


@dataclass(frozen=True)
class DashboardSettings:
    """What each dashboard holds (sae-dashboard's NeuronpediaRunner defaults)."""

    top_k: int = 20
    intervals: int = 5
    samples_per_interval: int = 5
    bins: int = 50
    logits: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("top_k", "intervals", "samples_per_interval", "bins", "logits"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                message = f"{name}={value!r}: pass a positive int"
                raise InvalidArgument(message)

    def passes(self) -> dict[str, int]:
        """The keywords of `FeaturePasses` (all but the logit tables' size)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "logits"}


# What a dashboard reads from its passes (`FeaturePasses`), by the same names.
_PASS_FIELDS = frozenset(
    {
        "contexts",
        "totals",
        "top",
        "samples",
        "interval_tokens",
        "histogram",
        "hist_low",
        "hist_high",
    }
)


@dataclass
class FeatureDashboards:
    """One SAE's dashboards over the harvested corpus: its two passes' reductions (`passes`,
    an `interp_sae.dashboard_reduce.FeaturePasses`, whose `totals`, `top`, `samples`,
    `interval_tokens`, `histogram`, `hist_low`, `hist_high` and `contexts` are read here by the
    same names) and its logit tables.

    `logit_top_ids/values` and `logit_bottom_ids/values` `[d_sae, logits]`: the largest and
    smallest entries of `W_dec[f] · W_U`; `logit_hist [d_sae, bins]` over `logit_low..high`.
    """

    sae: Any
    name: str
    context_size: int
    settings: DashboardSettings
    ignored: tuple[int, ...]
    passes: Any
    logit_top_ids: Any = None
    logit_top_values: Any = None
    logit_bottom_ids: Any = None
    logit_bottom_values: Any = None
    logit_hist: Any = None
    logit_low: Any = None
    logit_high: Any = None

    def __getattr__(self, name: str) -> Any:
        passes = self.__dict__.get("passes")
        if name in _PASS_FIELDS and passes is not None:
            return getattr(passes, name)
        message = f"{type(self).__name__!r} object has no attribute {name!r}"
        raise AttributeError(message)

    @property
    def d_sae(self) -> int:
        return int(self.sae.d_sae)


def ignored_token_ids(tokenizer: Any) -> tuple[int, ...]:
    """The tokenizer's BOS, EOS and padding ids: positions whose activations say nothing about
    the text (sae-dashboard leaves the same three out)."""
    ids = {getattr(tokenizer, f"{n}_token_id", None) for n in ("bos", "eos", "pad")}
    return tuple(sorted(i for i in ids if isinstance(i, int)))


def harvest_dashboards(
    model: InterpModel,
    data: str | os.PathLike[str] | Corpus,
    saes: Sequence[Any],
    *,
    tokens: int,
    context_size: int,
    settings: DashboardSettings | None = None,
    bos: str = "context",
    batch_size: int = 8,
    text_field: str = "text",
    ignore_token_ids: Sequence[int] | None = None,
    logits: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    resume: bool = False,
    checkpoint_seconds: float = 600.0,
    in_workers: bool | None = None,
) -> list[FeatureDashboards]:
    """Dashboards of every feature of each SAE (a path, or an `interp_sae.SAE`) over the first
    `tokens` tokens (whole contexts) of the corpus. `logits=False` leaves the logit tables out
    (needed for an SAE whose decoder does not write d_model-wide residual vectors).

    `in_workers`: where the features are encoded and reduced. A backend that can do it next to
    its capture (vLLM's workers: `worker_reductions`) keeps the activations there and sends back
    only the reductions; `None` (the default) does so wherever the backend can and every SAE was
    loaded from a folder (the workers load SAEs by path), `True` requires it, `False` captures
    the activations and reduces them in this process. Both give the same dashboards.

    `checkpoint` (a folder) saves the job's reductions there at most every
    `checkpoint_seconds`, at a batch boundary (`interp_harvest.dashboards_checkpoint`), and
    removes them once the job is done; `resume=True` continues a killed job from them, with the
    same result as an uninterrupted run. A checkpoint left there is never silently overwritten:
    without `resume` it is refused."""
    from interp_sae.dashboard_reduce import FeaturePasses

    settings = settings or DashboardSettings()
    check_batch_size(batch_size)
    corpus = data if isinstance(data, Corpus) else Corpus(data, text_field=text_field)
    loaded = load_saes(saes)
    for name, sae in loaded:
        verdict = model.supports(sae.address)
        if not verdict:
            message = f"{name} reads {sae.address}, which {model.backend_name} cannot capture: "
            raise PointUnsupported(message + verdict.explain())
    check_logit_tables(loaded, int(model.d_model), logits)
    reduce = _reducer(model, loaded, in_workers)
    contexts_wanted = whole_contexts(tokens, context_size)
    policy = PackingPolicy(context_size, bos, getattr(model.tokenizer, "bos_token_id", None))
    ignored = (
        tuple(sorted(set(ignore_token_ids)))
        if ignore_token_ids is not None
        else ignored_token_ids(model.tokenizer)
    )
    results = [
        FeatureDashboards(
            sae=sae,
            name=name,
            context_size=context_size,
            settings=settings,
            ignored=ignored,
            passes=FeaturePasses(int(sae.d_sae), context_size, **settings.passes()),
        )
        for name, sae in loaded
    ]
    job = {
        "model": model.model_id,
        "backend": model.backend_name,
        "corpus": str(corpus.path),
        "tokens": tokens,
        "context_size": context_size,
        "batch_size": batch_size,
        "bos": bos,
        "ignored": list(ignored),
        "settings": dataclasses.asdict(settings),
        "saes": [[name, str(sae.address), int(sae.d_sae), str(sae.source)] for name, sae in loaded],
    }
    keeper, phase, done = _checkpoint(checkpoint, resume, checkpoint_seconds, job, results)
    batches = _Batches(model, corpus, policy, contexts_wanted, batch_size, on_progress)
    run = reduce(batches, results, keeper)
    if phase == 0:
        run(0, done)
        if not results[0].contexts:
            message = (
                f"the corpus {str(corpus.path)!r} packs into no context of {context_size} tokens"
            )
            raise InvalidArgument(message)
        for result in results:
            result.passes.start_second()
        done = 0
    run(1, done)
    if logits:
        _logit_tables(model, results)
    if keeper is not None:
        keeper.clear()
    return results


def _reducer(model: Any, saes: list[tuple[str, Any]], in_workers: bool | None) -> Any:
    """`_in_this_process` or `_in_workers`, as `in_workers` asks and the backend can."""
    offered = getattr(model, "worker_reductions", None) is not None
    unsourced = [name for name, sae in saes if not sae.source]
    if in_workers is None:
        return _in_workers if offered and not unsourced else _in_this_process
    if not in_workers:
        return _in_this_process
    if not offered:
        error = CapabilityUnsupported.build(
            f"in_workers=True on {model.backend_name}",
            "this backend cannot encode and reduce features next to its capture",
            "pass in_workers=None or False (reduced in this process), or load with "
            "backend='vllm' or 'vllm-static'",
        )
        raise error
    if unsourced:
        error = CapabilityUnsupported.build(
            f"in_workers=True with {', '.join(unsourced)}",
            "the workers load SAEs by path, and these were not loaded from a folder",
            "save them and pass their folders, or pass in_workers=False",
        )
        raise error
    return _in_workers


def _pass_part(phase: int) -> str:
    """The part of `FeaturePasses.state` a pass builds."""
    return "first" if phase == 0 else "second"


def _in_this_process(batches: _Batches, results: list[FeatureDashboards], keeper: Any) -> Any:
    """Each batch captured at the SAEs' points, encoded and reduced here."""
    import torch
    from interp_sae.dashboard_reduce import encode_batch

    model = batches.model
    points = list(dict.fromkeys(r.sae.address for r in results))
    ignored = torch.tensor(results[0].ignored, dtype=torch.long)

    def run(phase: int, done: int) -> None:
        for first, ids in batches.contexts(phase, done):
            cache = sync.capture(model, ids, points)
            for result in results:
                acts, keep = encode_batch(result.sae, cache[result.sae.address], ids, ignored)
                result.passes.add(phase, acts, ids, keep, first)
            if keeper is not None and keeper.due():
                keeper.save(phase, first + ids.shape[0], results)

    return run


def _in_workers(batches: _Batches, results: list[FeatureDashboards], keeper: Any) -> Any:
    """Each batch sent to the backend's workers, which capture, encode and reduce it there; the
    reductions come back at the end of a pass (and for each checkpoint)."""
    model = batches.model
    reductions = model.worker_reductions
    first = results[0]
    opening = {
        "context_size": first.context_size,
        "passes": first.settings.passes(),
        "ignored": list(first.ignored),
    }
    saes = [
        {"path": str(r.sae.source), "address": str(r.sae.address)}
        | ({"write_address": str(r.sae.write_address)} if r.sae.write_address else {})
        for r in results
    ]

    def pull(session: str, phase: int) -> None:
        part = _pass_part(phase)
        states = sync.run(model, lambda: reductions.state(session, part))
        for result, state in zip(results, states, strict=True):
            result.passes.load(state, part)

    def run(phase: int, done: int) -> None:
        # What a worker starts the pass from: a resumed pass's state, and before the second
        # pass the first one's totals (its ranges come from them).
        states: list[dict[str, Any]] = []
        for result in results:
            held = {"totals": result.passes.state("totals")} if phase == 1 else {}
            if done:
                held[_pass_part(phase)] = result.passes.state(_pass_part(phase))
            states.append(held)
        session = sync.run(
            model, lambda: reductions.open(saes, phase=phase, states=states, **opening)
        )
        try:
            for start, ids in batches.contexts(phase, done):
                sync.run(model, lambda: reductions.add(session, ids, start))  # noqa: B023
                if keeper is not None and keeper.due():
                    pull(session, phase)
                    keeper.save(phase, start + ids.shape[0], results)
            pull(session, phase)
        finally:
            sync.run(model, lambda: reductions.close(session))

    return run


def _checkpoint(
    folder: Any, resume: bool, every: float, job: dict[str, Any], results: list[Any]
) -> tuple[Any, int, int]:
    """The job's checkpoint (None without a folder), and the pass and contexts to start from."""
    from interp_harvest.dashboards_checkpoint import Checkpoint

    if folder is None:
        if resume:
            message = "resume=True continues from a checkpoint: pass checkpoint= (its folder)"
            raise InvalidArgument(message)
        return None, 0, 0
    keeper = Checkpoint(Path(folder), job, every=every)
    if not keeper.exists():
        return keeper, 0, 0
    if not resume:
        message = (
            f"{str(keeper.path)!r} holds the state of a job that did not finish; pass "
            f"resume=True (--resume) to continue it, or remove the file to start over"
        )
        raise InvalidArgument(message)
    phase, done = keeper.restore(results)
    return keeper, phase, done


def check_logit_tables(saes: list[tuple[str, Any]], d_model: int, logits: bool) -> None:
    """Refuse logit tables for an SAE whose decoder does not write the residual W_U reads."""
    for name, sae in saes:
        if logits and sae.d_out != d_model:
            error = CapabilityUnsupported.build(
                f"the logit tables of {name} need W_dec[f] · W_U",
                f"its decoder writes {sae.d_out}-wide vectors at {sae.write_address}, not the "
                f"{d_model}-wide residual the unembedding reads",
                "pass logits=False (--no-logits) for the rest of the dashboard",
            )
            raise error


def load_saes(saes: Sequence[Any]) -> list[tuple[str, Any]]:
    """Each SAE (a folder, or an `interp_sae.SAE`) with the name its output folder takes."""
    from interp_sae import SAE, load_sae

    if isinstance(saes, (str, os.PathLike, SAE)):
        saes = [saes]
    if not saes:
        message = "no SAE given; pass one or more SAE folders (--sae PATH)"
        raise InvalidArgument(message)
    loaded: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for item in saes:
        sae = item if isinstance(item, SAE) else load_sae(item)
        base = Path(sae.source).name if sae.source else f"{sae.address}"
        name, n = base or "sae", 1
        while name in seen:  # two folders with one name (layer-6/sae, layer-8/sae)
            n += 1
            name = f"{base}-{n}"
        seen.add(name)
        loaded.append((name, sae))
    return loaded


@dataclass
class _Batches:
    """The corpus as forward batches of packed contexts: (index of the first, ids)."""

    model: Any
    corpus: Corpus
    policy: PackingPolicy
    contexts_wanted: int
    batch_size: int
    on_progress: Callable[[Progress], None] | None

    def contexts(self, which: int, skip_before: int = 0) -> Any:
        return context_batches(
            self.model.tokenizer,
            self.corpus,
            self.policy,
            self.contexts_wanted,
            self.batch_size,
            self.on_progress,
            phase=which,
            phases=2,
            skip_before=skip_before,
        )


def _logit_tables(model: Any, results: list[FeatureDashboards]) -> None:
    """`W_dec[f] · W_U` per feature: top and bottom tokens and the histogram over the vocabulary.

    W_U is fetched once in row chunks and held as float32 `[vocab, d_model]` (the size of one
    weight matrix of the model, whatever the corpus); the logits of a few hundred features at a
    time are held over the whole vocabulary."""
    import torch
    from interp_sae.dashboard_reduce import histogram_counts, histogram_range

    vocab = model.facts.vocab_size
    chunks = [
        sync.unembed_rows(model, list(range(start, min(start + _VOCAB_CHUNK, vocab))))
        for start in range(0, vocab, _VOCAB_CHUNK)
    ]
    unembedding = torch.cat([c.detach().to("cpu", torch.float32) for c in chunks])
    for result in results:
        n, bins = result.settings.logits, result.settings.bins
        n = min(n, vocab)
        decoder = result.sae.W_dec.detach().to("cpu", torch.float32)
        parts: dict[str, list[Any]] = {k: [] for k in ("ti", "tv", "bi", "bv", "h", "lo", "hi")}
        for start in range(0, result.d_sae, LOGIT_FEATURES):
            logits = decoder[start : start + LOGIT_FEATURES] @ unembedding.T
            top, bottom = logits.topk(n, dim=1), logits.topk(n, dim=1, largest=False)
            low, high = histogram_range(logits.min(1).values, logits.max(1).values)
            parts["h"].append(histogram_counts(logits.T, None, low, high, bins))
            for key, value in (
                ("ti", top.indices),
                ("tv", top.values),
                ("bi", bottom.indices),
                ("bv", bottom.values),
                ("lo", low),
                ("hi", high),
            ):
                parts[key].append(value)
        joined = {k: torch.cat(v) for k, v in parts.items()}
        result.logit_top_ids, result.logit_top_values = joined["ti"], joined["tv"]
        result.logit_bottom_ids, result.logit_bottom_values = joined["bi"], joined["bv"]
        result.logit_hist, result.logit_low, result.logit_high = (
            joined["h"],
            joined["lo"],
            joined["hi"],
        )
