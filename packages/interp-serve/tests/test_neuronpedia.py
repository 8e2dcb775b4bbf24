"""Neuronpedia's inference API at `/neuronpedia` on a real `interp serve` (eager, loopback).

One server for the module, with the suite's two tiny SAELens SAEs loaded under Neuronpedia
source names (`1-res-test`, `0-res-test`: one source set, `res-test`) and a Neuronpedia secret.
Every served route's answer is checked against the contract's own response schema
(`interp_serve.neuronpedia.contract`), and its values against the same computation in-process
(`local`, the suite's eager reference) or our own API on the same server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
import serve_helpers
import torch
from neuronpedia_helpers import (
    D_SAE,
    L0,
    L1,
    NEW_TOKENS,
    SECRET,
    Z1,
    brute_force_all,
    every_route_fits_the_contract,
    features,
    ok,
    response_schema,
    route_bodies,
    steer_body,
)

from interp_core import sync
from interp_core.steering import SteeringSpec
from interp_serve.neuronpedia import REFUSED, contract
from interp_testmodels import TEST_PROMPT


@pytest.fixture(scope="module")
def saes(np_saes: dict[str, Any]) -> dict[str, Any]:
    return np_saes


@pytest.fixture(scope="module")
def ours(np_ours: Any) -> Any:
    return np_ours


def test_every_served_route_answers_within_the_contract(np: Any, local: Any) -> None:
    every_route_fits_the_contract(np, local.d_model)
    capabilities = np.get("/v1/capabilities").json()
    assert [s["source"] for s in capabilities["sources"]] == [L1, L0, Z1]
    assert sorted(capabilities["refusedRoutes"]) == sorted(REFUSED)
    assert capabilities["sae_sets"] == ["att-test", "res-test"]
    assert capabilities["backend"] == "eager" and capabilities["num_layers"] == 2
    assert capabilities["endpoints"]["dfa"] is True
    assert capabilities["endpoints"]["lens_logit"] is True
    assert np.post("/initialize").json()["status"] == "initialized"
    assert np.post("/initialize", params={"custom_hf_model_id": "other/model"}).status_code == 400
    assert np.get("/v1/steer/health").json()["status"] == "healthy"


def test_the_validator_sees_a_wrong_answer() -> None:
    schema = contract.schema("ActivationSingleResponse")
    good = {"activation": {"values": [1.0], "maxValue": 1.0, "maxValueIndex": 0}, "tokens": ["a"]}
    good["tokensIsSpecial"] = [False]
    assert contract.problems(good, schema) == []
    bad = json.loads(json.dumps(good))
    bad["activation"]["maxValueIndex"] = 0.5
    del bad["tokensIsSpecial"]
    found = {(where, kind) for where, _, kind in contract.problems(bad, schema)}
    assert found == {
        (("activation", "maxValueIndex"), "integer_type"),
        (("tokensIsSpecial",), "missing"),
    }
    steer = contract.schema("SteerCompletionRequest")
    assert any(k == "enum" for _, _, k in contract.problems({"steerMethod": "X"}, steer))


def _encode(local: Any, sae: Any, prompt: str = TEST_PROMPT) -> torch.Tensor:
    ids = local.to_tokens(prompt)
    cache = sync.capture(local, ids, [str(sae.address)])
    return sae.encode(cache[sae.address][0].float())  # [seq, d_sae]


def test_activation_single_equals_the_encoded_capture(
    np: Any, local: Any, saes: dict[str, Any]
) -> None:
    got = ok(
        np,
        "/v1/activation/single",
        {"model": "m", "prompt": TEST_PROMPT, "source": L1, "index": "5"},
    )
    expected = _encode(local, saes[L1])[:, 5]
    values = torch.tensor(got["activation"]["values"])
    assert values.shape == expected.shape
    assert float((values - expected).abs().max()) <= 1e-5
    assert got["activation"]["maxValueIndex"] == int(expected.argmax())
    ids = local.to_tokens(TEST_PROMPT)[0].tolist()
    assert got["tokens"] == local.to_str_tokens(ids)
    # BOS is the tokenizer's special token; the prompt's words are not.
    assert got["tokensIsSpecial"][0] is True and not any(got["tokensIsSpecial"][1:])
    # A raw vector at a hook: the dot product of that hook's activation with it.
    direction = torch.linspace(-1, 1, local.d_model)
    body = {"model": "m", "prompt": TEST_PROMPT, "hook": "blocks.0.hook_resid_post"}
    got = ok(np, "/v1/activation/single", {**body, "vector": direction.tolist()})
    cache = sync.capture(local, local.to_tokens(TEST_PROMPT), ["resid_post.0"])
    expected = cache["resid_post.0"][0].float() @ direction
    assert float((torch.tensor(got["activation"]["values"]) - expected).abs().max()) <= 1e-4


@pytest.mark.parametrize("by_index", [[], [2, 3]])
def test_activation_all_ranks_equal_a_brute_force_ranking(
    np: Any, local: Any, saes: dict[str, Any], by_index: list[int]
) -> None:
    body = {
        "model": "m",
        "prompt": TEST_PROMPT,
        "sourceSet": "res-test",
        "selectedSources": [],
        "sortByTokenIndexes": by_index,
        "ignoreBos": True,
        "numResults": 12,
    }
    got = ok(np, "/v1/activation/all", body)
    dense = {L1: _encode(local, saes[L1]), L0: _encode(local, saes[L0])}
    expected = brute_force_all(dense, by_index, 12)
    assert [(a["source"], a["index"]) for a in got["activations"]] == expected
    first = got["activations"][0]
    column = dense[first["source"]][:, first["index"]].clone()
    column[0] = 0
    assert float((torch.tensor(first["values"]) - column).abs().max()) <= 1e-5
    if by_index:
        assert abs(first["sumValues"] - float(column[by_index].sum())) <= 1e-4


def test_topk_by_token_equals_our_features_api(np: Any, ours: Any) -> None:
    body = {"model": "m", "prompt": TEST_PROMPT, "source": L0, "ignoreBos": True, "topK": 4}
    got = ok(np, "/v1/activation/topk-by-token", body)
    mine = ours.post("/v1/features", json={"text": TEST_PROMPT, "saes": [L0], "top_k": 4})
    assert mine.status_code == 200, mine.text
    inline = mine.json()["interp"]["inline"]
    indices, values = inline[f"{L0}.indices"][0], inline[f"{L0}.values"][0]
    assert [r["tokenPosition"] for r in got["results"]] == list(range(1, len(indices)))
    for result in got["results"]:
        position = result["tokenPosition"]
        assert [f["featureIndex"] for f in result["topFeatures"]] == indices[position]
        found = [f["activationValue"] for f in result["topFeatures"]]
        assert max(abs(a - b) for a, b in zip(found, values[position], strict=True)) <= 1e-6


def _generate(local: Any, steering: Any) -> str:
    ids = local.to_tokens(TEST_PROMPT)
    generation = sync.generate(
        local, ids, max_new_tokens=NEW_TOKENS, temperature=0.0, steering=steering
    )
    return generation.text


@pytest.mark.parametrize("method", ["SIMPLE_ADDITIVE", "ORTHOGONAL_DECOMP", "PROJECTION_CAP"])
def test_steer_completion_equals_our_generations(
    np: Any, ours: Any, local: Any, saes: dict[str, Any], method: str
) -> None:
    normalize = method == "PROJECTION_CAP"
    body = steer_body(steerMethod=method, normalizeSteering=normalize)
    if method == "PROJECTION_CAP":
        body["features"] = features((L0, 3, -1.0))
    got = {o["type"]: o["output"] for o in ok(np, "/v1/steer/completion", body)["outputs"]}
    row = saes[L0].decoder_row(3)
    if method == "SIMPLE_ADDITIVE":
        spec = SteeringSpec(saes[L0].write_address, row, "add", 12.0)
    elif method == "ORTHOGONAL_DECOMP":
        spec = SteeringSpec(saes[L0].write_address, row, "orthogonal", 12.0)
    else:
        spec = SteeringSpec(saes[L0].write_address, row / row.norm(), "projection_cap", max=-2.0)
    assert got["STEERED"] == _generate(local, [spec])
    assert got["STEERED"] != got["DEFAULT"]  # the steering changed the text
    # DEFAULT is a plain greedy generation: our own completions route gives the same text.
    model = ours.get("/v1/models").json()["data"][0]["id"]
    plain = {"model": model, "prompt": TEST_PROMPT, "max_tokens": NEW_TOKENS, "temperature": 0}
    assert got["DEFAULT"] == ours.post("/v1/completions", json=plain).json()["choices"][0]["text"]


def test_steer_streams_the_same_outputs(np: Any) -> None:
    body = steer_body(stream=True)
    frames = []
    with np.stream("POST", "/v1/steer/completion", json=body) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
    schema = response_schema("/v1/steer/completion")
    assert all(contract.problems(frame, schema) == [] for frame in frames)
    whole = ok(np, "/v1/steer/completion", steer_body())
    assert frames[-1] == whole
    assert len(frames) >= 2


def test_steer_chat_default_equals_our_chat_route(np: Any, ours: Any) -> None:
    chat = [{"role": "user", "content": TEST_PROMPT}]
    body = steer_body(prompt=chat, steerSpecialTokens=False, types=["DEFAULT"])
    got = ok(np, "/v1/steer/completion-chat", body)
    model = ours.get("/v1/models").json()["data"][0]["id"]
    plain = {"model": model, "messages": chat, "max_tokens": NEW_TOKENS, "temperature": 0}
    text = ours.post("/v1/chat/completions", json=plain).json()["choices"][0]["message"]["content"]
    (output,) = got["outputs"]
    assert output["chatTemplate"][-1] == {"role": "assistant", "content": text}
    assert output["raw"] == got["input"]["raw"] + text


def test_sae_vector_and_decoder_neighbours(np: Any, saes: dict[str, Any]) -> None:
    got = ok(np, "/v1/util/sae-vector", {"model": "m", "source": L0, "index": 4})
    assert torch.equal(torch.tensor(got["vector"]), saes[L0].W_dec[4].float())
    assert got["hookName"] == "blocks.0.hook_resid_post"
    feature = {"model": "m", "source": L0, "index": 4}
    body = {"model": "m", "source": L1, "numResults": 6, "feature": feature}
    got = ok(np, "/v1/util/sae-topk-by-decoder-cossim", body)
    rows = saes[L1].W_dec.float()
    query = saes[L0].W_dec[4].float()
    cosines = (rows @ query) / (rows.norm(dim=-1) * query.norm())
    expected = torch.sort(cosines, descending=True, stable=True).indices[:6].tolist()
    found = got["topkDecoderCossimFeatures"]
    assert [f["feature"]["index"] for f in found] == expected
    assert abs(found[0]["cosineSimilarity"] - float(cosines[expected[0]])) <= 1e-5
    assert got["feature"] == feature


def test_the_secret_guards_the_mount_and_keys_still_guard_ours(np_server: Any) -> None:
    import httpx

    url = f"{np_server.url}/neuronpedia"
    body = {"model": "m", "text": "hi"}
    for headers in ({}, {"X-SECRET-KEY": "wrong"}, np_server.headers()):
        answer = httpx.post(f"{url}/v1/tokenize", json=body, headers=headers, timeout=30)
        assert answer.status_code == 401
        assert answer.json() == {"error": "Invalid or missing X-SECRET-KEY header"}
    assert httpx.get(f"{url}/health", timeout=30).json() == {"status": "healthy"}
    # The mount's secret is no key to the rest of the server.
    answer = httpx.get(f"{np_server.url}/v1/saes", headers={"X-SECRET-KEY": SECRET}, timeout=30)
    assert answer.status_code == 401
    assert SECRET not in np_server.log_text()
    # The mount's answers are counted under their own routes, apart from ours.
    good = httpx.post(f"{url}/v1/tokenize", json=body, headers={"X-SECRET-KEY": SECRET})
    assert good.status_code == 200
    metrics = httpx.get(f"{np_server.url}/metrics", headers=np_server.headers(), timeout=30).text
    assert 'route="/neuronpedia/v1/tokenize",status="200"' in metrics
    assert 'route="/v1/tokenize"' not in metrics


def test_refusals_take_the_contracts_shapes(np: Any) -> None:
    body = {"model": "m", "prompt": TEST_PROMPT, "source": "9-nope", "index": "1"}
    answer = np.post("/v1/activation/single", json=body)
    assert answer.status_code == 400
    assert f"the served sources are {L0}, {Z1}, {L1}" in answer.json()["error"]
    # Both a feature and a vector, or an index past the SAE: refused, not guessed.
    both = {**body, "source": L1, "hook": "blocks.0.hook_resid_post", "vector": [0.0]}
    assert "exactly one" in np.post("/v1/activation/single", json=both).json()["error"]
    past = np.post("/v1/activation/single", json={**body, "source": L1, "index": str(D_SAE)})
    assert past.status_code == 400 and "0 to 63" in past.json()["error"]
    # A body the contract does not allow: 422 in its validation shape.
    answer = np.post("/v1/steer/completion", json=steer_body(steerMethod="SIDEWAYS"))
    assert answer.status_code == 422
    assert contract.problems(answer.json(), contract.schema("HTTPValidationError")) == []
    assert answer.json()["detail"][0]["loc"] == ["body", "steerMethod"]
    for path in REFUSED:
        answer = np.post(path, json={})
        assert answer.status_code == 400 and "not served" in answer.json()["error"], path
    no_set = {**route_bodies(8)["/v1/activation/all"], "prompt": "x", "sourceSet": "att-x"}
    assert (
        "served sets are att-test, res-test"
        in np.post("/v1/activation/all", json=no_set).json()["error"]
    )


def test_source_raw_and_attention_equal_the_capture(
    np: Any, local: Any, saes: dict[str, Any]
) -> None:
    body = {"model": "m", "source": L0, "prompts": [TEST_PROMPT]}
    (got,) = ok(np, "/v1/activation/source", body)["results"]
    dense = _encode(local, saes[L0])
    expected = {
        str(f): [[t, float(dense[t, f])] for t in range(dense.shape[0]) if dense[t, f] != 0]
        for f in range(dense.shape[1])
        if bool((dense[:, f] != 0).any())
    }
    assert sorted(got["activeFeatures"]) == sorted(expected)
    for feature, pairs in expected.items():
        found = got["activeFeatures"][feature]
        assert [p[0] for p in found] == [p[0] for p in pairs]
        assert max(abs(a[1] - b[1]) for a, b in zip(found, pairs, strict=True)) <= 1e-5
    ids = local.to_tokens(TEST_PROMPT)
    cache = sync.capture(local, ids, ["resid_post.1", "attn_probs.1"])
    (raw,) = ok(np, "/v1/activation/raw", {"prompts": [TEST_PROMPT], "layers": [1]})["results"]
    assert raw["tokenIds"] == ids[0].tolist()
    (layer,) = raw["activations"]
    assert layer["layer"] == 1 and layer["tokenIndices"] == [ids.shape[1] - 1]
    final = cache["resid_post.1"][0, -1].float()
    assert float((torch.tensor(layer["values"][0]) - final).abs().max()) <= 1e-5
    body = {"model": "m", "prompt": TEST_PROMPT, "layer": 1, "head": 1}
    got = ok(np, "/v1/activation/attention", body)
    pattern = cache["attn_probs.1"][0, 1].float()
    seq = pattern.shape[0]
    assert got["seqLen"] == seq
    pairs = zip(got["attentionIndices"], got["attentionValues"], strict=True)
    kept = {divmod(i, seq): v for i, v in pairs}
    for q in range(seq):
        keys = {k for (row, k) in kept if row == q}
        top = torch.topk(pattern[q], k=min(8, seq)).indices.tolist()
        assert keys == {k for k in top if pattern[q, k] > 0}
    assert all(abs(v - float(pattern[q, k])) <= 1e-6 for (q, k), v in kept.items())
    assert abs(got["maxActivation"] - float(pattern[1:, 1:].max())) <= 1e-6


# The hostile-input harness over the mount: schemathesis generates requests (valid and not) from
# the contract itself; no answer may be a 5xx, a 200 must fit the contract, and every refusal
# must take one of the contract's error shapes. Bounded like tests/test_fuzz.py: derandomized,
# a few examples per route, and a wall-clock budget after which nothing more is sent.
FUZZ_EXAMPLES = 6
FUZZ_BUDGET_S = 25.0
_fuzz_budget = serve_helpers.FuzzBudget(FUZZ_BUDGET_S)


@schemathesis.openapi.from_dict(contract.contract()).parametrize()
@serve_helpers.fuzz_settings(FUZZ_EXAMPLES)
def test_hostile_requests_get_contract_shaped_answers(case: Any, np_server: Any) -> None:
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import response_schema_conformance

    if _fuzz_budget.spent():
        return
    for key in ("nCompletionTokens", "numCompletionTokens"):
        if isinstance(case.body, dict) and isinstance(case.body.get(key), int):
            # Long generations are priced and allowed; here they would only spend the budget.
            case.body[key] = min(case.body[key], 3)
    headers = {"X-SECRET-KEY": SECRET}
    url = f"{np_server.url}/neuronpedia"
    response = case.call(base_url=url, headers=headers, timeout=60)
    case.validate_response(
        response, checks=[not_a_server_error, response_schema_conformance], headers=headers
    )
    if response.status_code >= 400 and response.status_code != 422:
        answer = response.json()
        # Neuronpedia's shape: {"error"}, and its 429 says {"busy": true} as well.
        assert sorted(answer) in (["error"], ["busy", "error"]), response.text
        assert isinstance(answer["error"], str), response.text


def test_dfa_sums_to_the_features_pre_activation(np: Any, local: Any, saes: dict[str, Any]) -> None:
    sae = saes[Z1]
    dense = _encode(local, sae)  # [seq, d_sae]
    feature = int(dense.max(dim=0).values.argmax())  # the feature that fires most
    body = {"model": "m", "prompt": TEST_PROMPT, "source": Z1, "index": str(feature)}
    got = ok(np, "/v1/activation/single", body)["activation"]
    target = got["maxValueIndex"]
    assert got["dfaTargetIndex"] == target == int(dense[:, feature].argmax())
    dfa = torch.tensor(got["dfaValues"], dtype=torch.float64)
    assert dfa.shape == (dense.shape[0],)
    assert got["dfaMaxValue"] == pytest.approx(float(dfa.max()))
    # The decomposition is exact: the per-source terms plus the encoder's biases are the
    # pre-activation, which a ReLU feature that fires equals.
    encoder = sae.W_enc[:, feature].double()
    bias = float(sae.b_enc[feature]) - float(sae.input_bias.double() @ encoder)
    assert float(dense[target, feature]) > 0
    assert float(dfa.sum()) + bias == pytest.approx(float(dense[target, feature]), abs=1e-4)
    # Causal: no source after the target contributes.
    assert all(v == 0 for v in got["dfaValues"][target + 1 :])
    # activation/all carries the same DFA for the features of a z SAE it ranks.
    body = {
        "model": "m",
        "prompt": TEST_PROMPT,
        "sourceSet": "att-test",
        "selectedSources": [],
        "sortByTokenIndexes": [],
        "ignoreBos": False,
        "numResults": 3,
    }
    ranked = ok(np, "/v1/activation/all", body)["activations"]
    assert (ranked[0]["source"], ranked[0]["index"]) == (Z1, feature)
    assert ranked[0]["dfaValues"] == pytest.approx(got["dfaValues"], abs=1e-6)
    # A residual SAE carries no DFA fields (the contract's optional ones are left out).
    body = {"model": "m", "prompt": TEST_PROMPT, "source": L1, "index": "5"}
    plain = ok(np, "/v1/activation/single", body)["activation"]
    assert "dfaValues" not in plain


def test_steer_logprobs_are_the_greedy_tokens(np: Any, local: Any) -> None:
    got = ok(np, "/v1/steer/completion", steer_body(types=["DEFAULT"], nLogprobs=3))
    (output,) = got["outputs"]
    logprobs = output["logprobs"]
    assert len(logprobs) == NEW_TOKENS
    assert "".join(p["token"] for p in logprobs) == output["output"]
    ids = local.to_tokens(TEST_PROMPT)
    expected = sync.generate(
        local, ids, max_new_tokens=NEW_TOKENS, temperature=0.0, n_logprobs=3
    ).logprobs
    for position, want in zip(logprobs, expected, strict=True):
        # Greedy: the emitted token is the most likely candidate, with the same score.
        assert len(position["topLogprobs"]) == 3
        assert position["topLogprobs"][0]["token"] == position["token"]
        assert position["logprob"] == pytest.approx(want.logprob, abs=1e-5)
        assert position["topLogprobs"][0]["logprob"] == pytest.approx(want.logprob, abs=1e-5)
