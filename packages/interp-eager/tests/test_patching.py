"""Patches, ablations, sweeps and attribution patching on eager, against hand-written HF hooks.

The tiny Llama family is grouped-query (4 query heads, 2 kv heads), so a kv-head patch at
`value` is checked by its own kv head index. Every reference edits the HF model's tensors with
its own hooks (eager_helpers finds the modules test-side) and never uses the backend's writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
import torch
from eager_helpers import decoder_layers, forward_hook, hf_logits, model

from interp_core import Ablation, LogitDiff, Patch, load_model, patch_from
from interp_core.errors import SteeringSpecError
from interp_testmodels.families import build_family
from interp_torch.patching import attribution_patch, patch_sweep

CLEAN = "the cat sat on the mat today"
CORRUPT = "the dog ran in the park today"
OTHER = "the man sat in the car today"
TOL = 1e-5


@pytest.fixture(scope="module")
def llama() -> Any:
    return model("llama")


@pytest.fixture(scope="module")
def prompts(llama: Any) -> tuple[torch.Tensor, torch.Tensor]:
    clean, corrupt = llama.to_tokens(CLEAN), llama.to_tokens(CORRUPT)
    assert clean.shape == corrupt.shape
    return clean, corrupt


def _pre_hook(module: torch.nn.Module, edit: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Replace the module's first positional input by `edit(input)` (a hand-written patch)."""

    def hook(_: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:
            return (edit(args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": edit(kwargs["hidden_states"])}

    return module.register_forward_pre_hook(hook, with_kwargs=True)


@contextmanager
def _hand_patch(hf: torch.nn.Module, where: str, layer: int, edit: Any) -> Iterator[None]:
    block = decoder_layers(hf)[layer]
    with ExitStack() as stack:
        if where == "resid_pre":
            handle = _pre_hook(block, edit)
            stack.callback(handle.remove)
        elif where == "z":
            handle = _pre_hook(block.self_attn.o_proj, edit)
            stack.callback(handle.remove)
        elif where == "value":
            stack.enter_context(forward_hook(block.self_attn.v_proj, lambda m, i, o: edit(o)))
        elif where == "mlp_act":
            handle = _pre_hook(block.mlp.down_proj, edit)
            stack.callback(handle.remove)
        yield


def _set(positions: list[int], channels: slice, values: torch.Tensor) -> Any:
    def edit(h: torch.Tensor) -> torch.Tensor:
        h = h.clone()
        for row, position in enumerate(positions):
            h[:, position, channels] = values[row].to(h.dtype)
        return h

    return edit


def _answers(clean: torch.Tensor, corrupt: torch.Tensor) -> tuple[int, int]:
    """Two tokens where the prompts differ ("cat" vs "dog"): the logit difference's pair."""
    correct, incorrect = int(clean[0, 3]), int(corrupt[0, 3])
    assert correct != incorrect
    return correct, incorrect


def _logits(m: Any, ids: torch.Tensor, steering: Any) -> torch.Tensor:
    return m.run_with_cache(ids, ["lm_head"], steering=steering)["lm_head"]


def test_patch_from_a_cache_equals_a_hand_hook(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    cache = llama.run_with_cache(clean, ["resid_pre.1"])
    ours = _logits(llama, corrupt, patch_from(cache, "resid_pre.1", [2, 4]))
    rows = cache["resid_pre.1"][0, [2, 4]]
    with _hand_patch(llama.hf_model, "resid_pre", 1, _set([2, 4], slice(None), rows)):
        theirs = hf_logits(llama.hf_model, corrupt)
    assert (ours - theirs).abs().max() < TOL
    assert (ours - _logits(llama, corrupt, None)).abs().max() > 1e-3  # the patch did something


def test_a_kv_head_patch_uses_the_kv_head_index(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    facts = llama.facts
    assert facts.n_kv_heads < facts.n_heads  # grouped-query: the test means something
    hd = facts.head_dim
    cache = llama.run_with_cache(clean, ["value.0"])
    patch = patch_from(cache, "value.0", heads=[1])  # kv head 1, every position
    ours = _logits(llama, corrupt, patch)
    values = cache["value.0"][0, :, hd : 2 * hd]
    seq = list(range(clean.shape[1]))
    with _hand_patch(llama.hf_model, "value", 0, _set(seq, slice(hd, 2 * hd), values)):
        theirs = hf_logits(llama.hf_model, corrupt)
    assert (ours - theirs).abs().max() < TOL
    with pytest.raises(SteeringSpecError, match="has 2 kv heads"):
        _logits(llama, corrupt, patch_from(cache, "value.0", heads=[2]))


def test_ablations_equal_hand_hooks(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    d_mlp = llama.facts.d_mlp
    seq = list(range(clean.shape[1]))
    # zero: two neurons of mlp_act, at every position
    ours = _logits(llama, corrupt, Ablation("mlp_act.1", neurons=[3, 7]))
    hand = _set(seq, [3, 7], torch.zeros(len(seq), 2))  # type: ignore[arg-type]
    with _hand_patch(llama.hf_model, "mlp_act", 1, hand):
        theirs = hf_logits(llama.hf_model, corrupt)
    assert (ours - theirs).abs().max() < TOL
    # mean over a reference batch, per position (TransformerLens's mean ablation)
    reference = llama.run_with_cache(torch.cat([clean, corrupt]), ["mlp_act.0"])["mlp_act.0"]
    mean = reference.mean(0)
    ours = _logits(llama, corrupt, Ablation("mlp_act.0", kind="mean", mean=mean))
    with _hand_patch(llama.hf_model, "mlp_act", 0, _set(seq, slice(0, d_mlp), mean)):
        theirs = hf_logits(llama.hf_model, corrupt)
    assert (ours - theirs).abs().max() < TOL
    # resample: another prompt's heads at z, positions 1 and 3
    source = llama.run_with_cache(clean, ["z.1"])
    hd = llama.facts.head_dim
    ablation = Ablation("z.1", kind="resample", source=source, positions=[1, 3], heads=[0, 2])
    ours = _logits(llama, corrupt, ablation)
    z = source["z.1"][0, [1, 3]]
    with ExitStack() as stack:
        for head in (0, 2):
            cut = slice(head * hd, (head + 1) * hd)
            stack.enter_context(_hand_patch(llama.hf_model, "z", 1, _set([1, 3], cut, z[:, cut])))
        theirs = hf_logits(llama.hf_model, corrupt)
    assert (ours - theirs).abs().max() < TOL


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        (lambda m: Patch("resid_pre.0", torch.ones(1, m.d_model + 1), [0]), "elements"),
        (lambda m: Patch("resid_pre.0", torch.ones(1, m.d_model), [99]), "lie beyond"),
        (lambda m: Patch("z.0", torch.ones(1, 1, m.facts.head_dim), [0], heads=[9]), "4 heads"),
        (lambda m: Patch("resid_pre.0", torch.ones(1, 1, 4), [0], heads=[0]), "no head axis"),
        (lambda m: Patch("z.0", torch.ones(1, 1, 3), [0], heads=[0]), "heads 3 wide"),
        (lambda m: Ablation("mlp_act.0", neurons=[10**6]), "writes neurons"),
        (lambda m: Ablation("resid_pre.0", kind="mean"), "needs mean"),
    ],
)
def test_a_malformed_patch_is_refused_naming_the_fix(
    llama: Any, prompts: Any, patch: Any, words: str
) -> None:
    with pytest.raises(SteeringSpecError, match=words):
        _logits(llama, prompts[1], patch(llama))


def test_the_residual_sweep_equals_hand_patches(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    correct, incorrect = _answers(clean, corrupt)
    metric = LogitDiff(correct, incorrect, position=-2)
    grid = patch_sweep(llama, clean, corrupt, metric, point="resid_pre")
    seq = clean.shape[1]
    assert grid.shape == (llama.facts.n_layers, seq)
    assert float(grid.std()) > 1e-3  # the patches differ in effect
    cache = llama.run_with_cache(clean, [f"resid_pre.{layer}" for layer in range(2)])
    for layer in range(llama.facts.n_layers):
        for position in range(seq):
            row = cache[f"resid_pre.{layer}"][0, [position]]
            with _hand_patch(
                llama.hf_model, "resid_pre", layer, _set([position], slice(None), row)
            ):
                logits = hf_logits(llama.hf_model, corrupt)
            expected = float(logits[0, -2, correct] - logits[0, -2, incorrect])
            assert abs(float(grid[layer, position]) - expected) < 1e-4
    # A patch after the position the metric reads changes nothing there (causal masking).
    corrupt_metric = float(metric(_logits(llama, corrupt, None)))
    assert torch.allclose(grid[:, -1], torch.full((grid.shape[0],), corrupt_metric), atol=1e-5)


def test_the_head_sweep_equals_single_patches(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    metric = LogitDiff(*_answers(clean, corrupt))
    grid = patch_sweep(llama, clean, corrupt, metric, point="z", per="head")
    assert grid.shape == (llama.facts.n_layers, llama.facts.n_heads)
    cache = llama.run_with_cache(clean, ["z.1"])
    single = float(metric(_logits(llama, corrupt, patch_from(cache, "z.1", heads=[3]))))
    assert abs(float(grid[1, 3]) - single) < 1e-5


def test_attribution_patching_equals_the_formula_by_autograd(prompts: Any) -> None:
    clean, corrupt = prompts
    m = load_model(str(build_family("llama")), backend="eager", requires_grad=True)
    metric = LogitDiff(*_answers(clean, corrupt))
    ours = attribution_patch(m, clean, corrupt, metric, point="resid_pre")
    # By hand on HF: each block's input kept with its gradient at the corrupted run.
    hf = m.hf_model
    seen: dict[int, torch.Tensor] = {}

    def keep(layer: int) -> Callable[[torch.Tensor], torch.Tensor]:
        def edit(h: torch.Tensor) -> torch.Tensor:
            if h.requires_grad:
                h.retain_grad()
            seen[layer] = h
            return h

        return edit

    def inputs(ids: torch.Tensor, grad: bool) -> dict[int, torch.Tensor]:
        with ExitStack() as stack:
            for layer in range(m.facts.n_layers):
                stack.enter_context(_hand_patch(hf, "resid_pre", layer, keep(layer)))
            with torch.set_grad_enabled(grad):
                logits = hf(input_ids=ids, use_cache=False).logits
            if grad:
                metric(logits).backward()
        return dict(seen)

    clean_acts = {k: v.detach().clone() for k, v in inputs(clean, False).items()}
    corrupt_acts = inputs(corrupt, True)
    for layer, act in corrupt_acts.items():
        assert act.grad is not None
        expected = ((clean_acts[layer] - act.detach()) * act.grad)[0].sum(-1)
        assert torch.allclose(ours[layer], expected, atol=1e-5, rtol=1e-4)
    # At layer 0 (the embeddings) the runs differ only where the tokens do.
    same = (clean[0] == corrupt[0]).nonzero().flatten().tolist()
    assert same and bool((ours[0, same] == 0).all()) and bool((ours[0] != 0).any())


# --- per-row patches: each row of a batch carries its own ---------------------------------------
def _set_row(row: int, positions: list[int], channels: Any, values: torch.Tensor) -> Any:
    """A hand patch of one batch row (the others pass untouched)."""

    def edit(h: torch.Tensor) -> torch.Tensor:
        h = h.clone()
        for index, position in enumerate(positions):
            h[row, position, channels] = values[index].to(h.dtype)
        return h

    return edit


def _row_writes(cache: Any, other: Any, hd: int) -> list[Any]:
    """Different patches in rows 0 and 1: positions, values, kv heads, query heads, neurons."""
    return [
        patch_from(cache, "resid_pre.1", [2, 4], batch_rows=0),
        patch_from(other, "resid_pre.1", [1], batch_rows=1),
        patch_from(cache, "value.0", heads=[1], batch_rows=[0]),  # kv head 1 of 2 (GQA)
        patch_from(other, "z.1", [1, 3], heads=[0, 2], batch_rows=1),
        Ablation("mlp_act.1", neurons=[3, 7], positions=[5], batch_rows=1),
    ]


def test_each_row_of_a_batch_takes_its_own_patch(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    other = llama.to_tokens(OTHER)
    assert other.shape == clean.shape
    hd, seq = llama.facts.head_dim, clean.shape[1]
    points = ["resid_pre.1", "value.0", "z.1"]
    cache, source = llama.run_with_cache(clean, points), llama.run_with_cache(other, points)
    writes = _row_writes(cache, source, hd)
    batch = torch.cat([corrupt, clean])
    ours = _logits(llama, batch, writes)
    # By hand, on the HF model: each edit touches its own row of the batch.
    z = source["z.1"][0, [1, 3]]
    edits = [
        ("resid_pre", 1, _set_row(0, [2, 4], slice(None), cache["resid_pre.1"][0, [2, 4]])),
        ("resid_pre", 1, _set_row(1, [1], slice(None), source["resid_pre.1"][0, [1]])),
        (
            "value",
            0,
            _set_row(0, list(range(seq)), slice(hd, 2 * hd), cache["value.0"][0, :, hd : 2 * hd]),
        ),
        ("z", 1, _set_row(1, [1, 3], slice(0, hd), z[:, :hd])),
        ("z", 1, _set_row(1, [1, 3], slice(2 * hd, 3 * hd), z[:, 2 * hd : 3 * hd])),
        ("mlp_act", 1, _set_row(1, [5], [3, 7], torch.zeros(1, 2))),
    ]
    with ExitStack() as stack:
        for where, layer, edit in edits:
            stack.enter_context(_hand_patch(llama.hf_model, where, layer, edit))
        theirs = hf_logits(llama.hf_model, batch)
    assert (ours - theirs).abs().max() < TOL
    # Each row equals that row run alone with its own patches (the batch leaks nothing).
    for row, ids in enumerate((corrupt, clean)):
        own = [w for w in writes if row in w.batch_rows]
        alone = _logits(llama, ids, [_unrowed(w) for w in own])
        assert (ours[row] - alone[0]).abs().max() < TOL
        assert (alone - _logits(llama, ids, None)).abs().max() > 1e-3


def _unrowed(write: Any) -> Any:
    return dataclasses.replace(write, batch_rows=None)


def test_a_per_row_patch_past_the_batch_is_refused(llama: Any, prompts: Any) -> None:
    batch = torch.cat(prompts)
    patch = Patch("resid_pre.0", torch.zeros(llama.d_model), [1], batch_rows=[1, 2])
    with pytest.raises(SteeringSpecError, match=r"names batch rows \[2\].*runs 2 row"):
        _logits(llama, batch, patch)
    with pytest.raises(SteeringSpecError, match="batch row -1"):
        Patch("resid_pre.0", torch.zeros(llama.d_model), [1], batch_rows=-1)


def test_a_batched_sweep_equals_the_loop_of_single_patches(llama: Any, prompts: Any) -> None:
    clean, corrupt = prompts
    metric = LogitDiff(*_answers(clean, corrupt), position=-2)
    for point, per in (("resid_pre", "position"), ("z", "head")):
        batched = patch_sweep(llama, clean, corrupt, metric, point=point, per=per)
        chunked = patch_sweep(
            llama, clean, corrupt, metric, point=point, per=per, rows_per_forward=3
        )
        single = patch_sweep(
            llama, clean, corrupt, metric, point=point, per=per, rows_per_forward=1
        )
        assert float(single.std()) > 1e-3
        assert torch.allclose(batched, single, atol=1e-5, rtol=0)
        assert torch.allclose(chunked, single, atol=1e-5, rtol=0)
    with pytest.raises(SteeringSpecError, match="rows_per_forward=0"):
        patch_sweep(llama, clean, corrupt, metric, rows_per_forward=0)
