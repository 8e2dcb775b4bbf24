"""Does bad input get the library's own error, naming the fix, and leave the model working?

Every family, every case: the call raises an `InterpError` subclass whose message says what to do
instead, and afterwards no hook is left on any module, torch's patched functions are restored,
and a plain forward gives bit-identical logits to one made before.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from eager_helpers import hook_ids, model, prompt_ids, resid_address, trunk

from interp_core import load_model, sync
from interp_core.address import Address
from interp_core.errors import (
    AddressError,
    CapabilityUnsupported,
    InterpError,
    InvalidArgument,
    PointUnsupported,
    SteeringSpecError,
)
from interp_core.steering import SteeringSpec
from interp_eager.model import EagerModel
from interp_testmodels.families import FAMILY_NAMES, build_family

_SOFTMAX = torch.nn.functional.softmax
_LINEAR = torch.nn.functional.linear

# name -> (call, expected error, regex the message must match: what to do instead)
Case = tuple[Callable[[EagerModel, torch.Tensor], Any], type[InterpError], str]


def _bad_width(m: EagerModel, ids: torch.Tensor) -> Any:
    spec = SteeringSpec(resid_address(m, 0), torch.ones(m.d_model + 1))
    return m.run_with_cache(ids, [], steering=spec)


def _bad_width_list(m: EagerModel, ids: torch.Tensor) -> Any:
    spec = SteeringSpec(resid_address(m, 0), [1.0] * (m.d_model - 1))
    return m.run_with_cache(ids, [], steering=spec)


def _integer_vector(m: EagerModel, ids: torch.Tensor) -> Any:
    spec = SteeringSpec(resid_address(m, 0), torch.ones(m.d_model, dtype=torch.long))
    return m.run_with_cache(ids, [], steering=spec)


def _nan_vector(m: EagerModel, ids: torch.Tensor) -> Any:
    vector = torch.ones(m.d_model)
    vector[3] = math.nan
    return m.run_with_cache(ids, [], steering=SteeringSpec(resid_address(m, 0), vector))


def _nan_list(m: EagerModel, ids: torch.Tensor) -> Any:
    values = [1.0] * m.d_model
    values[3] = math.nan
    return m.run_with_cache(ids, [], steering=SteeringSpec(resid_address(m, 0), values))


def _steer_beyond_last_layer(m: EagerModel, ids: torch.Tensor) -> Any:
    spec = SteeringSpec(resid_address(m, m.n_layers), torch.ones(m.d_model))
    return m.generate_sync(ids, max_new_tokens=2, steering=spec)


def _too_long(m: EagerModel, ids: torch.Tensor) -> Any:
    limit = m.facts.max_position_embeddings
    assert limit is not None
    return m.run_with_cache(torch.ones((1, limit + 1), dtype=torch.long), [])


def _fills_the_context(m: EagerModel, ids: torch.Tensor) -> Any:
    limit = m.facts.max_position_embeddings
    assert limit is not None
    return m.generate_sync(torch.ones((1, limit), dtype=torch.long), max_new_tokens=1)


def _wrong_path_width(m: EagerModel, ids: torch.Tensor) -> Any:
    # The core cannot know a raw module's width, so this fails inside the forward pass: the
    # hooks (and the softmax interception of attn_scores) must still be removed.
    name = next(
        n for n, mod in m.hf_model.named_modules() if mod is m.hf_model.get_output_embeddings()
    )
    spec = SteeringSpec(f"path.{name}", torch.ones(7))
    scores = [a for a in (Address("attn_scores", 0), Address("attn_scores", 1)) if m.supports(a)]
    return m.run_with_cache(ids, [resid_address(m, 0), *scores], steering=spec)


def _route_width(m: EagerModel, ids: torch.Tensor) -> Any:
    routed = [i for i in range(m.n_layers) if m.supports(Address("router_logits", i))]
    spec = SteeringSpec(Address("router_logits", routed[-1]), torch.ones(m.d_model))
    return m.run_with_cache(ids, [], steering=spec)


def _read_only(m: EagerModel, ids: torch.Tensor) -> Any:
    spec = SteeringSpec("lm_head", torch.ones(m.facts.vocab_size))
    return m.run_with_cache(ids, [], steering=spec)


CASES: dict[str, Case] = {
    "unknown point": (
        lambda m, ids: m.run_with_cache(ids, ["resid_psot.0"]),
        AddressError,
        r"did you mean resid_post",
    ),
    "layer out of range": (
        lambda m, ids: m.run_with_cache(ids, [resid_address(m, m.n_layers)]),
        PointUnsupported,
        r"resid_post\.\d.*Use a layer in 0\.\.\d",
    ),
    "steering beyond the last layer": (
        _steer_beyond_last_layer,
        SteeringSpecError,
        r"pick a layer below",
    ),
    "vector of the wrong width": (_bad_width, SteeringSpecError, r"pass a vector of length 128"),
    "list of the wrong width": (_bad_width_list, SteeringSpecError, r"pass a vector of length 128"),
    "integer vector": (_integer_vector, SteeringSpecError, r"\.float\(\)"),
    # One refusal per input on every backend (interp_core.steering): a tensor is read when used,
    # a list when the spec is built, and both say the same.
    "vector with NaN": (_nan_vector, SteeringSpecError, r"has nan at index 3.*pass finite floats"),
    "list with NaN": (_nan_list, SteeringSpecError, r"has nan at index 3.*pass finite floats"),
    "router vector of the wrong width": (_route_width, SteeringSpecError, r"length 4"),
    "steering a read-only point": (_read_only, SteeringSpecError, r"(instead|steer final_norm)"),
    "path vector of the wrong width": (_wrong_path_width, SteeringSpecError, r"pass a vector"),
    "empty prompt": (
        lambda m, ids: m.run_with_cache(torch.zeros((1, 0), dtype=torch.long), []),
        CapabilityUnsupported,
        r"pass at least one",
    ),
    "empty list of ids": (
        lambda m, ids: m.generate_sync([], max_new_tokens=2),
        CapabilityUnsupported,
        r"pass at least one",
    ),
    "empty text": (
        lambda m, ids: m.to_tokens("", prepend_bos=False),
        CapabilityUnsupported,
        r"pass non-empty text",
    ),
    "prompt longer than the context": (_too_long, CapabilityUnsupported, r"truncate it"),
    "prompt filling the context before generation": (
        _fills_the_context,
        CapabilityUnsupported,
        r"shorten it",
    ),
    "token id outside the vocabulary": (
        lambda m, ids: m.run_with_cache(torch.tensor([[0, m.facts.vocab_size]]), []),
        CapabilityUnsupported,
        r"must lie in 0\.\.\d+",
    ),
    "text instead of ids": (
        lambda m, ids: m.run_with_cache("The capital of France", []),
        CapabilityUnsupported,
        r"to_tokens\(text\)",
    ),
    "text instead of ids to generate": (
        lambda m, ids: m.generate_sync("The capital of France", max_new_tokens=2),
        CapabilityUnsupported,
        r"to_tokens\(text\)",
    ),
    "a batch to generate": (
        lambda m, ids: m.generate_sync(ids.repeat(2, 1), max_new_tokens=2),
        CapabilityUnsupported,
        r"once per row",
    ),
    "a batch to the lens": (
        lambda m, ids: m.logit_lens_sync(ids.repeat(2, 1)),
        CapabilityUnsupported,
        r"once per row",
    ),
    "detach=False without gradients": (
        lambda m, ids: m.run_with_cache(ids, [resid_address(m, 0)], detach=False),
        CapabilityUnsupported,
        r"requires_grad=True",
    ),
    "a mask of the wrong shape": (
        lambda m, ids: m.run_with_cache(ids, [], attention_mask=torch.ones(1, 3)),
        CapabilityUnsupported,
        r"tokens are",
    ),
    "unknown generate argument": (
        lambda m, ids: m.generate_sync(ids, max_tokens=3),
        CapabilityUnsupported,
        r"it takes",
    ),
    # Sampling arguments are malformed whatever the backend (interp_core.sampling).
    "negative temperature": (
        lambda m, ids: m.generate_sync(ids, temperature=-1.0),
        InvalidArgument,
        r"0 is greedy",
    ),
    "top_p above one": (
        lambda m, ids: m.generate_sync(ids, max_new_tokens=2, top_p=1.5),
        InvalidArgument,
        r"in \(0, 1\]",
    ),
    "lens top_k of zero": (
        lambda m, ids: m.logit_lens_sync(ids, top_k=0),
        InvalidArgument,
        r"top_k=0 must be a positive int",
    ),
}


# Cases that only mean something on some families, generated only there (never skipped): a
# router exists only on mixture-of-experts families, and ALiBi (BLOOM) has no context limit.
_MOE_FAMILIES = frozenset(
    {"mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "olmoe", "granitemoe", "deepseek_v3"}
    | {"gpt_oss", "deepseek_v4"}
)
_NO_CONTEXT_LIMIT = frozenset({"bloom"})


def _applies(case: str, family: str) -> bool:
    if CASES[case][0] is _route_width:
        return family in _MOE_FAMILIES
    if CASES[case][0] in (_too_long, _fills_the_context):
        return family not in _NO_CONTEXT_LIMIT
    return True


def _refused_and_unchanged(family: str, case: str, table: dict[str, Case]) -> None:
    """`table[case]`'s call raises its error naming its fix, and leaves the model as it was: no
    hook left behind, torch's functions unpatched, the same logits as before."""
    m = model(family)
    ids = prompt_ids(m)
    before = m.forward_logits(ids)
    # The model is shared by the process: transformers may have hooked it on an earlier call.
    hooks = hook_ids(m)
    call, error, fix = table[case]
    with pytest.raises(error) as raised:
        call(m, ids)
    assert re.search(fix, str(raised.value)), f"{case}: {raised.value}"
    assert hook_ids(m) == hooks, f"{case} left hooks installed"
    assert torch.nn.functional.softmax is _SOFTMAX
    assert torch.nn.functional.linear is _LINEAR
    assert torch.equal(m.forward_logits(ids), before)


