"""The OpenAI-compatible routes, driven by the official `openai` client and by curl-like httpx.

Completions and chat, plain and streamed, must carry the same tokens the library generates
in-process; the `interp` extension (through the client's `extra_body`) returns the capture's
handle, whose safetensors bytes equal the in-process capture.
"""

from __future__ import annotations

import json
import math
from typing import Any

import openai
import pytest
import torch
from safetensors.torch import load

from interp_core import sync
from interp_core.steering import SteeringSpec
from interp_testmodels.tokenizer import TEST_PROMPT


@pytest.fixture(scope="module")
def client(server: Any) -> Any:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.keys[0], max_retries=0) as c:
        yield c


def _name(client: Any) -> str:
    return client.models.list().data[0].id


def test_models_lists_the_served_model(client: Any, model_path: Any) -> None:
    models = client.models.list().data
    assert [m.id for m in models] == [str(model_path)]


def test_completion_equals_in_process_generation(client: Any, local: Any) -> None:
    answer = client.completions.create(
        model=_name(client), prompt=TEST_PROMPT, max_tokens=7, temperature=0
    )
    ids = local.to_tokens(TEST_PROMPT)
    expected = sync.generate(local, ids, max_new_tokens=7, temperature=0.0)
    assert answer.choices[0].text == expected.text
    assert answer.choices[0].finish_reason == expected.finish_reason
    assert answer.usage.prompt_tokens == ids.shape[1]
    assert answer.usage.completion_tokens == len(expected.token_ids)


def test_streamed_completion_joins_to_the_same_text(client: Any, local: Any) -> None:
    stream = client.completions.create(
        model=_name(client), prompt=TEST_PROMPT, max_tokens=7, temperature=0, stream=True
    )
    pieces = [chunk.choices[0].text for chunk in stream]
    expected = sync.generate(local, local.to_tokens(TEST_PROMPT), max_new_tokens=7, temperature=0.0)
    assert "".join(pieces) == expected.text
    assert len(pieces) == len(expected.token_ids)


def test_chat_uses_the_chat_template(client: Any, local: Any) -> None:
    messages = [{"role": "user", "content": "The quick brown fox"}]
    answer = client.chat.completions.create(
        model=_name(client), messages=messages, max_tokens=5, temperature=0
    )
    text = local.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = local.to_tokens(text, prepend_bos=False)
    expected = sync.generate(local, ids, max_new_tokens=5, temperature=0.0)
    assert answer.choices[0].message.content == expected.text
    assert answer.choices[0].message.role == "assistant"
    streamed = client.chat.completions.create(
        model=_name(client), messages=messages, max_tokens=5, temperature=0, stream=True
    )
    chunks = list(streamed)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected.text


def test_interp_capture_and_steering_through_extra_body(
    client: Any, server: Any, local: Any
) -> None:
    vector = [math.cos(0.3 * i) for i in range(local.d_model)]
    interp = {
        "capture": ["resid_post.1"],
        "steering": [{"address": "resid_post.0", "vector": vector, "scale": 1.5}],
        "lens": {"top_k": 3, "layers": [1]},
    }
    answer = client.completions.create(
        model=_name(client),
        prompt=TEST_PROMPT,
        max_tokens=4,
        temperature=0,
        extra_body={"interp": interp},
    )
    meta = answer.model_extra["interp"]
    ids = local.to_tokens(TEST_PROMPT)
    spec = SteeringSpec("resid_post.0", vector, scale=1.5)
    generation, cache = sync.capture_generation(
        local, ids, ["resid_post.1"], max_new_tokens=4, steering=spec
    )
    assert meta["token_ids"] == list(generation.token_ids)
    assert meta["text"] == answer.choices[0].text == generation.text
    prompt = ids.shape[1]
    assert meta["positions"] == {"prompt": [0, prompt], "generated": [prompt, prompt + 3]}
    assert meta["tensors"]["resid_post.1"]["shape"] == list(cache["resid_post.1"].shape)
    with server.client() as http:
        data = http.get(meta["url"])
    assert data.status_code == 200
    assert data.headers["content-type"] == "application/octet-stream"
    fetched = load(data.content)
    assert torch.allclose(fetched["resid_post.1"], cache["resid_post.1"], atol=1e-6, rtol=0)
    lens = sync.logit_lens(local, ids, [1], top_k=3)
    got = meta["lens"]["predictions"]["1"]
    assert [[p[0] for p in row] for row in got] == [
        [p.token_id for p in row] for row in lens.predictions[1]
    ]


def test_inline_activations(server: Any, local: Any, client: Any) -> None:
    body = {
        "model": _name(client),
        "prompt": TEST_PROMPT,
        "max_tokens": 2,
        "temperature": 0,
        "interp": {"capture": ["resid_post.0"], "inline": True},
    }
    with server.client() as http:
        meta = http.post("/v1/completions", json=body).json()["interp"]
    _, cache = sync.capture_generation(
        local, local.to_tokens(TEST_PROMPT), ["resid_post.0"], max_new_tokens=2
    )
    assert torch.allclose(
        torch.tensor(meta["inline"]["resid_post.0"]), cache["resid_post.0"], atol=1e-6, rtol=0
    )


def test_unserved_fields_are_refused_not_ignored(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.completions.create(model=_name(client), prompt="x", max_tokens=2, n=2, stream=True)
    assert "n=2" in str(error.value)
    with pytest.raises(openai.BadRequestError) as error:
        client.completions.create(model="other-model", prompt="x", max_tokens=2)
    assert "is not served here" in str(error.value)


def test_sse_wire_format(server: Any, client: Any) -> None:
    body = {
        "model": _name(client),
        "prompt": "abc",
        "max_tokens": 3,
        "temperature": 0,
        "stream": True,
    }
    with server.client() as http, http.stream("POST", "/v1/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert len(chunks) == 3
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "text_completion" for c in chunks)
