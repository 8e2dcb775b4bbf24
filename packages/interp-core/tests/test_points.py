"""The point registry: the 34 names, their specs, and which points each kind of model has."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from _point_models import (
    ALL_MODELS,
    ALL_SPARSE,
    GEMMA2,
    GPT2,
    HYBRID,
    HYPER,
    LLAMA,
    MAMBA,
    MLA,
    MOE_PREFIX,
    PARALLEL,
    QWEN3,
)
from _raises import raises_saying
from hypothesis import given
from hypothesis import strategies as st

from interp_core import points
from interp_core.errors import AddressError, PointUnsupported, UnknownPoint
from interp_core.points import (
    ENGINES,
    POINTS,
    Equivalent,
    PointSpec,
    Role,
    Scope,
    Width,
    absence_reason,
    equivalent_for,
    get_point,
    hyper_connection_names,
    is_point,
    layer_point_names,
    point_names,
    points_for,
    require_point,
    stream_coordinate_names,
    trunk_point_names,
    writable_names,
)

EXPECTED_NAMES = (
    "embeddings", "resid_pre", "attn_in", "q_norm_in", "q_norm_out", "k_norm_in", "k_norm_out",
    "value", "attn_scores", "attn_probs", "z", "attn_gate", "attn_out", "attn_out_post",
    "resid_mid", "mlp_in", "mlp_pre", "mlp_pre_linear", "mlp_act", "router_logits",
    "expert_weights", "expert_indices", "mlp_out", "mlp_out_post", "resid_post", "final_norm",
    "lm_head", "resid_streams", "attn_stream_collapse", "mlp_stream_collapse",
    "attn_stream_write", "attn_stream_mix", "mlp_stream_write", "mlp_stream_mix",
)  # fmt: skip

HC_NAMES = (
    "resid_streams", "attn_stream_collapse", "mlp_stream_collapse", "attn_stream_write",
    "attn_stream_mix", "mlp_stream_write", "mlp_stream_mix",
)  # fmt: skip

# The capture-only points; everything else may be written.
READ_ONLY = {
    "attn_scores", "attn_probs", "expert_weights", "expert_indices", "lm_head",
    "attn_stream_write", "attn_stream_mix", "mlp_stream_write", "mlp_stream_mix",
}  # fmt: skip

EXPECTED_WIDTHS = {
    "embeddings": Width.D_MODEL, "resid_pre": Width.D_MODEL, "attn_in": Width.D_MODEL,
    "q_norm_in": Width.Q_HEADS, "q_norm_out": Width.Q_HEADS, "k_norm_in": Width.KV_HEADS,
    "k_norm_out": Width.KV_HEADS, "value": Width.KV_HEADS, "attn_scores": Width.SCORES,
    "attn_probs": Width.SCORES, "z": Width.Z_HEADS, "attn_gate": Width.Q_HEADS,
    "attn_out": Width.D_MODEL, "attn_out_post": Width.D_MODEL, "resid_mid": Width.D_MODEL,
    "mlp_in": Width.D_MODEL, "mlp_pre": Width.D_MLP, "mlp_pre_linear": Width.D_MLP,
    "mlp_act": Width.D_MLP, "router_logits": Width.N_EXPERTS, "expert_weights": Width.TOP_K,
    "expert_indices": Width.TOP_K, "mlp_out": Width.D_MODEL, "mlp_out_post": Width.D_MODEL,
    "resid_post": Width.D_MODEL, "final_norm": Width.D_MODEL, "lm_head": Width.VOCAB,
    "resid_streams": Width.STREAMS_X_D_MODEL, "attn_stream_collapse": Width.D_MODEL,
    "mlp_stream_collapse": Width.D_MODEL, "attn_stream_write": Width.STREAMS,
    "attn_stream_mix": Width.STREAMS_SQUARED, "mlp_stream_write": Width.STREAMS,
    "mlp_stream_mix": Width.STREAMS_SQUARED,
}  # fmt: skip

QK_NORM = {"q_norm_in", "q_norm_out", "k_norm_in", "k_norm_out"}
ROUTING = {"router_logits", "expert_weights", "expert_indices"}


def present_names(facts) -> set[str]:
    return {spec.name for spec in points_for(facts)}


# --- the registry itself -------------------------------------------------------------------------


def test_exactly_the_34_names_in_order() -> None:
    assert point_names() == EXPECTED_NAMES
    assert tuple(POINTS) == EXPECTED_NAMES
    assert len(set(EXPECTED_NAMES)) == 34
    assert all(POINTS[name].name == name for name in POINTS)


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        POINTS["resid_post"] = POINTS["resid_pre"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        POINTS["resid_post"].writable = False  # type: ignore[misc]


def test_scopes_and_helper_groups() -> None:
    assert trunk_point_names() == ("embeddings", "final_norm", "lm_head")
    assert all(POINTS[n].scope is Scope.TRUNK for n in trunk_point_names())
    assert layer_point_names() == tuple(n for n in EXPECTED_NAMES if n not in trunk_point_names())
    assert len(layer_point_names()) == 31
    assert hyper_connection_names() == HC_NAMES
    assert stream_coordinate_names() == ("resid_pre", "resid_mid", "resid_post")
    assert {n for n, s in POINTS.items() if s.multi_stream_only} == set(HC_NAMES)
    assert {n for n, s in POINTS.items() if s.accepts_stream} == {
        "resid_pre",
        "resid_mid",
        "resid_post",
    }


def test_widths_roles_and_dtypes() -> None:
    assert {n: s.width for n, s in POINTS.items()} == EXPECTED_WIDTHS
    assert {n for n, s in POINTS.items() if s.dtype_kind == "int"} == {"expert_indices"}
    assert {s.dtype_kind for s in POINTS.values()} == {"float", "int"}
    assert {n for n, s in POINTS.items() if s.role is Role.ROUTING} == ROUTING
    assert {n for n, s in POINTS.items() if s.role is Role.STREAM} == set(HC_NAMES)
    assert {n for n, s in POINTS.items() if s.role is Role.TRUNK} == set(trunk_point_names())
    assert {n for n, s in POINTS.items() if s.role is Role.RESIDUAL} == {
        "resid_pre",
        "resid_mid",
        "resid_post",
    }
    assert Width.Q_HEADS.rule == "n_heads*head_dim"
    assert Width.SCORES.token_major is False and Width.D_MODEL.token_major is True


def test_writable_set_is_exactly_the_chosen_one() -> None:
    assert set(writable_names()) == set(EXPECTED_NAMES) - READ_ONLY
    assert len(writable_names()) == 25
    for spec in POINTS.values():
        # A refusal to write always says why; a writable point carries no such reason.
        assert (spec.read_only_reason is None) == spec.writable, spec.name
        if not spec.writable:
            assert len(spec.read_only_reason) > 40, spec.name


def test_every_spec_has_a_real_definition_and_three_equivalents() -> None:
    for spec in POINTS.values():
        assert isinstance(spec, PointSpec)
        assert len(spec.definition) > 80, spec.name
        assert "  " not in spec.definition and "\n" not in spec.definition, spec.name
        for engine in ENGINES:
            eq = spec.equivalent(engine)
            assert isinstance(eq, Equivalent), (spec.name, engine)
            assert eq is getattr(spec, engine)
            if eq.name is None:
                assert len(eq.note) > 20, (spec.name, engine)
            else:
                assert eq.name.strip() == eq.name and eq.name, (spec.name, engine)


def test_definitions_mention_their_constraints() -> None:
    assert "alias" in POINTS["attn_out_post"].definition
    assert "alias" in POINTS["mlp_out_post"].definition
    assert "parallel" in POINTS["resid_mid"].definition
    assert "MLA" in POINTS["value"].definition
    assert "stream" in POINTS["resid_post"].definition


def test_known_engine_names() -> None:
    assert POINTS["resid_post"].transformer_lens.name == "blocks.{L}.hook_resid_post"
    assert POINTS["resid_post"].transformer_lens.format(7) == "blocks.7.hook_resid_post"
    assert POINTS["resid_post"].nnterp.format(3) == "layers_output[3]"
    assert POINTS["attn_probs"].transformer_lens.name == "blocks.{L}.attn.hook_pattern"
    assert POINTS["mlp_act"].transformer_lens.name == "blocks.{L}.mlp.hook_post"
    # The sandwich-norm trap: TL's block-level hook is our *_post point, not the raw output.
    assert POINTS["attn_out_post"].transformer_lens.name == "blocks.{L}.hook_attn_out"
    assert POINTS["mlp_out_post"].transformer_lens.name == "blocks.{L}.hook_mlp_out"
    assert POINTS["attn_out"].nnterp.name == "attentions_output[{L}]"
    # Pre-gain normalised hooks are not our normed points.
    assert POINTS["final_norm"].transformer_lens.name is None
    assert "gain" in POINTS["final_norm"].transformer_lens.note
    assert "gain" in POINTS["mlp_in"].transformer_lens.note
    assert Equivalent(None, "x").format(3) is None
    with pytest.raises(ValueError):
        POINTS["z"].equivalent("pyvene")


# --- names in, specs or refusals out -------------------------------------------------------------


def test_get_point_and_is_point() -> None:
    assert get_point("resid_post") is POINTS["resid_post"]
    assert is_point("z") and not is_point("Z") and not is_point(None) and not is_point(3)


@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("resid_pst", "resid_post"),
        ("attn_prob", "attn_probs"),
        ("Resid_Post", "resid_post"),
        ("blocks.5.hook_resid_post", "resid_post"),
        ("hook_pattern", "attn_probs"),
        ("layers_output[3]", "resid_post"),
        ("logits", "lm_head"),
        ("resid_post.5", "resid_post"),
        ("mlp_actt", "mlp_act"),
    ],
)
def test_unknown_names_suggest_the_nearest_point(text: str, suggestion: str) -> None:
    with raises_saying(UnknownPoint, suggestion) as caught:
        get_point(text)
    assert isinstance(caught.value, AddressError)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 10_000, "\x00", "résid", None, 3, b"z", ("z",)])
def test_get_point_refuses_odd_input_with_unknown_point(bad: object) -> None:
    with pytest.raises(UnknownPoint) as caught:
        get_point(bad)  # type: ignore[arg-type]
    assert len(str(caught.value)) < 400


@given(st.text(max_size=200))
def test_get_point_is_total(text: str) -> None:
    try:
        spec = get_point(text)
    except UnknownPoint as error:
        assert text not in POINTS
        assert str(error)
    else:
        assert spec.name == text


# --- presence on models --------------------------------------------------------------------------


def test_llama_has_every_plain_point_and_nothing_else() -> None:
    absent = QK_NORM | ROUTING | set(HC_NAMES) | {"attn_gate"}
    assert present_names(LLAMA) == set(EXPECTED_NAMES) - absent
    assert [s.name for s in points_for(LLAMA)] == [n for n in EXPECTED_NAMES if n not in absent]
    for name in set(EXPECTED_NAMES) - absent:
        for layer in (None, 0, 3) if POINTS[name].is_layer_point else (None,):
            assert absence_reason(name, LLAMA, layer) is None, (name, layer)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("q_norm_in", ("LlamaForCausalLM", "QK-norm", "attn_scores")),
        ("k_norm_out", ("QK-norm",)),
        ("router_logits", ("mixture-of-experts", "mlp_act")),
        ("expert_indices", ("mixture-of-experts",)),
        ("attn_gate", ("gate", "z")),
        ("resid_streams", ("single residual stream", "resid_post")),
        ("attn_stream_mix", ("single residual stream", "coefficients")),
        ("mlp_stream_collapse", ("resid_mid",)),
    ],
)
def test_llama_absences_say_why(name: str, words: tuple[str, ...]) -> None:
    reason = absence_reason(name, LLAMA)
    assert reason is not None
    for word in words:
        assert word in reason, (name, word, reason)
    assert absence_reason(name, LLAMA, 2) is not None
    with raises_saying(PointUnsupported, f"{name} at layer 2 is not available on LlamaForCausalLM"):
        require_point(name, LLAMA, 2)


def test_qwen3_has_qk_norm_points_at_every_layer() -> None:
    assert QK_NORM <= present_names(QWEN3)
    for name in QK_NORM:
        for layer in range(QWEN3.n_layers):
            assert require_point(name, QWEN3, layer) is POINTS[name]
    assert "attn_gate" not in present_names(QWEN3)


def test_moe_with_dense_prefix() -> None:
    names = present_names(MOE_PREFIX)
    assert ROUTING <= names and {"mlp_pre", "mlp_pre_linear", "mlp_act"} <= names
    for name in ROUTING:
        assert absence_reason(name, MOE_PREFIX, 0) is not None
        assert "dense MLP" in absence_reason(name, MOE_PREFIX, 0)
        assert "1-3" in absence_reason(name, MOE_PREFIX, 0)
        for layer in (1, 2, 3):
            assert absence_reason(name, MOE_PREFIX, layer) is None
    for name in ("mlp_pre", "mlp_pre_linear", "mlp_act"):
        assert absence_reason(name, MOE_PREFIX, 0) is None
        reason = absence_reason(name, MOE_PREFIX, 2)
        assert reason is not None
        assert "mixture-of-experts" in reason and "8 experts, top-2" in reason
        assert "dense layers: 0" in reason
        with pytest.raises(PointUnsupported, match="router_logits"):
            require_point(name, MOE_PREFIX, 2)
    # Layers that are always there stay there.
    for name in ("mlp_in", "mlp_out", "mlp_out_post"):
        assert all(absence_reason(name, MOE_PREFIX, layer) is None for layer in range(4))


def test_all_sparse_model_has_no_dense_neurons_anywhere() -> None:
    reason = absence_reason("mlp_act", ALL_SPARSE)
    assert reason is not None and "every layer" in reason
    assert ROUTING <= present_names(ALL_SPARSE)
    assert not {"mlp_pre", "mlp_pre_linear", "mlp_act"} & present_names(ALL_SPARSE)


def test_mla_has_no_value() -> None:
    reason = absence_reason("value", MLA)
    assert reason is not None and "latent" in reason and "z" in reason and "48" in reason
    assert absence_reason("value", MLA, 1) is not None
    assert "z" in present_names(MLA)
    assert MLA.z_width == 48 and MLA.q_width == 96


def test_parallel_block_has_no_resid_mid() -> None:
    reason = absence_reason("resid_mid", PARALLEL)
    assert reason is not None and "mlp_in" in reason and "parallel" in reason
    with raises_saying(PointUnsupported, "mlp_in", "resid_pre"):
        require_point("resid_mid", PARALLEL, 1)
    assert "resid_mid" not in present_names(PARALLEL)
    assert "mlp_pre_linear" not in present_names(PARALLEL)


def test_gpt2_plain_mlp_has_no_linear_branch() -> None:
    reason = absence_reason("mlp_pre_linear", GPT2)
    assert reason is not None and "non-gated" in reason and "mlp_pre" in reason
    assert {"mlp_pre", "mlp_act", "resid_mid"} <= present_names(GPT2)


def test_hybrid_attention_points_only_on_softmax_layers() -> None:
    for name in ("attn_scores", "attn_probs", "z", "value", "q_norm_in", "k_norm_out", "attn_gate"):
        for layer in (0, 1, 2):
            reason = absence_reason(name, HYBRID, layer)
            assert reason is not None, (name, layer)
            assert "linear_attention" in reason and "layers: 3" in reason, reason
        assert absence_reason(name, HYBRID, 3) is None
        assert absence_reason(name, HYBRID) is None  # some layer has it
    for name in ("attn_in", "attn_out", "attn_out_post"):
        assert all(absence_reason(name, HYBRID, layer) is None for layer in range(4))


def test_pure_state_space_model_has_no_attention_matrix() -> None:
    reason = absence_reason("attn_probs", MAMBA)
    assert reason is not None and "no layer" in reason and "mamba" in reason
    assert "attn_probs" not in present_names(MAMBA)
    assert {"attn_in", "attn_out"} <= present_names(MAMBA)


def test_hyper_connection_trunk() -> None:
    names = present_names(HYPER)
    assert set(HC_NAMES) <= names
    for name in HC_NAMES:
        assert all(absence_reason(name, HYPER, layer) is None for layer in range(3))
    # Bare resid points would have to pick a stream: refused, with the way out named.
    for name in ("resid_pre", "resid_mid", "resid_post"):
        assert name in names  # reachable through a stream coordinate
        reason = absence_reason(name, HYPER, 1)
        assert reason is not None and "4 parallel residual streams" in reason
        assert f"{name}.L.stream-K" in reason and "resid_streams" in reason
        assert absence_reason(name, HYPER) is not None
        assert absence_reason(name, HYPER, 1, stream=3) is None
        assert require_point(name, HYPER, 0, stream=0) is POINTS[name]
    with pytest.raises(PointUnsupported, match="stream 4 does not exist"):
        absence_reason("resid_post", HYPER, 0, stream=4)
    with pytest.raises(PointUnsupported, match="takes no stream"):
        absence_reason("attn_out", HYPER, 0, stream=1)
    with pytest.raises(PointUnsupported, match="resid_streams"):
        require_point("resid_streams", HYPER, 0, stream=1)


def test_stream_coordinate_on_a_single_stream_trunk_is_absent() -> None:
    reason = absence_reason("resid_post", LLAMA, 1, stream=0)
    assert reason is not None and "single residual stream" in reason
    assert "drop the .stream-0" in reason


def test_layer_coordinates_are_checked() -> None:
    for bad in (4, 99, -1):
        with pytest.raises(PointUnsupported, match=r"0\.\.3"):
            absence_reason("resid_post", LLAMA, bad)
        with pytest.raises(PointUnsupported):
            require_point("attn_probs", LLAMA, bad)
    with pytest.raises(PointUnsupported, match="trunk point"):
        absence_reason("embeddings", LLAMA, 0)
    with pytest.raises(PointUnsupported):
        absence_reason("resid_post", LLAMA, True)  # type: ignore[arg-type]
    with pytest.raises(UnknownPoint, match="resid_post"):
        absence_reason("resid_pst", LLAMA)


def test_post_points_exist_everywhere() -> None:
    for facts in ALL_MODELS.values():
        names = present_names(facts)
        assert {"attn_out_post", "mlp_out_post", "embeddings", "final_norm", "lm_head"} <= names


def test_points_for_agrees_with_absence_reason() -> None:
    for facts in ALL_MODELS.values():
        listed = present_names(facts)
        for name in EXPECTED_NAMES:
            spec = POINTS[name]
            stream = 0 if spec.accepts_stream and facts.n_streams > 1 else None
            assert (name in listed) == (spec.absence_reason(facts, None, stream) is None)
            assert (name in listed) == spec.is_present(facts, None, stream)
            if spec.is_layer_point and name in listed:
                # Present with layer=None means present at one layer at least.
                assert any(
                    spec.is_present(facts, layer, stream) for layer in range(facts.n_layers)
                ), (facts.architecture, name)


def test_every_reason_names_the_model() -> None:
    for facts in ALL_MODELS.values():
        for name in EXPECTED_NAMES:
            reason = absence_reason(name, facts)
            if reason is not None:
                assert facts.architecture in reason, (name, reason)


# --- model-aware engine names --------------------------------------------------------------------


def test_equivalent_for_resolves_the_sandwich_norm_trap() -> None:
    # Gemma-2: nnterp's attentions_output is before the post-norm, so no equivalent for *_post.
    assert equivalent_for("attn_out_post", "nnterp", GEMMA2).name is None
    assert equivalent_for("mlp_out_post", "nnterp", GEMMA2).name is None
    assert equivalent_for("attn_out_post", "transformer_lens", GEMMA2).name == (
        "blocks.{L}.hook_attn_out"
    )
    # Llama: no sandwich norm, so the raw output is also what the sublayer writes.
    assert equivalent_for("attn_out_post", "nnterp", LLAMA).name == "attentions_output[{L}]"
    assert equivalent_for("mlp_out_post", "nnterp", LLAMA).name == "mlps_output[{L}]"
    assert "same tensor on this model" in equivalent_for("attn_out", "transformer_lens", LLAMA).note
    gemma_note = equivalent_for("attn_out", "transformer_lens", GEMMA2)
    assert gemma_note == POINTS["attn_out"].transformer_lens


def test_equivalent_for_embeddings_and_missing_points() -> None:
    assert equivalent_for("embeddings", "transformer_lens", LLAMA).name == "hook_embed"
    assert equivalent_for("embeddings", "transformer_lens", GEMMA2).name is None
    missing = equivalent_for("value", "transformer_lens", MLA)
    assert missing.name is None and "latent" in missing.note
    assert equivalent_for("resid_streams", "transformer_lens", LLAMA).name is None
    assert equivalent_for("resid_streams", "transformer_lens", HYPER).name == "blocks.{L}.hook_out"
    assert equivalent_for("resid_mid", "nnsight", GEMMA2).name.endswith(
        "pre_feedforward_layernorm.input"
    )


@pytest.mark.parametrize(
    "module", ["points", "point_spec", "point_table", "point_lookup", "presence"]
)
def test_registry_modules_have_no_third_party_imports(module: str) -> None:
    import sys

    source = Path(points.__file__).with_name(f"{module}.py")
    with open(source, encoding="utf-8") as handle:
        lines = [line.strip() for line in handle if line.strip().startswith(("import ", "from "))]
    tops = {line.split()[1].split(".")[0] for line in lines}
    assert tops <= set(sys.stdlib_module_names) | {"__future__", "interp_core"}, tops


def test_the_points_module_exports_what_its_parts_define() -> None:
    # `interp_core.points` is the public face; each name still comes from the module that owns it.
    from interp_core import point_lookup, point_spec, point_table, presence

    assert points.PointSpec is point_spec.PointSpec
    assert points.POINTS is point_table.POINTS
    assert points.get_point is point_lookup.get_point
    assert points.layer_ranges is presence.layer_ranges
    assert set(points.__all__) <= set(dir(points))


def test_stream_coordinates_are_the_block_boundary_residuals() -> None:
    from interp_core.presence import STREAM_COORDINATE_POINTS

    assert stream_coordinate_names() == STREAM_COORDINATE_POINTS
    assert all(POINTS[name].role is Role.RESIDUAL for name in STREAM_COORDINATE_POINTS)
