"""What the Neuronpedia tests share: the sources the mount serves, its secret, and the check
that an answer fits the contract (`interp_serve.neuronpedia.contract`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import serve_helpers
import torch

from interp_serve.neuronpedia import SERVED, contract
from interp_testmodels import TEST_PROMPT

D_SAE = 64
SECRET = "np-secret-0123456789"
L1, L0 = "1-res-test", "0-res-test"
Z1 = "1-att-test"  # an SAE on layer 1's z (attn.hook_z): the one DFA is computed for
NEW_TOKENS = 6


def write_sources(root: Path, d_model: int, z_width: int) -> dict[str, Path]:
    """The suite's two residual SAEs, and one on layer 1's z."""
    dirs = serve_helpers.write_saes(root, d_model, D_SAE)
    from sae_files import write_saelens  # importable once write_saes ran

    hook = "blocks.1.attn.hook_z"
    write_saelens(root / "z1", "standard", d_in=z_width, d_sae=D_SAE, hook_name=hook, seed=3)
    return {**dirs, "z1": root / "z1"}


def source_args(dirs: dict[str, Path]) -> tuple[str, ...]:
    return (
        *("--sae", f"{L1}={dirs['relu']}", "--sae", f"{L0}={dirs['jr0']}"),
        *("--sae", f"{Z1}={dirs['z1']}"),
    )


def start_with_secret(model_path: Path, logs: Path, args: tuple[str, ...], **options: Any) -> Any:
    """A server whose mount wants SECRET (set for the server's process only)."""
    previous = os.environ.get("INTERP_NEURONPEDIA_SECRET")
    os.environ["INTERP_NEURONPEDIA_SECRET"] = SECRET
    try:
        return serve_helpers.start_server(model_path, logs, args=args, **options)
    finally:
        if previous is None:
            del os.environ["INTERP_NEURONPEDIA_SECRET"]
        else:
            os.environ["INTERP_NEURONPEDIA_SECRET"] = previous


def response_schema(path: str, method: str = "post") -> dict[str, Any]:
    operation = contract.contract()["paths"][path][method]
    return operation["responses"]["200"]["content"]["application/json"]["schema"]


def ok(client: Any, path: str, body: dict[str, Any]) -> Any:
    """POST `body`, assert 200 and that the answer fits the contract's response schema."""
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert contract.problems(got, response_schema(path)) == []
    return got


def features(*items: tuple[str, int, float]) -> list[dict[str, Any]]:
    return [{"model": "m", "source": s, "index": i, "strength": v} for s, i, v in items]


def steer_body(**extra: Any) -> dict[str, Any]:
    body = {
        "prompt": TEST_PROMPT,
        "model": "m",
        "steerMethod": "SIMPLE_ADDITIVE",
        "normalizeSteering": False,
        "types": ["STEERED", "DEFAULT"],
        "nCompletionTokens": NEW_TOKENS,
        "temperature": 0,
        "strengthMultiplier": 2.0,
        "freqPenalty": 0,
        "seed": 7,
        "features": features((L0, 3, 6.0)),
    }
    return {**body, **extra}


def route_bodies(d_model: int) -> dict[str, dict[str, Any]]:
    """One request per served route, built from its request schema's required fields."""
    prompts = [TEST_PROMPT, TEST_PROMPT.upper()]
    chat = [{"role": "user", "content": TEST_PROMPT}]
    all_body = {
        "model": "m",
        "sourceSet": "res-test",
        "selectedSources": [],
        "sortByTokenIndexes": [],
        "ignoreBos": True,
        "numResults": 5,
    }
    topk = {"model": "m", "source": L1, "ignoreBos": False, "topK": 3}
    single = {"model": "m", "source": L1, "index": "5"}
    return {
        "/v1/activation/single": {**single, "prompt": TEST_PROMPT},
        "/v1/activation/single-batch": {**single, "prompts": prompts},
        "/v1/activation/all": {**all_body, "prompt": TEST_PROMPT},
        "/v1/activation/all-batch": {**all_body, "prompts": prompts},
        "/v1/activation/topk-by-token": {**topk, "prompt": TEST_PROMPT},
        "/v1/activation/topk-by-token-batch": {**topk, "prompts": prompts},
        "/v1/steer/completion": steer_body(nLogprobs=2),
        "/v1/steer/completion-chat": steer_body(prompt=chat, steerSpecialTokens=False),
        "/v1/activation/source": {"model": "m", "source": L0, "prompts": prompts},
        "/v1/activation/raw": {"prompts": prompts, "layers": [0, 1]},
        "/v1/activation/attention": {"model": "m", "prompt": TEST_PROMPT, "layer": 1, "head": 1},
        "/v1/tokenize": {"model": "m", "text": TEST_PROMPT},
        "/v1/apply-chat-template": {"messages": chat},
        "/v1/lens/prompt": {
            "model": "m",
            "type": ["LOGIT_LENS"],
            "prompt": TEST_PROMPT,
            "topN": 3,
            "stream": False,
            "numCompletionTokens": 2,
            "temperature": 0,
        },
        "/v1/util/sae-vector": {"model": "m", "source": L0, "index": 4},
        "/v1/util/sae-topk-by-decoder-cossim": {
            "model": "m",
            "source": L1,
            "numResults": 4,
            "vector": [1.0] * d_model,
        },
    }


_SPAN = {
    "message_index": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    "role": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "channel": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "section": {"anyOf": [{"type": "string"}, {"type": "null"}]},
}
_TOKEN = {
    "position": {"type": "integer"},
    "token": {"type": "string"},
    "id": {"type": "integer"},
    "is_generated": {"type": "boolean"},
    "is_char_continuation": {"type": "boolean"},
    **_SPAN,
}
_SLICE = {
    "type": "object",
    "required": ["type", "top_tokens", "top_probs"],
    "properties": {
        "type": {"enum": ["LOGIT_LENS", "JACOBIAN_LENS"]},
        "top_tokens": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        "top_probs": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
    },
}
# Neuronpedia's lens frames (LensMetaMessage, LensPromptTokensMessage, LensTokenMessage,
# LensDoneMessage at the contract's commit), as JSON Schema for the contract's validator.
FRAMES: dict[str, dict[str, Any]] = {
    "meta": {
        "type": "object",
        "required": ["kind", "model", "types", "layers_by_type", "top_n", "prompt_len",
                     "num_completion_tokens", "temperature", "prepend_bos", "reuse_len"],
        "properties": {
            "types": {"type": "array", "items": {"enum": ["LOGIT_LENS", "JACOBIAN_LENS"]}},
            "layers_by_type": {"type": "object", "additionalProperties": {
                "type": "array", "items": {"type": "integer"}}},
            "top_n": {"type": "integer"}, "prompt_len": {"type": "integer"},
            "num_completion_tokens": {"type": "integer"}, "temperature": {"type": "number"},
            "prepend_bos": {"type": "boolean"}, "reuse_len": {"type": "integer"},
        },
    },
    "prompt": {
        "type": "object",
        "required": ["kind", "tokens"],
        "properties": {"tokens": {"type": "array", "items": {
            "type": "object", "required": ["position", "token", "id"], "properties": _TOKEN}}},
    },
    "token": {
        "type": "object",
        "required": ["kind", "position", "token", "id", "is_generated", "results"],
        "properties": {**_TOKEN, "results": {"type": "array", "items": _SLICE}},
    },
    "done": {
        "type": "object",
        "required": ["kind", "seq_len", "prompt_len", "vocab_size", "completion"],
        "properties": {"seq_len": {"type": "integer"}, "prompt_len": {"type": "integer"},
                       "vocab_size": {"type": "integer"}, "completion": {"type": "string"}},
    },
}  # fmt: skip


def lens_frames_fit(answer: dict[str, Any]) -> None:
    """lens/prompt's unstreamed answer: its meta, token and done frames in their shapes."""
    frames = [answer["meta"], *answer["tokens"], answer["done"]]
    for frame in frames:
        assert contract.problems(frame, FRAMES[frame["kind"]]) == [], frame
    assert [f["kind"] for f in frames] == ["meta", *["token"] * len(answer["tokens"]), "done"]


def brute_force_all(
    dense_by_source: dict[str, torch.Tensor], by_index: list[int], n: int
) -> list[tuple[str, int]]:
    """activation/all's ranking by hand: features by their largest activation (or their sum at
    `by_index`), the BOS at 0 left out, ties in source then feature order."""
    rows = []
    for source, dense in dense_by_source.items():
        dense = dense.clone()
        dense[0] = 0  # ignoreBos: position 0 is the BOS
        for feature in range(dense.shape[1]):
            column = dense[:, feature]
            key = float(column[by_index].sum()) if by_index else float(column.max())
            if key > 0:
                rows.append((-key, list(dense_by_source).index(source), feature, source))
    return [(source, feature) for _, _, feature, source in sorted(rows)[:n]]


def every_route_fits_the_contract(client: Any, d_model: int) -> dict[str, Any]:
    """One request per served route, each one the contract allows, each answer 200 and in the
    contract's response shape; the answers by route."""
    bodies = route_bodies(d_model)
    assert sorted(bodies) == sorted(SERVED)
    answers = {}
    for path, body in bodies.items():
        # The request itself is one the contract allows: the test sends what the webapp would.
        assert contract.problems(body, contract.request_schema(path)) == [], path
        answers[path] = ok(client, path, body)
    lens_frames_fit(answers["/v1/lens/prompt"])
    health = client.get("/health")
    assert health.status_code == 200
    assert contract.problems(health.json(), response_schema("/health", "get")) == []
    return answers