@pytest.mark.parametrize(
    ("family", "case"),
    [(family, case) for family in FAMILY_NAMES for case in CASES if _applies(case, family)],
)
def test_bad_input_is_refused_and_the_model_still_works(family: str, case: str) -> None:
    _refused_and_unchanged(family, case, CASES)


# JetMoE's attention heads are routed experts' heads: no layer has attention matrices to refuse.
_NO_ATTENTION_MATRICES = {"jetmoe"}


@pytest.mark.parametrize("family", [f for f in FAMILY_NAMES if f not in _NO_ATTENTION_MATRICES])
def test_attention_matrices_are_refused_under_sdpa(family: str) -> None:
    eager = model(family)
    layer = next(i for i in range(eager.n_layers) if eager.supports(Address("attn_probs", i)))
    # Construction reads only the config; the refusal must come before any weights load.
    sdpa = EagerModel(str(build_family(family)), attn_implementation="sdpa")
    for name in ("attn_probs", "attn_scores"):
        address = Address(name, layer)
        verdict = sdpa.supports(address)
        assert not verdict
        assert "attn_implementation='eager'" in (verdict.reason or "")
        with pytest.raises(CapabilityUnsupported, match="attn_implementation='eager'"):
            sdpa.run_with_cache([[1, 2, 3]], [address])
    assert sdpa._tree is None, "the refusal loaded the weights"


