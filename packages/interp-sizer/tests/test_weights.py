"""Weight bytes: safetensors headers are exact, and the config-derived count agrees with them."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from sizer_helpers import require

from interp_core.known_models import facts_for
from interp_sizer import checkpoint_inventory, read_safetensors_header, resolve_model
from interp_sizer.errors import SizerError
from interp_sizer.weights import ParameterCount, TensorRecord, parameter_count


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require("transformers", module="transformers")
    from _tiny_models import build

    return build("llama-64", tmp_path_factory.mktemp("llama64"))


def test_header_bytes_equal_the_file_payload_and_torch_numel_times_itemsize(
    tiny_llama: Path,
) -> None:
    from safetensors.torch import load_file

    file = tiny_llama / "model.safetensors"
    records = read_safetensors_header(file)
    (header_length,) = struct.unpack("<Q", file.read_bytes()[:8])
    payload = file.stat().st_size - 8 - header_length
    tensors = load_file(str(file))
    from_torch = sum(t.numel() * t.element_size() for t in tensors.values())
    assert sum(r.nbytes for r in records) == payload == from_torch
    assert {r.name for r in records} == set(tensors)
    for record in records:
        assert record.shape == tuple(tensors[record.name].shape)


def test_sizer_weights_match_the_file_and_the_config_estimate_exactly(tiny_llama: Path) -> None:
    from safetensors.torch import load_file

    model = resolve_model(tiny_llama, hub=False)
    inventory = model.inventory
    tensors = load_file(str(tiny_llama / "model.safetensors"))
    params = sum(t.numel() for t in tensors.values())
    assert model.weights_exact and inventory.source == "safetensors"
    assert model.native_dtype == "float32"
    assert inventory.stored_bytes == params * 4
    assert inventory.load_bytes("float32") == inventory.stored_bytes
    assert inventory.load_bytes("bfloat16") == params * 2  # the load dtype decides, not the file
    assert inventory.parameters == params
    # The config path counts the same tensors without the file.
    count = parameter_count(model.facts)
    assert count.total == params
    assert inventory.linear_elements == count.linear
    assert inventory.embedding_elements == count.embedding + count.unembedding
    assert inventory.small_elements == count.norms_and_biases


def test_bf16_checkpoint_prices_two_bytes_and_fp8_quarter_of_fp32(tmp_path: Path) -> None:
    require("transformers", module="transformers")
    from _tiny_models import build

    folder = build("llama-64", tmp_path / "m", dtype="bfloat16")
    model = resolve_model(folder, hub=False)
    assert model.native_dtype == "bfloat16"
    assert model.inventory.bytes_by_dtype == {"BF16": model.inventory.stored_bytes}
    assert model.inventory.load_bytes("bfloat16") == model.inventory.stored_bytes
    from interp_sizer.formats import check_quantization

    fp8 = check_quantization("fp8", "vllm")
    narrowed = model.inventory.load_bytes("bfloat16", fp8)
    inventory = model.inventory
    expected = inventory.linear_elements + 2 * (
        inventory.embedding_elements + inventory.small_elements
    )
    assert narrowed == expected  # linear layers 1 byte, embeddings and norms stay 16-bit


def test_the_config_count_matches_published_parameter_totals() -> None:
    # Published totals: Llama-3.1-8B 8,030,261,248; DeepSeek-V3 671B (without the MTP layer).
    assert parameter_count(facts_for("meta-llama/Llama-3.1-8B")).total == 8_030_261_248
    assert parameter_count(facts_for("openai-community/gpt2")).total == 124_439_808
    deepseek = parameter_count(facts_for("deepseek-ai/DeepSeek-V3"))
    assert 670e9 < deepseek.total < 672e9
    assert 37e9 < deepseek.active < 38e9  # "37B activated"


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> int:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))
    return offset


def test_packed_mxfp4_blocks_are_unpacked_and_e8m0_is_a_scale(tmp_path: Path) -> None:
    tensors = {
        "model.layers.0.mlp.experts.down_proj_blocks": ("U8", [4, 64, 2, 16], 4 * 64 * 2 * 16),
        "model.layers.0.mlp.experts.down_proj_scales": ("U8", [4, 64, 2], 4 * 64 * 2),
        "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64], 64 * 64 * 2),
        "model.layers.0.input_layernorm.weight": ("BF16", [64], 128),
        "model.embed_tokens.weight": ("BF16", [100, 64], 100 * 64 * 2),
        "model.layers.0.mlp.gate.weight_scale_inv": ("F8_E8M0", [4], 4),
    }
    total = _write_safetensors(tmp_path / "model.safetensors", tensors)
    records = read_safetensors_header(tmp_path / "model.safetensors")
    roles = {r.name.rsplit(".", 1)[-1]: r.role for r in records}
    assert roles["down_proj_blocks"] == "packed"
    assert roles["down_proj_scales"] == "scale"
    assert roles["weight_scale_inv"] == "scale"
    inventory = checkpoint_inventory(records)
    assert inventory.stored_bytes == total
    assert inventory.packed_bytes == 4 * 64 * 2 * 16 + 4 * 64 * 2 + 4
    blocks = next(r for r in records if r.name.endswith("_blocks"))
    assert blocks.logical_parameters == 2 * blocks.elements  # two e2m1 values per byte
    assert inventory.bytes_by_dtype["BF16"] == 64 * 64 * 2 + 128 + 100 * 64 * 2
    # Packed payload keeps its bytes whatever the load dtype.
    assert inventory.load_bytes("float32") - inventory.load_bytes("bfloat16") == (
        64 * 64 * 2 + 64 * 2 + 100 * 64 * 2
    )


def test_a_truncated_header_is_refused_with_the_file_named(tmp_path: Path) -> None:
    broken = tmp_path / "model.safetensors"
    broken.write_bytes(struct.pack("<Q", 50) + b"{not json")
    with pytest.raises(SizerError, match=r"cannot read the safetensors header of .*model\.safet"):
        read_safetensors_header(broken)


def test_a_partly_downloaded_sharded_checkpoint_falls_back_to_the_config(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 500,
        "torch_dtype": "bfloat16",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    _write_safetensors(
        tmp_path / "model-00001-of-00002.safetensors",
        {"model.embed_tokens.weight": ("BF16", [500, 64], 64000)},
    )
    index = {
        "weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        }
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    model = resolve_model(tmp_path, hub=False)
    assert model.inventory.source == "config"
    assert model.inventory.stored_bytes == parameter_count(model.facts).total * 2


def test_tensor_record_roles() -> None:
    assert TensorRecord("lm_head.weight", "BF16", (10, 4), 80).role == "embedding"
    assert TensorRecord("model.norm.weight", "BF16", (4,), 8).role == "small"
    assert TensorRecord("model.layers.3.mlp.up_proj.weight", "F32", (8, 4), 128).role == "linear"
    assert TensorRecord("model.layers.3.mlp.up_proj.qweight", "I32", (4, 8), 128).role == "packed"
    assert (
        TensorRecord("model.layers.3.mlp.up_proj.qweight", "I32", (4, 8), 128).logical_parameters
        == 256
    )


# The hybrid trunks counted below: the attention and MLPs around each family's mixer widths.
_HYBRID: dict[str, Any] = json.loads(
    (Path(__file__).parent / "data" / "hybrid_trunks.json").read_text(encoding="utf-8")
)
_HYBRID_TRUNK = _HYBRID["trunk"]


def _numel(*modules: Any) -> int:
    """How many parameters `modules` hold together."""
    return sum(p.numel() for module in modules for p in module.parameters())


def _counted_exactly(model: Any, config: Any) -> ParameterCount:
    """The count of `config`'s facts, checked exact and equal to the parameters `model` holds."""
    from interp_core.facts import ModelFacts

    count = parameter_count(ModelFacts.from_config(config.to_dict()))
    assert count.approximate_layers == ()
    assert count.total == sum(p.numel() for p in model.parameters())
    return count


