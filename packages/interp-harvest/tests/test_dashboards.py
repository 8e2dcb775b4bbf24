"""The dashboards job on the eager backend: every per-feature statistic equals a brute-force
computation over all tokens at once (eager captures + `SAE.encode`): the same top-k token ids,
values within 1e-5, the same histogram and interval counts, the same sampled tokens, the same
logit tables as `W_dec · W_U` from the HF weights; and the Neuronpedia batch JSON says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from dashboard_helpers import brute_force_acts, write_sae
from interp_harvest import Corpus, PackingPolicy, pack, tokenizer_encoder
from interp_harvest.dashboards import DashboardSettings, harvest_dashboards
from interp_harvest.neuronpedia_batch import token_strings, write_dashboards
from interp_sae.dashboard_reduce import sample_keys

from interp_core.errors import CapabilityUnsupported, InvalidArgument

CONTEXTS, SIZE, D_SAE = 9, 16, 48
SETTINGS = DashboardSettings(
    top_k=6, intervals=3, samples_per_interval=2, bins=12, logits=4, seed=7
)


@pytest.fixture(scope="module")
def sae_folder(eager_model: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("saes")
    return write_sae(
        root / "res-1", d_in=eager_model.d_model, d_sae=D_SAE, hook_name="blocks.1.hook_resid_post"
    )


def _dashboards(model: Any, corpus: Path, sae: Path, **options: Any) -> Any:
    """The job every test here compares: CONTEXTS contexts in batches of 4 + 4 + 1 (unequal)."""
    settings = options.pop("settings", SETTINGS)
    (result,) = harvest_dashboards(
        model,
        corpus,
        [sae],
        tokens=CONTEXTS * SIZE + 3,
        context_size=SIZE,
        settings=settings,
        batch_size=4,
        **options,
    )
    return result


@pytest.fixture(scope="module")
def job(eager_model: Any, corpus_file: Path, sae_folder: Path) -> Any:
    return _dashboards(eager_model, corpus_file, sae_folder)


@pytest.fixture(scope="module")
def brute(eager_model: Any, corpus_file: Path, job: Any) -> dict[str, Any]:
    policy = PackingPolicy(SIZE, "context", eager_model.tokenizer.bos_token_id)
    contexts = [
        c.tokens
        for c in pack(
            Corpus(corpus_file),
            tokenizer_encoder(eager_model.tokenizer),
            policy,
            max_contexts=CONTEXTS,
        )
    ]
    acts, keep = brute_force_acts(eager_model, job.sae, contexts, job.ignored)
    return {"contexts": contexts, "acts": acts, "keep": keep, "flat": acts.reshape(-1, D_SAE)}


def test_totals_and_top_examples_equal_brute_force(job: Any, brute: dict[str, Any]) -> None:
    flat, ids = brute["flat"], torch.tensor(brute["contexts"])
    assert job.contexts == CONTEXTS
    assert job.totals.tokens == int(brute["keep"].sum()) < CONTEXTS * SIZE  # BOS left out
    fired = (flat > 0).sum(0)
    assert 0 < int(fired.min()) and int(fired.max()) < flat.shape[0]  # not trivial features
    assert torch.equal(job.totals.fired, fired)
    assert float((job.totals.max - flat.max(0).values).abs().max()) <= 1e-5
    mean = flat.double().sum(0) / fired
    assert float((job.totals.mean_when_firing - mean).abs().max()) <= 1e-5
    for f in range(D_SAE):
        column = flat[:, f]
        order = torch.argsort(column, descending=True, stable=True)[: SETTINGS.top_k]
        order = order[column[order] > 0]
        entries = job.top.entries(f)
        assert [e[1] for e in entries] == order.tolist()
        for (score, token, values, window_ids), want in zip(entries, order, strict=True):
            assert abs(score - float(column[want])) <= 1e-5
            context = token // SIZE
            assert torch.equal(window_ids.long(), ids[context])
            assert float((values - brute["acts"][context, :, f]).abs().max()) <= 1e-5


def test_histograms_intervals_and_samples_equal_brute_force(
    job: Any, brute: dict[str, Any]
) -> None:
    flat = brute["flat"]
    keys = sample_keys(SETTINGS.seed, 0, CONTEXTS, SIZE)
    n = SETTINGS.intervals
    for f in range(D_SAE):
        firing = flat[:, f][flat[:, f] > 0]
        assert torch.equal(
            job.histogram[f], torch.histc(firing, bins=SETTINGS.bins).to(torch.int64)
        )
        assert float(job.hist_low[f]) == float(firing.min())
        maximum = float(flat[:, f].max())
        slot = (flat[:, f].double() / maximum * n).long().clamp(max=n - 1)
        for j in range(n):
            inside = (flat[:, f] > 0) & (slot == j)
            assert int(job.interval_tokens[j, f]) == int(inside.sum())
            candidates = torch.nonzero(inside).flatten()
            chosen = candidates[torch.argsort(keys[candidates], stable=True)]
            chosen = chosen[: SETTINGS.samples_per_interval]
            assert [e[1] for e in job.samples[j].entries(f)] == chosen.tolist()
    assert int(job.interval_tokens.sum()) == int((flat > 0).sum())


def test_logit_tables_equal_w_dec_times_w_u(model_path: str, job: Any) -> None:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    logits = job.sae.W_dec.float() @ hf.lm_head.weight.detach().T
    top = logits.topk(SETTINGS.logits, dim=1)
    bottom = logits.topk(SETTINGS.logits, dim=1, largest=False)
    assert torch.equal(job.logit_top_ids, top.indices)
    assert torch.equal(job.logit_bottom_ids, bottom.indices)
    assert float((job.logit_top_values - top.values).abs().max()) <= 1e-5
    for f in range(D_SAE):
        want = torch.histc(logits[f], bins=SETTINGS.bins).to(torch.int64)
        assert torch.equal(job.logit_hist[f], want)


def test_neuronpedia_batches(eager_model: Any, job: Any, tmp_path: Path) -> None:
    summary = write_dashboards(
        [job], tmp_path, eager_model.tokenizer, model_id="tiny", features_per_batch=20
    )
    folder = tmp_path / "res-1"
    assert summary["saes"][0]["batches"] == ["batch-0.json", "batch-1.json", "batch-2.json"]
    batches = [json.loads((folder / f"batch-{i}.json").read_text()) for i in range(3)]
    assert [len(b["features"]) for b in batches] == [20, 20, 8]
    assert batches[0]["layer"] == 1 and batches[0]["sae_set"] == "res-1"
    record = batches[1]["features"][3]
    f = 23
    assert record["feature_index"] == f
    assert record["n_prompts_total"] == CONTEXTS and record["n_tokens_in_prompt"] == SIZE
    assert record["frac_nonzero"] == pytest.approx(float(job.totals.density[f]))
    assert record["freq_hist_data_bar_heights"] == job.histogram[f].tolist()
    strings = token_strings(eager_model.tokenizer)
    assert record["pos_str"] == strings(job.logit_top_ids[f].tolist())
    tops = [a for a in record["activations"] if a["bin_contains"] == -1]
    first_score, token, _, ids = job.top.entries(f)[0]
    # the window drops the context's leading BOS; the qualifying index counts from there
    assert tops[0]["tokens"] == strings(ids.tolist()[1:])
    assert tops[0]["qualifying_token_index"] == token % SIZE - 1
    assert tops[0]["values"][token % SIZE - 1] == round(first_score, 3)
    assert tops[0]["bin_max"] == round(float(job.totals.max[f]), 3)
    samples = [a for a in record["activations"] if a["bin_contains"] != -1]
    assert len(samples) == sum(len(s.entries(f)) for s in job.samples)
    assert samples[0]["bin_min"] >= samples[-1]["bin_min"]  # highest interval first
    from safetensors.torch import load_file

    stats = load_file(str(folder / "statistics.safetensors"))
    assert torch.equal(stats["fired"], job.totals.fired)


def test_a_decoder_that_is_not_residual_wide_is_refused_for_logits(
    eager_model: Any, corpus_file: Path, tmp_path: Path
) -> None:
    d_mlp = eager_model.facts.d_mlp
    folder = write_sae(tmp_path / "post", d_in=d_mlp, d_sae=8, hook_name="blocks.0.mlp.hook_post")
    with pytest.raises(CapabilityUnsupported, match=r"logits=False"):
        harvest_dashboards(eager_model, corpus_file, [folder], tokens=32, context_size=SIZE)
    (result,) = harvest_dashboards(
        eager_model, corpus_file, [folder], tokens=32, context_size=SIZE, logits=False
    )
    assert result.logit_top_ids is None and result.contexts == 2


def test_the_cli_writes_the_same_dashboards(
    model_path: str, corpus_file: Path, sae_folder: Path, job: Any, tmp_path: Path
) -> None:
    from interp_core.cli import main

    out = tmp_path / "dash"
    args = ["harvest", "dashboards", model_path, "--data", str(corpus_file), "--sae"]
    args += [str(sae_folder), "--tokens", str(CONTEXTS * SIZE), "--context-size", str(SIZE)]
    args += ["--out", str(out), "--backend", "eager", "--batch-size", "2", "--top-k", "6"]
    args += ["--intervals", "3", "--samples-per-interval", "2", "--bins", "12", "--logits", "4"]
    args += ["--seed", "7", "--model-id", "tiny-llama", "--sae-set", "res-jb", "--no-progress"]
    assert main(args) == 0
    batch = json.loads((out / "res-1" / "batch-0.json").read_text())
    assert batch["model_id"] == "tiny-llama" and batch["sae_set"] == "res-jb"
    assert len(batch["features"]) == D_SAE  # one batch of 128 holds them all
    # another batching of the same contexts: the same dashboards
    for f in (0, 17, D_SAE - 1):
        record = batch["features"][f]
        assert record["freq_hist_data_bar_heights"] == job.histogram[f].tolist()
        tops = [a for a in record["activations"] if a["bin_contains"] == -1]
        assert [a["qualifying_token_index"] + 1 for a in tops] == [
            e[1] % SIZE for e in job.top.entries(f)
        ]


def test_the_dry_run_prices_what_the_job_holds_and_loads_no_model(
    model_path: str,
    corpus_file: Path,
    sae_folder: Path,
    job: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from interp_harvest.dashboards_plan import DashboardsPlan

    from interp_core.cli import main

    # The plan's held bytes are those of the tensors the job allocated.
    plan = DashboardsPlan(((job.name, "x", D_SAE),), CONTEXTS, SIZE, 4, SETTINGS, None)
    selections = [job.top, *job.samples]
    examples = sum(t.nbytes for s in selections for t in (s.score, s.token, s.values, s.ids))
    totals = job.totals
    counts = sum(t.nbytes for t in (totals.fired, totals.total, totals.max, totals.min_fired))
    counts += job.histogram.nbytes + job.interval_tokens.nbytes
    assert (plan.examples_bytes(D_SAE), plan.counts_bytes(D_SAE)) == (examples, counts)

    def no_model(*_: Any, **__: Any) -> Any:
        raise AssertionError("a dry run loaded the model")

    monkeypatch.setattr("interp_core.load_model", no_model)
    args = ["harvest", "dashboards", model_path, "--data", str(corpus_file), "--sae"]
    args += [str(sae_folder), "--tokens", str(CONTEXTS * SIZE + 3), "--context-size", str(SIZE)]
    args += ["--out", str(Path(model_path) / "unused"), "--batch-size", "4", "--top-k", "6"]
    args += ["--intervals", "3", "--samples-per-interval", "2", "--bins", "12", "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{CONTEXTS * SIZE:,} tokens = {CONTEXTS} contexts x {SIZE} tokens" in out
    assert "two passes, 6 forwards of up to 4 contexts" in out
    assert f"res-1 (resid_post.1): {D_SAE} features" in out and "1 batch file\n" in out
    assert not (Path(model_path) / "unused").exists()
    # the sizer's price: the job as it runs (4 contexts at once, the SAE's point captured), its
    # time for the two passes' tokens
    from interp_harvest.gpu_price import _duration

    from interp_sizer import size

    fit = size(
        model_path,
        backend="vllm",
        capture=("resid_post.1",),
        concurrency=4,
        max_model_len=SIZE,
        prompt_tokens=SIZE,
        hub=False,
    ).selected
    rate = fit.throughput.prefill_tokens_per_s
    assert f"on {fit.gpu.name} (backend vllm, priced by interp-sizer): fits" in out
    assert f"about {_duration(2 * CONTEXTS * SIZE / rate)} (" in out
    assert f"at the roofline's {rate:,.0f} prefill tokens/s over 2 passes" in out


class _Killed(Exception):
    pass


@pytest.mark.parametrize("phase", [0, 1])
def test_a_run_killed_mid_pass_resumes_to_the_same_dashboards(
    eager_model: Any, corpus_file: Path, sae_folder: Path, job: Any, tmp_path: Path, phase: int
) -> None:
    kept = tmp_path / "state"

    def run(settings: DashboardSettings = SETTINGS, **options: Any) -> Any:
        # a save after every batch
        return _dashboards(
            eager_model,
            corpus_file,
            sae_folder,
            settings=settings,
            checkpoint=kept,
            checkpoint_seconds=0,
            **options,
        )

    def kill_after_two(progress: Any) -> None:
        if progress.shard == phase and progress.tokens_done >= 8 * SIZE:
            raise _Killed

    with pytest.raises(_Killed):
        run(on_progress=kill_after_two)
    assert (kept / "dashboards-checkpoint.safetensors").is_file()
    with pytest.raises(InvalidArgument, match="did not finish; pass resume=True"):
        run()
    other = DashboardSettings(**{**SETTINGS.__dict__, "seed": SETTINGS.seed + 1})
    with pytest.raises(InvalidArgument, match=r"another job .*settings"):
        run(other, resume=True)
    seen: list[Any] = []
    resumed = run(resume=True, on_progress=seen.append)
    assert not (kept / "dashboards-checkpoint.safetensors").exists()
    # the batches reduced before the kill were not run again
    assert seen[0].tokens_this_run < seen[0].tokens_done or seen[0].shard > 0
    for name in ("score", "token", "values", "ids"):
        assert torch.equal(getattr(resumed.top, name), getattr(job.top, name)), name
        for mine, theirs in zip(resumed.samples, job.samples, strict=True):
            assert torch.equal(getattr(mine, name), getattr(theirs, name)), name
    for name in ("fired", "total", "max", "min_fired"):
        assert torch.equal(getattr(resumed.totals, name), getattr(job.totals, name)), name
    assert resumed.totals.tokens == job.totals.tokens and resumed.contexts == job.contexts
    assert torch.equal(resumed.histogram, job.histogram)
    assert torch.equal(resumed.interval_tokens, job.interval_tokens)
    assert torch.equal(resumed.logit_top_ids, job.logit_top_ids)
