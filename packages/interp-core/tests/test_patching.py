"""Patches and ablations in pure Python: what they expand into, and what they refuse.

A patch is no new kind of write: it becomes `set` specs (one per position) that the admission
step checks against the model and the call, that travel in the one wire form, and whose float64
reference arithmetic (`apply_reference`) sets exactly the listed channels.
"""

from __future__ import annotations

import json

import pytest

from interp_core import Ablation, LogitDiff, Patch, patch_from
from interp_core.cache import ActivationCache
from interp_core.errors import SteeringSpecError
from interp_core.facts import ModelFacts
from interp_core.steering import SteeringSpec, apply_reference
from interp_core.write_positions import deepest_cover
from interp_core.writes import admit_writes, spec_from_wire, spec_to_wire

# 4 query heads, 2 kv heads of 16: grouped-query, so kv heads count apart from query heads.
FACTS = ModelFacts.from_config(
    {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 96,
        "vocab_size": 100,
    }
)


def _row(width: int, seed: float = 0.0) -> list[float]:
    return [seed + i / 8 for i in range(width)]


def test_a_patch_becomes_one_set_spec_per_position_and_sets_the_row() -> None:
    values = [_row(64, 1.0), _row(64, 2.0)]
    specs = Patch("resid_pre.1", values, positions=[2, 5]).to_specs(FACTS)
    assert [(s.op, s.positions, s.channels) for s in specs] == [
        ("set", (2,), None),
        ("set", (5,), None),
    ]
    h = _row(64, -3.0)
    assert apply_reference(specs, h, 5) == values[1]
    assert apply_reference(specs, h, 3) == h  # a position no patch lists is untouched
    # One spec per position: a backend applying writes level by level needs one level for all.
    assert deepest_cover(specs) == 1


def test_the_deepest_cover_counts_the_specs_over_one_position_of_one_row() -> None:
    # What vllm-static's write slots are checked against, before a request is sent.
    def spec(positions: list[int] | None = None, rows: list[int] | None = None) -> SteeringSpec:
        return SteeringSpec("resid_pre.1", _row(64, 1.0), positions=positions, batch_rows=rows)

    assert deepest_cover([]) == 0
    assert deepest_cover([spec(), spec()]) == 2  # both everywhere
    assert deepest_cover([spec([1]), spec([2]), spec([3])]) == 1
    assert deepest_cover([spec(), spec([1]), spec([1, 2])]) == 3  # all three at position 1
    assert deepest_cover([spec(rows=[0]), spec(rows=[1]), spec([4])]) == 2
    assert deepest_cover([spec([2], [0]), spec([2], [1]), spec([2], [0])]) == 2
    # A row-wide spec and a position-wide one meet at a pair neither lists with the other.
    assert deepest_cover([spec(rows=[3]), spec(rows=[3]), spec([5]), spec([6], [0])]) == 3


def test_head_and_neuron_patches_write_only_their_channels() -> None:
    (spec,) = Patch("value.0", [[[9.0] * 16]], positions=[0], heads=[1]).to_specs(FACTS)
    assert spec.channels == tuple(range(16, 32))  # kv head 1 of 2, not query head 1's kv head
    written = apply_reference(spec, [0.0] * 32, 0)
    assert written == [0.0] * 16 + [9.0] * 16
    (zero,) = Ablation("mlp_act.1", neurons=[3, 7]).to_specs(FACTS)
    assert apply_reference(zero, [1.0] * 96, 4) == [0.0 if i in (3, 7) else 1.0 for i in range(96)]
    (heads,) = Ablation("z.0", heads=[2], positions=[1]).to_specs(FACTS)
    assert heads.channels == tuple(range(32, 48)) and heads.positions == (1,)


def test_patch_from_cuts_heads_from_full_rows_against_the_model() -> None:
    rows = [[[float(p * 100 + c) for c in range(64)] for p in range(3)]]  # [1, 3, 64]
    cache = ActivationCache({"z.1": _Nested(rows)})
    patch = patch_from(cache, "z.1", [1], heads=[3])
    with pytest.raises(SteeringSpecError, match="depends on the model"):
        patch.to_specs(None)
    (spec,) = patch.to_specs(FACTS)
    assert spec.channels == tuple(range(48, 64))
    assert list(spec.vector) == [100.0 + c for c in range(48, 64)]


class _Nested(list):  # a nested list with the two tensor operations patch_from uses
    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self), len(self[0]), len(self[0][0]))

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        got = list.__getitem__(self, index)
        return _Rows(got) if isinstance(index, int) else got


class _Rows(list):
    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, list):
            return [list.__getitem__(self, i) for i in index]
        return list.__getitem__(self, index)