def test_a_mamba2_trunk_is_counted_exactly_as_transformers_builds_it() -> None:
    # Nemotron-H: Mamba-2 mixers (inner width heads x head_dim, unequal to 2 x d_model here, two
    # groups, a conv bias), one attention layer and one squared-ReLU MLP, each a layer of its own.
    require("transformers", module="transformers")
    from transformers import NemotronHConfig, NemotronHForCausalLM

    config = NemotronHConfig(
        hybrid_override_pattern="M*-M", **_HYBRID_TRUNK, **_HYBRID["nemotron_h"]
    )
    model = NemotronHForCausalLM(config)
    count = _counted_exactly(model, config)
    mixer = _numel(model.model.layers[0].mixer)
    assert count.per_layer[0][0] == mixer  # the Mamba layer's matrices and vectors


def test_a_mixture_of_attention_heads_is_counted_exactly_as_transformers_builds_it() -> None:
    # JetMoE: one shared key/value projection, attention experts mapping d_model to the KV width
    # and back, a router and an output bias on both the attention and the MLP experts.
    require("transformers", module="transformers")
    from transformers import JetMoeConfig, JetMoeForCausalLM

    from interp_core.facts import ModelFacts

    config = JetMoeConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_key_value_heads=2,
        kv_channels=16,
        intermediate_size=48,
        num_local_experts=4,
        num_experts_per_tok=2,
        vocab_size=100,
    )
    model = JetMoeForCausalLM(config)
    assert ModelFacts.from_config(config.to_dict()).routed_attention
    count = _counted_exactly(model, config)
    experts = model.model.layers[0].self_attention.experts
    per_expert = (experts.input_linear.weight.numel() + experts.output_linear.weight.numel()) // 4
    mlp = model.model.layers[0].mlp
    mlp_expert = (mlp.input_linear.weight.numel() + mlp.output_linear.weight.numel()) // 4
    assert count.active == count.total - 2 * 2 * (per_expert + mlp_expert)


