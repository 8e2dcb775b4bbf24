"""Does bad input get the library's own error, naming the fix, and leave the model working?

Every family, every case: the call raises an `InterpError` subclass whose message says what to do
instead, and afterwards no hook is left on any module, torch's patched functions are restored,
and a plain forward gives bit-identical logits to one made before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from eager_helpers import model, no_hooks_left, prompt_ids, resid_address

from interp_core import load_model
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


@pytest.mark.parametrize(
    ("family", "case"),
    [(family, case) for family in FAMILY_NAMES for case in CASES if _applies(case, family)],
)
def test_bad_input_is_refused_and_the_model_still_works(family: str, case: str) -> None:
    m = model(family)
    ids = prompt_ids(m)
    before = m.forward_logits(ids)
    call, error, fix = CASES[case]
    with pytest.raises(error) as raised:
        call(m, ids)
    assert re.search(fix, str(raised.value)), f"{case}: {raised.value}"
    assert no_hooks_left(m), f"{case} left hooks installed"
    assert torch.nn.functional.softmax is _SOFTMAX
    assert torch.nn.functional.linear is _LINEAR
    assert torch.equal(m.forward_logits(ids), before)


@pytest.mark.parametrize("family", FAMILY_NAMES)
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