def test_an_sdpa_model_still_serves_everything_else() -> None:
    sdpa = load_model(str(build_family("llama")), backend="eager", attn_implementation="sdpa")
    eager = model("llama")
    ids = prompt_ids(eager)
    with pytest.raises(CapabilityUnsupported):
        sdpa.run_with_cache(ids, ["attn_probs.0"])
    cache = sdpa.run_with_cache(ids, ["z.0", "resid_post.1"])
    reference = eager.run_with_cache(ids, ["z.0", "resid_post.1"])
    # SDPA and eager attention are different kernels: equal up to float32 rounding.
    for address in ("z.0", "resid_post.1"):
        torch.testing.assert_close(cache[address], reference[address], atol=1e-5, rtol=1e-5)


def test_fp8_is_refused_with_the_vllm_alternative() -> None:
    with pytest.raises(CapabilityUnsupported) as raised:
        load_model(str(build_family("llama")), backend="eager", quantization="fp8")
    assert "backend='vllm'" in str(raised.value)
    assert "FP8" in str(raised.value)
    with pytest.raises(CapabilityUnsupported, match="bnb-4bit"):
        load_model(str(build_family("llama")), backend="eager", quantization="int3")


@pytest.mark.parametrize("count", [0, -1, True, 1.5])
def test_num_gpus_must_be_a_positive_int(count: Any) -> None:
    with pytest.raises(InvalidArgument, match="num_gpus=1"):
        load_model(str(build_family("llama")), backend="eager", num_gpus=count)
    with pytest.raises(CapabilityUnsupported, match="positive int"):
        EagerModel(str(build_family("llama")), num_gpus=count)