@pytest.mark.parametrize(
    ("build", "words"),
    [
        (lambda: Patch("resid_pre.0", [[1.0] * 65], [0]), "65 elements"),
        (lambda: Patch("z.0", [[[1.0] * 16]], [0], heads=[4]), "has 4 heads"),
        (lambda: Patch("value.0", [[[1.0] * 16]], [0], heads=[2]), "has 2 kv heads"),
        (lambda: Patch("z.0", [[[1.0] * 8]], [0], heads=[0]), "heads 8 wide"),
        (lambda: Patch("resid_pre.0", [[1.0]], [0], heads=[0]), "no head axis"),
        (lambda: Patch("resid_pre.0", [[1.0]], [0], neurons=[0]), "not an MLP point"),
        (lambda: Patch("resid_pre.0", [_row(64), _row(64)], [0]), "2 rows of values for 1"),
        (lambda: Ablation("mlp_act.0", neurons=[96]), "writes neurons"),
        (lambda: Ablation("resid_pre.0", kind="resample"), "needs source"),
        (lambda: Ablation("resid_pre.0", kind="noise"), "unknown ablation kind"),
    ],
)
def test_a_malformed_patch_is_refused_naming_the_fix(build, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SteeringSpecError, match=words):
        admit_writes(object(), build(), FACTS, reach=(6, "this call"))


def test_positions_past_the_call_and_sizes_without_facts_are_refused() -> None:
    with pytest.raises(SteeringSpecError, match="lie beyond"):
        admit_writes(object(), Patch("resid_pre.0", _row(64), [9]), FACTS, reach=(6, "this call"))
    with pytest.raises(SteeringSpecError, match="cannot be sized without the model"):
        Ablation("resid_pre.0").to_specs(None)


def test_a_set_spec_travels_the_one_wire_whole() -> None:
    (spec,) = Patch("z.1", [[[0.5] * 16]], [2], heads=[1]).to_specs(FACTS)
    back = spec_from_wire(json.loads(json.dumps(spec_to_wire(spec))))
    assert (back.op, back.positions, back.channels) == ("set", (2,), spec.channels)
    assert back.values() == spec.values()
    with pytest.raises(SteeringSpecError, match="only set"):
        SteeringSpec("resid_pre.0", [1.0], channels=[0])


def test_logit_diff_is_the_mean_over_rows_at_its_position() -> None:
    logits = _Logits([[[0, 1, 5], [2, 0, 1]], [[0, 0, 0], [7, 3, 0]]])
    assert LogitDiff(0, 2)(logits) == ((2 - 1) + (7 - 0)) / 2
    assert LogitDiff((0, 1), (2, 0), position=0)(logits) == ((0 - 5) + (0 - 0)) / 2
    with pytest.raises(SteeringSpecError, match="for a batch of 2"):
        LogitDiff((0, 1, 2), 0)(logits)


class _Logits:  # [batch, seq, vocab] with the indexing LogitDiff uses
    def __init__(self, rows: list[list[list[float]]]) -> None:
        self.rows = rows
        self.shape = (len(rows), len(rows[0]), len(rows[0][0]))

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        _, position = index
        return _Last([row[position] for row in self.rows])


class _Last:
    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = rows

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        b, v = index
        return self.rows[b][v]


# --- per-row writes (interp_core.write_indices) -------------------------------------------------
def test_batch_rows_travel_and_each_row_gets_only_its_own_writes() -> None:
    from interp_core.write_indices import wire_for_row, writes_for_row

    row0 = Patch("resid_pre.1", [0.5] * 64, [2], batch_rows=0).to_specs(FACTS)
    both = Ablation("mlp_act.0", neurons=[1, 6], batch_rows=[0, 1]).to_specs(FACTS)
    every = (SteeringSpec("resid_pre.0", [1.0] * 64),)
    specs = (*row0, *both, *every)
    assert [s.batch_rows for s in specs] == [(0,), (0, 1), None]
    wire = [spec_to_wire(s) for s in specs]
    assert [spec_from_wire(json.loads(json.dumps(w))).batch_rows for w in wire] == [
        (0,),
        (0, 1),
        None,
    ]
    for row, count in ((0, 3), (1, 2), (2, 1)):
        own = writes_for_row(specs, row)
        assert len(own) == count and all(s.batch_rows is None for s in own)
        assert [w["batch_rows"] for w in wire_for_row(wire, row)] == [None] * count
    # Admission checks the rows against the call's prompts, as positions against its length.
    admit_writes(object(), list(specs), FACTS, (4, "a 4-token call"), prompts=[[1] * 4] * 2)
    with pytest.raises(SteeringSpecError, match=r"names batch rows \[1\].*runs 1 row"):
        admit_writes(object(), list(specs), FACTS, (4, "a 4-token call"), prompts=[[1] * 4])


@pytest.mark.parametrize(
    ("rows", "words"),
    [(-1, "batch row -1"), ([], "batch_rows=\\[\\]"), ([1, 1], "twice"), ("0", "batch_rows='0'")],
)
def test_malformed_batch_rows_are_refused(rows: object, words: str) -> None:
    with pytest.raises(SteeringSpecError, match=words):
        Patch("resid_pre.1", [0.5] * 64, [2], batch_rows=rows)  # type: ignore[arg-type]
    with pytest.raises(SteeringSpecError, match=words):
        SteeringSpec("resid_pre.1", [0.5] * 64, batch_rows=rows)  # type: ignore[arg-type]