@pytest.mark.parametrize("variant", ["as published", "every optional part"])
def test_falcon_h1_mixer_beside_attention_is_counted_exactly_as_transformers_builds_it(
    variant: str,
) -> None:
    # Falcon-H1: every layer's Mamba-2 mixer runs beside its attention (it was priced as nothing
    # beyond the attention: the 0.5B came out at 0.34B). Inner width mamba_d_ssm (unequal to
    # 2 x d_model here), two groups; the second variant adds the gated norm and all biases.
    require("transformers", module="transformers")
    from transformers import FalconH1Config, FalconH1ForCausalLM

    extra = (
        {}
        if variant == "as published"
        else {"mamba_rms_norm": True, "mamba_proj_bias": True, "projectors_bias": True}
    )
    config = FalconH1Config(
        num_hidden_layers=2,
        **_HYBRID_TRUNK,
        **_HYBRID["falcon_h1"],
        mamba_conv_bias=variant == "as published",
        **extra,
    )
    model = FalconH1ForCausalLM(config)
    count = _counted_exactly(model, config)
    layer = model.model.layers[0]
    assert count.per_layer[0][0] == _numel(layer.self_attn, layer.mamba, layer.feed_forward)


def test_falcon_h1_without_its_mixer_keys_is_marked_approximate() -> None:
    # Refuse, never guess: a Falcon-H1 config that does not state its mixer's widths is priced
    # as attention alone and says so, layer by layer.
    from interp_core.facts import ModelFacts

    config = {
        "model_type": "falcon_h1",
        "architectures": ["FalconH1ForCausalLM"],
        "num_hidden_layers": 2,
        **_HYBRID_TRUNK,
    }
    assert parameter_count(ModelFacts.from_config(config)).approximate_layers == (0, 1)


def test_a_bamba_trunk_is_counted_exactly_as_transformers_builds_it() -> None:
    # Bamba: Mamba-2 layers named by the attention layers they are not (attn_layer_indices),
    # inner width expand x d_model, the gated norm always there, both projections biased.
    require("transformers", module="transformers")
    from transformers import BambaConfig, BambaForCausalLM

    config = BambaConfig(
        num_hidden_layers=3,
        attn_layer_indices=[1],
        **_HYBRID_TRUNK,
        **_HYBRID["bamba"],
    )
    model = BambaForCausalLM(config)
    count = _counted_exactly(model, config)
    layer = model.model.layers[0]
    assert count.per_layer[0][0] == _numel(layer.mamba, layer.feed_forward)