def test_more_gpus_than_the_machine_has_are_refused() -> None:
    if torch.cuda.device_count() >= 64:
        pytest.skip("this machine has 64 GPUs")
    m = load_model(str(build_family("llama")), backend="eager", num_gpus=64)
    with pytest.raises(CapabilityUnsupported, match=r"pass num_gpus="):
        m.run_with_cache([[1, 2]], [])


# --- hostile and careless input (issue 12): library errors, never raw Python exceptions ----------
def _steer_at(m: EagerModel, positions: list[int]) -> SteeringSpec:
    return SteeringSpec(resid_address(m, 0), torch.ones(m.d_model), positions=positions)


def _past_the_prompt(m: EagerModel, ids: torch.Tensor) -> Any:
    # positions=[] is refused when the spec is built; a position the call never runs is too.
    return m.run_with_cache(ids, [], steering=_steer_at(m, [3, ids.shape[1]]))


def _past_the_generation(m: EagerModel, ids: torch.Tensor) -> Any:
    # Two new tokens: the forwards run positions 0..len; the last token is never fed back.
    beyond = ids.shape[1] + 1
    return m.generate_sync(ids, max_new_tokens=2, steering=_steer_at(m, [beyond]))


def _trunk_path(m: EagerModel) -> str:
    # path.model on most families (path.transformer on GPT-2): a ModelOutput, not a tensor.
    owner = trunk(m.hf_model)
    return "path." + next(n for n, mod in m.hf_model.named_modules() if mod is owner)


def _points_as_a_string_async(m: EagerModel, ids: torch.Tensor) -> Any:
    return asyncio.run(m.capture(ids, "resid_post.0"))


