"""The lens over a generation over HTTP: `POST /v1/lens/generate` as server-sent events.

Read raw (one `data:` event per position, then `[DONE]`) and through the remote backend, each
step equal to the in-process eager model's (`local`): ids identical, probabilities to 1e-6, the
steering carried. A refusal (an unknown lens name, `top_n` over the server's cap) is a JSON error
with its status before any event, and the remote backend raises it as the core's class.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from interp_core import sync
from interp_core.errors import InvalidArgument
from interp_core.readouts import LensSpec
from interp_core.steering import SteeringSpec
from interp_serve.wire import specs_to_json


def _events(server: Any, body: dict[str, Any]) -> tuple[str, list[Any]]:
    with server.client() as client:
        with client.stream("POST", "/v1/lens/generate", json=body) as response:
            assert response.status_code == 200, response.read()
            kind = response.headers["content-type"]
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    return kind, [line[len("data: ") :] for line in lines]


def test_the_stream_is_one_event_per_position_equal_to_eager(server: Any, local: Any) -> None:
    tokens = local.to_tokens("The quick brown fox")[0].tolist()
    steering = SteeringSpec("resid_post.0", [0.5] * local.d_model, scale=2.0)
    body = {
        "tokens": tokens,
        "lenses": [{"layers": None}, "logit"],
        "top_n": 4,
        "max_new_tokens": 5,
        "skip_before": 2,
        "temperature": 0.0,
        "steering": specs_to_json([steering]),
    }
    kind, events = _events(server, body)
    assert kind.startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    steps = [json.loads(e) for e in events[:-1]]
    want = list(
        sync.generate_with_lens(
            local,
            [tokens],
            [LensSpec(None), "logit"],
            top_n=4,
            max_new_tokens=5,
            skip_before=2,
            temperature=0.0,
            steering=steering,
        )
    )
    assert [s["position"] for s in steps] == list(range(2, len(tokens) + 4))
    assert len(steps) == len(want)
    for got, expected in zip(steps, want, strict=True):
        assert got["token_id"] == expected.token_id
        assert got["next_token_id"] == expected.next_token_id
        assert got["is_generated"] == expected.is_generated
        for index in range(2):
            assert got["top_ids"][index] == expected.top_ids[index].tolist()
            torch.testing.assert_close(
                torch.tensor(got["top_probs"][index]),
                expected.top_probs[index],
                atol=1e-6,
                rtol=0,
            )
    assert steps[-1]["finish_reason"] == "length"
    assert all(s["finish_reason"] is None for s in steps[:-1])


def test_the_remote_backend_streams_the_same_steps(remote: Any, local: Any) -> None:
    tokens = local.to_tokens("The quick brown fox")
    options = {"top_n": 3, "max_new_tokens": 4, "temperature": 0.0}
    got = list(sync.generate_with_lens(remote, tokens, [LensSpec([1, 0])], **options))
    want = list(sync.generate_with_lens(local, tokens, [LensSpec([1, 0])], **options))
    assert [(s.position, s.token_id) for s in got] == [(s.position, s.token_id) for s in want]
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a.top_ids[0], b.top_ids[0])
        torch.testing.assert_close(a.top_probs[0], b.top_probs[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("change", "words"),
    [({"lenses": ["no-such-lens"]}, "no-such-lens"), ({"top_n": 10**6}, "cap")],
)
def test_a_refusal_is_a_json_error_before_any_event(
    server: Any, remote: Any, local: Any, change: dict[str, Any], words: str
) -> None:
    tokens = local.to_tokens("The quick brown fox")[0].tolist()
    body = {"tokens": tokens, "lenses": ["logit"], "max_new_tokens": 2, **change}
    with server.client() as client:
        response = client.post("/v1/lens/generate", json=body)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    assert words in response.text
    with pytest.raises(InvalidArgument, match=words):
        lenses = change.get("lenses", ["logit"])
        options = {"top_n": change.get("top_n", 10), "max_new_tokens": 2}
        list(sync.generate_with_lens(remote, [tokens], lenses, **options))