HOSTILE: dict[str, Case] = {
    "a layer of 5,000 digits": (
        lambda m, ids: m.run_with_cache(ids, ["resid_post." + "9" * 5000]),
        AddressError,
        r"5000 digits, beyond 2\*\*63 - 1.*n_layers",
    ),
    "a layer of 5,000 digits as an int": (
        lambda m, ids: m.run_with_cache(ids, [("resid_post", 10**5000)]),
        AddressError,
        r"a 16610-bit number, beyond 2\*\*63 - 1",
    ),
    "a stream coordinate of 30 digits": (
        lambda m, ids: m.run_with_cache(ids, ["resid_post.0.stream-" + "7" * 30]),
        AddressError,
        r"30 digits",
    ),
    "points as a bare string": (
        lambda m, ids: m.run_with_cache(ids, "resid_post.0"),
        InvalidArgument,
        r"pass \['resid_post\.0'\]",
    ),
    "points as a bare string, through the sync API": (
        lambda m, ids: sync.capture(m, ids, "resid_post.0"),
        InvalidArgument,
        r"pass \['resid_post\.0'\]",
    ),
    "points as a bare string, awaited": (
        _points_as_a_string_async,
        InvalidArgument,
        r"pass \['resid_post\.0'\]",
    ),
    "points as a bare string to capture_generation": (
        lambda m, ids: sync.capture_generation(m, ids, "resid_post.0"),
        InvalidArgument,
        r"pass \['resid_post\.0'\]",
    ),
    "points as None": (
        lambda m, ids: m.run_with_cache(ids, None),
        InvalidArgument,
        r"or \[\] for none",
    ),
    "points as None, through the sync API": (
        lambda m, ids: sync.run_with_cache(m, ids, None),
        InvalidArgument,
        r"or \[\] for none",
    ),
    "the trunk's path, which returns no tensor": (
        lambda m, ids: m.run_with_cache(ids, [_trunk_path(m)]),
        PointUnsupported,
        r"path\.\w+: the module returned a \w+, not a tensor; address a module that returns",
    ),
    "bool tokens": (
        lambda m, ids: m.run_with_cache(ids.bool(), []),
        CapabilityUnsupported,
        r"torch\.bool.*\.long\(\)",
    ),
    "uint8 tokens": (
        lambda m, ids: m.run_with_cache(ids.to(torch.uint8), []),
        CapabilityUnsupported,
        r"torch\.uint8.*\.long\(\)",
    ),
    "a list of bools": (
        lambda m, ids: m.generate_sync([[True, False, True]], max_new_tokens=1),
        CapabilityUnsupported,
        r"torch\.bool",
    ),
    "a ragged batch": (
        lambda m, ids: m.run_with_cache([[1, 2, 3], [1, 2]], []),
        CapabilityUnsupported,
        r"pad them and pass attention_mask",
    ),
    "an id too large for int64": (
        lambda m, ids: m.run_with_cache([[1, 2**70]], []),
        CapabilityUnsupported,
        r"could not be read as integer ids",
    ),
    "the lens over no layers": (
        lambda m, ids: m.logit_lens_sync(ids, []),
        InvalidArgument,
        r"pass None for every layer",
    ),
    "the lens at attn_probs": (
        lambda m, ids: m.logit_lens_sync(ids, point="attn_probs"),
        InvalidArgument,
        r"not a residual-stream activation.*use one of resid_pre",
    ),
    "the lens at z": (
        lambda m, ids: m.logit_lens_sync(ids, point="z"),
        InvalidArgument,
        r"use one of resid_pre",
    ),
    "the lens layers as a string": (
        lambda m, ids: m.logit_lens_sync(ids, "01"),
        InvalidArgument,
        r"pass a list such as \[0, 3\]",
    ),
    "the lens given a layer twice": (
        lambda m, ids: m.logit_lens_sync(ids, [0, 0]),
        InvalidArgument,
        r"list it once",
    ),
    "temperature as a string": (
        lambda m, ids: m.generate_sync(ids, max_new_tokens=2, temperature="0.5"),
        InvalidArgument,
        r"temperature='0\.5' must be a finite number",
    ),
    "a mask of twos": (
        lambda m, ids: m.run_with_cache(ids, [], attention_mask=torch.full(ids.shape, 2)),
        CapabilityUnsupported,
        r"holds \[2\].*pass 0 and 1 only",
    ),
    "a mask of halves": (
        lambda m, ids: m.run_with_cache(ids, [], attention_mask=torch.full(ids.shape, 0.5)),
        CapabilityUnsupported,
        r"pass 0 and 1 only",
    ),
    "a ragged mask": (
        lambda m, ids: m.run_with_cache(ids, [], attention_mask=[[1, 1], [1]]),
        CapabilityUnsupported,
        r"attention_mask could not be read",
    ),
    "a position past the prompt": (
        _past_the_prompt,
        SteeringSpecError,
        r"positions \[\d+\] at resid_post\.0.* lie beyond this capture's \d+-token prompt.*"
        r"list positions below \d+",
    ),
    "a position past the generation": (
        _past_the_generation,
        SteeringSpecError,
        r"beyond this generation of \d+ prompt tokens and up to 2 new ones.*list positions below",
    ),
}
_HOSTILE_FAMILIES = ("llama", "gpt2", "deepseek_v4")


def _hostile_applies(case: str, family: str) -> bool:
    stream = "stream coordinate" in case
    return stream == (family == "deepseek_v4") or not stream


@pytest.mark.parametrize(
    ("family", "case"),
    [(f, c) for f in _HOSTILE_FAMILIES for c in HOSTILE if _hostile_applies(c, f)],
)
def test_hostile_input_gets_a_library_error_and_the_model_still_works(
    family: str, case: str
) -> None:
    _refused_and_unchanged(family, case, HOSTILE)


def test_positions_within_reach_still_steer() -> None:
    # The last position of the prompt, and the last position a generation feeds back, are kept.
    m = model("llama")
    ids = prompt_ids(m)
    last = ids.shape[1] - 1
    plain = m.run_with_cache(ids, ["resid_post.1"])["resid_post.1"]
    steered = m.run_with_cache(ids, ["resid_post.1"], steering=_steer_at(m, [last]))
    assert torch.equal(steered["resid_post.1"][:, :last], plain[:, :last])
    assert not torch.equal(steered["resid_post.1"][:, last], plain[:, last])
    m.generate_sync(ids, max_new_tokens=2, steering=_steer_at(m, [ids.shape[1]]))


def test_a_call_after_shutdown_is_refused_naming_warmup_and_warmup_serves_again() -> None:
    m = load_model(str(build_family("llama")), backend="eager")
    assert isinstance(m, EagerModel)
    ids = prompt_ids(m)
    before = m.run_with_cache(ids, ["resid_post.1"])["resid_post.1"].clone()
    stream = sync.generate_stream(m, ids, max_new_tokens=4, temperature=0.0)
    next(stream)  # a stream suspended across the shutdown
    sync.shutdown(m)
    calls: list[Callable[[], Any]] = [
        lambda: m.run_with_cache(ids, ["resid_post.1"]),
        lambda: sync.capture(m, ids, ["resid_post.1"]),
        lambda: m.generate_sync(ids, max_new_tokens=2),
        lambda: list(sync.generate_stream(m, ids, max_new_tokens=2)),
        lambda: next(stream),
        lambda: m.logit_lens_sync(ids),
        lambda: m.decode_residuals_sync(before),
        lambda: m.hf_model,
    ]
    for call in calls:
        with pytest.raises(CapabilityUnsupported, match=r"was shut down.*call warmup\(\)"):
            call()
    assert m._hf_model is None and m._tree is None, "a refused call loaded the weights again"
    stream.close()
    sync.shutdown(m)  # idempotent
    sync.warmup(m)
    assert torch.equal(m.run_with_cache(ids, ["resid_post.1"])["resid_post.1"], before)


def _attention_bytes(m: EagerModel, seq: int) -> int:
    heads = m.facts.n_heads
    return m.n_layers * heads * seq * seq * 4  # float32, batch 1


def test_a_capture_over_the_budget_is_refused_before_any_work() -> None:
    ids = prompt_ids(model("llama"))
    seq = ids.shape[1]
    points = [Address("attn_scores", layer) for layer in range(model("llama").n_layers)]
    size = _attention_bytes(model("llama"), seq)
    tight = load_model(str(build_family("llama")), backend="eager", capture_budget_bytes=size - 1)
    assert isinstance(tight, EagerModel)
    forwards: list[int] = []
    handle = tight.hf_model.register_forward_pre_hook(lambda *_: forwards.append(1))
    try:
        with pytest.raises(CapabilityUnsupported) as raised:
            tight.run_with_cache(ids, points)
        message = str(raised.value)
        assert f"would hold {size / 1024:.1f} KiB" in message
        assert f"budget of {(size - 1) / 1024:.1f} KiB (capture_budget_bytes)" in message
        assert "raise capture_budget_bytes" in message
        with pytest.raises(CapabilityUnsupported, match=r"capture_budget_bytes"):
            sync.capture_generation(tight, ids, points[:1], max_new_tokens=64)
        assert forwards == [], "the refusal ran the model"
        tight.run_with_cache(ids, points[:1])  # within the budget
        assert forwards == [1]
    finally:
        handle.remove()
    exact = load_model(str(build_family("llama")), backend="eager", capture_budget_bytes=size)
    assert exact.run_with_cache(ids, points)[points[0]].shape[-1] == seq


def test_the_default_budget_is_a_share_of_available_memory(monkeypatch: Any) -> None:
    import interp_eager.arguments as eager_arguments

    m = load_model(str(build_family("llama")), backend="eager")
    ids = prompt_ids(m)
    points = [Address("attn_scores", layer) for layer in range(m.n_layers)]
    size = _attention_bytes(m, ids.shape[1])
    monkeypatch.setattr(eager_arguments, "available_memory", lambda device: size)  # half is free
    with pytest.raises(CapabilityUnsupported, match=r"50% of the .* available on cpu"):
        m.run_with_cache(ids, points)
    monkeypatch.setattr(eager_arguments, "available_memory", lambda device: 2 * size)
    assert m.run_with_cache(ids, points)[points[0]].shape[-1] == ids.shape[1]


@pytest.mark.parametrize("budget", [0, -5, 1.5, True, "1GiB"])
def test_a_malformed_budget_is_refused(budget: Any) -> None:
    with pytest.raises(InvalidArgument, match=r"capture_budget_bytes=.*positive int"):
        EagerModel(str(build_family("llama")), capture_budget_bytes=budget)
